"""Carrying out a plan's steps: fetch, build and unpack what the plan names; the only stage that
runs subprocesses. Each step returns members for the writer and analyses for the audit."""

from __future__ import annotations

import configparser
import dataclasses
import importlib.resources
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from retfwheel.build.bootstrap_config import BootstrapConfig, Distribution, check_bootstrap_schema
from retfwheel.build.injection import InjectionError, api_block, append, bootstrap_block, inject, ops_block
from retfwheel.build.oplib import LIBRARY_DIR, OPS_LIBRARY, build_info, compile_library, python_files
from retfwheel.build.plan import (
    BOOTSTRAP_MODULE,
    DEPS_DIR,
    PACKAGE,
    SCRIPTS_MODULE,
    BuildOps,
    BuildPlan,
    CopyMember,
    InjectBootstrap,
    NewMember,
    VendorDependencies,
    VendorRuntime,
)
from retfwheel.build.runtime import obtain_runtime
from retfwheel.build.sharing import LAZY, NOT_SERVED, Dependency, Share, importable_names, sharing_table
from retfwheel.errors import RecipeError, WheelFormatError
from retfwheel.native.elf import ElfInfo, read_elf
from retfwheel.native.scan import verified_elves
from retfwheel.target.lock import fetch_locked
from retfwheel.target.recipe import Recipe
from retfwheel.wheelfile.archive import Archive, MemberView, read_content
from retfwheel.wheelfile.record import file_sha256
from retfwheel.wheelfile.wheel import read_wheel

Progress = Callable[[str], None]
_DROPPED_DATA = ("scripts", "headers", "data")


@dataclass(frozen=True)
class Materialized:
    members: tuple[CopyMember | NewMember, ...]
    elves: tuple[ElfInfo, ...]  # ELF files among ``members``, under their output names
    notes: tuple[str, ...]  # what was done, for the plan's changes and provenance
    runtime: ElfInfo | None  # the vendored libstdc++, if any


@dataclass(frozen=True)
class _Vendored:
    members: tuple[CopyMember | NewMember, ...]
    elves: tuple[ElfInfo, ...]
    shares: tuple[Share, ...]  # how each vendored distribution is served
    entry_points: dict[str, str]  # console script -> "module:attr" across vendored distributions
    notes: tuple[str, ...]


def materialize(plan: BuildPlan, recipe: Recipe, archive: Archive, cache: Path, target_python: Path | None,
                progress: Progress) -> Materialized:
    """Run the plan's steps; ``archive`` is the input wheel."""
    members: list[CopyMember | NewMember] = []
    elves: list[ElfInfo] = []
    notes: list[str] = []
    runtime = None
    vendored = None
    for step in plan.steps:
        if isinstance(step, VendorRuntime):
            progress(f"obtaining libstdc++ from {step.spec.source}")
            data, origin = obtain_runtime(step.spec, recipe.target.arch, cache)
            runtime = read_elf(step.dest, MemberView(iter([data]), len(data)))
            members.append(NewMember(step.dest, data, executable=True))
            elves.append(runtime)
            provided = runtime.newest_provided("GLIBCXX")
            notes.append(f"vendored libstdc++.so.6 (GLIBCXX_{'.'.join(map(str, provided or ()))}) from {origin} as {step.dest}: {step.reason}")
        elif isinstance(step, VendorDependencies):
            vendored = _vendor_dependencies(step, plan, recipe, cache, target_python, progress)
            members += vendored.members
            elves += vendored.elves
            notes += vendored.notes
        elif isinstance(step, BuildOps):
            ops_members, ops_elf, note = _build_ops(plan, step, archive, cache, progress)
            members += ops_members
            elves.append(ops_elf)
            notes.append(note)
        elif isinstance(step, InjectBootstrap):
            runtime_step = next((s for s in plan.steps if isinstance(s, VendorRuntime)), None)
            config = _bootstrap_config(plan, step, runtime_step, runtime, vendored, elves)
            members += _bootstrap_members(plan, step, config, vendored)
            notes.append(f"bootstrap injected into {step.init_name} ({BOOTSTRAP_MODULE})")
            if step.ops_library:
                notes.append(f"{step.ops_library} registered while `import tensorflow` runs (RETF_OPS=0 leaves it out)")
            if step.api == "v1":
                notes.append("`import tensorflow` exposes the TF 1.x API with 1.x behaviour (RETF_API=2 keeps 2.x); "
                             f"tf.contrib explains its replacements; sparse Adam: {step.v1_sparse_adam}")
            if step.runtime_env:
                notes.append("runtime defaults: " + ", ".join(f"{k}={v}" for k, v in step.runtime_env))
    return Materialized(tuple(members), tuple(elves), tuple(notes), runtime)


