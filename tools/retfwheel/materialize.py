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


from retfwheel.elf import ElfInfo, read_elf
from retfwheel.archive import Archive, MemberView, read_content
from retfwheel.errors import RecipeError, WheelFormatError
from retfwheel.injection import InjectionError, api_block, append, bootstrap_block, inject, ops_block
from retfwheel.lock import fetch_locked
from retfwheel.oplib import LIBRARY_DIR, OPS_LIBRARY, build_info, compile_library, python_files
from retfwheel.plan import (
    BOOTSTRAP_MODULE,
    BuildOps,
    DEPS_DIR,
    PACKAGE,
    SCRIPTS_MODULE,
    BuildPlan,
    CopyMember,
    InjectBootstrap,
    NewMember,
    VendorDependencies,
    VendorRuntime,
)
from retfwheel.recipe import Recipe
from retfwheel.record import file_sha256
from retfwheel.runtime import obtain_runtime
from retfwheel.scan import verified_elves
from retfwheel.wheel import read_wheel

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
    members: list
    elves: list
    modules: dict[str, str]  # import name -> version of the distribution providing it
    namespaces: list[str]
    entry_points: dict[str, str]  # console script -> "module:attr" across vendored distributions
    notes: list[str]


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
            vendored = _vendor_dependencies(step, recipe, cache, target_python, progress)
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


def _vendor_dependencies(step: VendorDependencies, recipe: Recipe, cache: Path, target_python: Path | None, progress: Progress) -> _Vendored:
    wheels = fetch_locked(step.lock, recipe, cache, target_python, progress)
    result = _Vendored([], [], {}, [], {}, [])
    dropped: list[str] = []
    seen: dict[str, str] = {}
    files: list[tuple[str, str]] = []
    progress(f"verifying {len(wheels)} vendored wheels")
    for path in wheels:
        wheel = read_wheel(path)
        scan_elves = verified_elves(wheel, file_sha256(wheel.path), cache)
        version = str(wheel.version)
        renamed: dict[str, str] = {}
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
                result.members.append(NewMember(dest, read_content(wheel.archive, member), member.executable))
            else:
                result.members.append(CopyMember(dest, member, wheel.record[member.name].hash, wheel.archive))
            if not name.startswith(wheel.dist_info + "/"):
                files.append((name, version))
        for elf in scan_elves:
            if elf.path in renamed:
                result.elves.append(_renamed(elf, renamed[elf.path]))
        entry_points = wheel.archive.member(f"{wheel.dist_info}/entry_points.txt")
        if entry_points is not None:
            result.entry_points.update(_console_scripts(read_content(wheel.archive, entry_points)))
    modules, namespaces = importable_names(files)
    result.modules.update(modules)
    result.namespaces.extend(namespaces)
    result.notes.append(f"vendored {len(wheels)} locked distributions into {step.dest}/ (lock {step.lock.path.name})")
    if dropped:
        result.notes.append(f"left out {len(dropped)} files pip would put outside site-packages or .pth files "
                            f"({', '.join(sorted(dropped)[:3])}{', ...' if len(dropped) > 3 else ''})")
    return result


def _vendored_name(name: str, dist_info: str, data_dir: str) -> str | None:
    """Where a member of a vendored wheel goes inside the private folder (None: left out)."""
    if name.startswith(data_dir + "/"):
        rest = name[len(data_dir) + 1 :]
        kind, _, path = rest.partition("/")
        return path if kind in ("purelib", "platlib") and path else None
    if "/" not in name and name.endswith(".pth"):
        return None  # .pth files are not processed outside site-packages; namespaces are the bootstrap's job
    return name


_MODULE_FILE = re.compile(r"(\.cpython-[^./]+)?\.(py|so)$")


def importable_names(files: list[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """Top-level modules (and portions of namespace packages) among vendored ``(path, version)`` files.

    A folder without __init__.py is a namespace (like google/): its sub-packages are named instead.
    """
    packages = {path.split("/", 1)[0] for path, _ in files if path.count("/") == 1 and path.endswith("/__init__.py")}
    modules: dict[str, str] = {}
    namespaces: set[str] = set()
    for path, version in files:
        top, _, rest = path.partition("/")
        if not rest:
            module = _MODULE_FILE.sub("", top)
            if module != top and module.isidentifier():
                modules.setdefault(module, version)
        elif top in packages:
            modules.setdefault(top, version)
        elif top.isidentifier() and not top.endswith(("dist-info", "data")):
            namespaces.add(top)
            second = _MODULE_FILE.sub("", rest.partition("/")[0])
            if second.isidentifier():
                modules.setdefault(f"{top}.{second}", version)
    return modules, sorted(namespaces)


def _console_scripts(data: bytes) -> dict[str, str]:
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str
    parser.read_string(data.decode("utf-8"))
    return dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}


def _renamed(elf: ElfInfo, path: str) -> ElfInfo:
    return dataclasses.replace(elf, path=path)


def _bootstrap_config(plan: BuildPlan, step: InjectBootstrap, runtime_step: VendorRuntime | None,
                      runtime: ElfInfo | None, vendored: _Vendored | None, built: list[ElfInfo]) -> dict:
    config: dict = {"label": f"{plan.name} {plan.version}", "conflicts": step.conflicts}
    if step.runtime_env:
        config["env"] = dict(step.runtime_env)
    if runtime_step and runtime:
        needed = max([runtime_step.needed] + [e.newest("GLIBCXX") for e in built if e is not runtime and e.newest("GLIBCXX")])
        if runtime_step.spec.vendor == "always":
            needed = max(needed, runtime.newest_provided("GLIBCXX") or needed)
        config["libstdcxx"] = runtime_step.dest
        config["glibcxx_needed"] = list(needed)
    if vendored:
        config["deps"] = DEPS_DIR
        # Namespace packages whose portions are not all vendored are checked per portion instead.
        config["modules"] = {k: v for k, v in vendored.modules.items() if k not in vendored.namespaces}
        config["namespaces"] = sorted(vendored.namespaces)
        if step.accept:
            config["accept"] = dict(step.accept)
    return config


def _bootstrap_members(plan: BuildPlan, step: InjectBootstrap, config: dict, vendored: _Vendored | None) -> list[NewMember]:
    try:
        patched = inject(step.init_source, bootstrap_block(BOOTSTRAP_MODULE, config), step.init_name)
        if step.ops_library:  # before the 1.x API block, which picks sparse Adam by whether they are registered
            patched = append(patched, ops_block(BOOTSTRAP_MODULE, {"library": step.ops_library, "label": config["label"]}),
                             step.init_name)
        if step.api == "v1":
            patched = append(patched, api_block(BOOTSTRAP_MODULE, {"v1_sparse_adam": step.v1_sparse_adam}), step.init_name)
    except InjectionError as exc:
        raise WheelFormatError(str(exc)) from exc
    source = (importlib.resources.files("retfwheel.bootstrap") / "retf_bootstrap.py").read_bytes()
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
    parser.optionxform = str
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
puts the vendored packages first on sys.path, then runs the script. Generated; do not edit."""
import importlib


def _run(target):
    import tensorflow  # noqa: F401
    module, _, attribute = target.partition(":")
    function = importlib.import_module(module.strip())
    for part in attribute.strip().split("."):
        function = getattr(function, part)
    return function()
'''