def _build_ops(plan: BuildPlan, step: BuildOps, archive: Archive, cache: Path, progress: Progress):
    data, identity = compile_library(archive, plan.input_sha256, step.flags, step.builder, step.compiler, step.suite, cache, progress)
    name = OPS_LIBRARY
    members = [NewMember(path, content) for path, content in python_files().items()]
    members.append(NewMember(name, data, executable=True))
    members.append(NewMember(f"{LIBRARY_DIR}/_build_info.json", build_info(plan.tensorflow_version, identity, step.flags)))
    elf = read_elf(name, MemberView(iter([data]), len(data)))
    return members, elf, f"built the retf op library ({name}) with {identity}, -std={step.flags.std}, " \
                         f"_GLIBCXX_USE_CXX11_ABI={step.flags.cxx11_abi}, EIGEN_MAX_ALIGN_BYTES={step.flags.eigen_align}"


def _vendor_dependencies(step: VendorDependencies, plan: BuildPlan, recipe: Recipe, cache: Path,
                         target_python: Path | None, progress: Progress) -> _Vendored:
    wheels = fetch_locked(step.lock, recipe, cache, target_python, progress)
    members: list[CopyMember | NewMember] = []
    elves: list[ElfInfo] = []
    dependencies: list[Dependency] = []
    entry_points: dict[str, str] = {}
    dropped: list[str] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    progress(f"verifying {len(wheels)} vendored wheels")
    for path in wheels:
        wheel = read_wheel(path)
        if str(wheel.name) in NOT_SERVED:
            skipped.append(f"{wheel.metadata_name} ({NOT_SERVED[wheel.name]})")
            continue
        scan_elves = verified_elves(wheel, file_sha256(wheel.path), cache)
        renamed: dict[str, str] = {}
        files: list[tuple[str, str]] = []
        for member in wheel.archive.members:
            name = _vendored_name(member.name, wheel.dist_info, wheel.data_dir)
            if name is None:
                dropped.append(f"{wheel.metadata_name}:{member.name}")
                continue
            dest = f"{step.dest}/{name}"
            if dest in seen:
                raise WheelFormatError(f"{path.name} and {seen[dest]} both provide {name}")
            seen[dest] = path.name
            renamed[member.name] = dest
            if member.name == wheel.record_path or member.name not in wheel.record:
                members.append(NewMember(dest, read_content(wheel.archive, member), member.executable))
            else:
                members.append(CopyMember(dest, member, wheel.record[member.name].hash, wheel.archive))
            if not name.startswith(wheel.dist_info + "/"):
                files.append((name, str(wheel.version)))
        elves += [_renamed(elf, renamed[elf.path]) for elf in scan_elves if elf.path in renamed]
        entry = wheel.archive.member(f"{wheel.dist_info}/entry_points.txt")
        if entry is not None:
            entry_points.update(_console_scripts(read_content(wheel.archive, entry)))
        modules, namespaces = importable_names(files)
        dependencies.append(Dependency(wheel.metadata_name, str(wheel.version), wheel.requires_dist,
                                       tuple(sorted(m for m in modules if m not in namespaces))))
    shares = sharing_table(plan.input_name, plan.input_requires, dependencies, recipe.target)
    notes = [f"vendored {len(dependencies)} locked distributions into {step.dest}/ (lock {step.lock.path.name}), "
             f"each served only where the environment lacks it or has it outside the range the input works with"]
    notes += [f"range of {s.name}: the input's {s.correction.pinned} taken as {s.correction.range} ({s.correction.reason})"
              for s in shares if s.correction]
    if skipped:
        notes.append(f"not vendored, left to the environment: {'; '.join(skipped)}")
    if dropped:
        notes.append(f"left out {len(dropped)} files pip would put outside site-packages or .pth files "
                     f"({', '.join(sorted(dropped)[:3])}{', ...' if len(dropped) > 3 else ''})")
    return _Vendored(tuple(members), tuple(elves), shares, entry_points, tuple(notes))


def _vendored_name(name: str, dist_info: str, data_dir: str) -> str | None:
    """Where a member of a vendored wheel goes inside the private folder (None: left out)."""
    if name.startswith(data_dir + "/"):
        rest = name[len(data_dir) + 1 :]
        kind, _, path = rest.partition("/")
        return path if kind in ("purelib", "platlib") and path else None
    if "/" not in name and name.endswith(".pth"):
        return None  # .pth files are not processed outside site-packages; namespaces are the bootstrap's job
    return name


def _console_scripts(data: bytes) -> dict[str, str]:
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names' case
    parser.read_string(data.decode("utf-8"))
    return dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}


def _renamed(elf: ElfInfo, path: str) -> ElfInfo:
    return dataclasses.replace(elf, path=path)


def _bootstrap_config(plan: BuildPlan, step: InjectBootstrap, runtime_step: VendorRuntime | None,
                      runtime: ElfInfo | None, vendored: _Vendored | None, built: list[ElfInfo]) -> BootstrapConfig:
    libstdcxx: str | None = None
    needed: tuple[int, ...] = ()
    if runtime_step and runtime:
        newest = max([runtime_step.needed] + [v for e in built if e is not runtime and (v := e.newest("GLIBCXX"))])
        if runtime_step.spec.vendor == "always":
            newest = max(newest, runtime.newest_provided("GLIBCXX") or newest)
        libstdcxx, needed = runtime_step.dest, tuple(newest)
    distributions: tuple[Distribution, ...] = ()
    lazy: tuple[str, ...] = ()
    if vendored:
        distributions = tuple(Distribution(s.name, s.version, s.range, s.modules) for s in vendored.shares
                              if not s.not_served)
        modules = {m for share in vendored.shares for m in share.modules}
        lazy = tuple(sorted(m for m in LAZY if m in modules))
    return BootstrapConfig(label=f"{plan.name} {plan.version}", conflicts=step.conflicts, env=step.runtime_env,
                           libstdcxx=libstdcxx, glibcxx_needed=needed, deps=DEPS_DIR if vendored else None,
                           distributions=distributions, lazy=lazy)


def _bootstrap_members(plan: BuildPlan, step: InjectBootstrap, config: BootstrapConfig,
                       vendored: _Vendored | None) -> list[NewMember]:
    source = (importlib.resources.files("retfwheel.bootstrap") / "retf_bootstrap.py").read_bytes()
    check_bootstrap_schema(source, "bootstrap/retf_bootstrap.py")
    try:
        patched = inject(step.init_source, bootstrap_block(BOOTSTRAP_MODULE, config.to_json()), step.init_name)
        if step.ops_library:  # before the 1.x API block, which picks sparse Adam by whether they are registered
            patched = append(patched, ops_block(BOOTSTRAP_MODULE, {"library": step.ops_library, "label": config.label}),
                             step.init_name)
        if step.api == "v1":
            patched = append(patched, api_block(BOOTSTRAP_MODULE, {"v1_sparse_adam": step.v1_sparse_adam}), step.init_name)
    except InjectionError as exc:
        raise WheelFormatError(str(exc)) from exc
    members = [
        NewMember(step.init_name, patched),
        NewMember(BOOTSTRAP_MODULE.replace(".", "/") + ".py", source),
    ]
    if step.api == "v1":
        members.append(NewMember(f"{PACKAGE}/contrib/__init__.py", _CONTRIB))
    scripts, module = _scripts(step, vendored)
    if step.entry_points_name is not None or scripts:
        members.append(NewMember(step.entry_points_name or f"{plan.dist_info}/entry_points.txt", scripts))
    if module:
        members.append(NewMember(SCRIPTS_MODULE.replace(".", "/") + ".py", module))
    return members


def _scripts(step: InjectBootstrap, vendored: _Vendored | None) -> tuple[bytes, bytes | None]:
    """entry_points.txt of the output, and the module its rerouted scripts call (if any).

    Scripts of TensorFlow itself import tensorflow first, so they pass through the bootstrap
    anyway. Scripts that start in another package are rerouted through a shim that imports
    tensorflow first, unless the target environment owns that script name (then it is not claimed,
    so uninstalling this wheel never deletes the environment's script).
    """
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names' case
    if step.entry_points_source:
        parser.read_string(step.entry_points_source.decode("utf-8"))
    if not parser.has_section("console_scripts"):
        parser.add_section("console_scripts")
    scripts = parser["console_scripts"]
    rerouted: dict[str, str] = {}
    for name in list(scripts):
        target = scripts[name].strip()
        module = target.split(":")[0].strip()
        if module == PACKAGE or module.startswith(PACKAGE + "."):
            continue
        del scripts[name]
        if name not in step.environment_scripts:
            rerouted[name] = target
    available = vendored.entry_points if vendored else {}
    for script, published in sorted(step.scripts.items()):
        if script not in available:
            raise RecipeError([f"[deps] scripts: no vendored distribution declares a console script '{script}'"])
        if published in step.environment_scripts:
            raise RecipeError([f"[deps] scripts: '{published}' is owned by the target environment; publish it under another name"])
        rerouted[published] = available[script]
    functions = []
    for published, target in sorted(rerouted.items()):
        function = "script_" + re.sub(r"\W", "_", published)
        scripts[published] = f"{SCRIPTS_MODULE}:{function}"
        functions.append(f"\n\ndef {function}():\n    return _run({target.strip()!r})\n")
    text = io.StringIO()
    parser.write(text)
    entry_points = text.getvalue().encode("utf-8")
    if not functions:
        return entry_points, None
    return entry_points, (_SHIM + "".join(functions)).encode("utf-8")


_CONTRIB = b'''"""tf.contrib is not part of TensorFlow 2.x; importing it says what replaced it."""
from tensorflow._retf_bootstrap import CONTRIB_MESSAGE

raise ImportError(CONTRIB_MESSAGE)
'''

_SHIM = '''"""Console scripts of packages vendored by retfwheel. Each imports tensorflow first, whose bootstrap
routes the vendored packages, then runs the script. Generated; do not edit."""
import importlib


def _run(target):
    import tensorflow  # noqa: F401
    module, _, attribute = target.partition(":")
    function = importlib.import_module(module.strip())
    for part in attribute.strip().split("."):
        function = getattr(function, part)
    return function()
'''
