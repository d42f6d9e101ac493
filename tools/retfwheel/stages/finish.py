"""Finishing a plan from its steps' results (pure): the bootstrap and its configuration, console
scripts, then tags, file name, WHEEL and provenance from every ELF file shipped."""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import io
import re
from pathlib import Path

from packaging.utils import canonicalize_name

from retfwheel.errors import RecipeError, TargetMismatchError, WheelFormatError
from retfwheel.features import BY_KEY
from retfwheel.native.elf import ElfInfo
from retfwheel.stages.audit import refuse_newer_glibc
from retfwheel.stages.bootstrap_config import (
    ApiSettings,
    BootstrapConfig,
    Distribution,
    OpsSettings,
    check_bootstrap_schema,
)
from retfwheel.stages.materialize import StepResults, VendoredResult
from retfwheel.stages.oplib import OPS_LIBRARY
from retfwheel.stages.plan import (
    BOOTSTRAP_FILE,
    BOOTSTRAP_MODULE,
    DEPS_DIR,
    OPS_MODULE,
    PACKAGE,
    SCRIPTS_MODULE,
    TF115_CHECK_SCRIPT,
    TF115_EXPORT_MODULE,
    V1_API_MODULE,
    BuildOps,
    BuildPlan,
    CopyMember,
    InjectBootstrap,
    NewMember,
    VendorDependencies,
    VendorRuntime,
    platform_tags,
    with_tags,
)
from retfwheel.stages.sbom import SBOM_NAME, Part, make_sbom, pypi_purl
from retfwheel.stages.sharing import LAZY, metadata_folder
from retfwheel.targets.recipe import Recipe
from retfwheel.tree import BOOTSTRAP_FILES, V1_API_FILES, wheel_files
from retfwheel.wheelfile.injection import InjectionError, api_block, append, bootstrap_block, inject, ops_block


def finish(plan: BuildPlan, recipe: Recipe, results: StepResults, input_elves: tuple[ElfInfo, ...],
           where: Path) -> BuildPlan:
    """The final plan: the input's members, the steps' members and the patched package, tagged by every
    ELF file shipped (``input_elves``: the input's, under their output names)."""
    members: list[CopyMember | NewMember] = []
    notes: list[str] = []
    if results.ops:
        members += results.ops.members
        notes.append(results.ops.note)
    if results.runtime:
        members.append(results.runtime.member)
        notes.append(results.runtime.note)
    inject_step = next((s for s in plan.steps if isinstance(s, InjectBootstrap)), None)
    # the input's modules that import the private_names ones, rewritten; the package's __init__, if among them, is
    # the source the bootstrap is injected into
    rewritten = {m.name: m for m in results.vendored.replaced} if results.vendored else {}
    both = sorted(rewritten.keys() & {m.name for m in results.extended})
    if both:
        raise TargetMismatchError(f"{', '.join(both)}: rewritten both for [deps] private_names and for DeepRec's "
                                  "fields, which one build does not combine",
                                  hint="set [features] deeprec_api = false, or drop the distribution it imports from "
                                       "[deps] private_names")
    rewritten.update({m.name: m for m in results.extended})
    if results.vendored:
        members += results.vendored.members
        notes += results.vendored.notes
    if rewritten:
        plan = dataclasses.replace(plan, members=tuple(m for m in plan.members if m.name not in rewritten))
        members += [m for name, m in rewritten.items() if not (inject_step and name == inject_step.init_name)]
    if inject_step is not None and inject_step.init_name in rewritten:
        inject_step = dataclasses.replace(inject_step, init_source=rewritten[inject_step.init_name].data)
    runtime_step = next((s for s in plan.steps if isinstance(s, VendorRuntime)), None)
    members.append(NewMember(f"{plan.dist_info}/{SBOM_NAME}",
                             make_sbom(plan.name, plan.version, plan.tool_version, sbom_parts(plan, runtime_step, results))))
    if inject_step is not None:
        config = _bootstrap_config(plan, inject_step, runtime_step, results)
        ops_needs = next((e.newest("GLIBCXX") for e in results.elves if e.path == OPS_LIBRARY), None)
        members += _bootstrap_members(plan, inject_step, config, results.vendored, ops_needs)
        notes += _bootstrap_notes(inject_step)
    return seal(plan, tuple(members), tuple(notes), input_elves + results.elves, recipe, where)


def sbom_parts(plan: BuildPlan, runtime_step: VendorRuntime | None, results: StepResults) -> tuple[Part, ...]:
    """What the wheel is made of, for its SBOM: the input, the vendored runtime, distributions and op library."""
    parts = [Part("input", plan.input_name, plan.input_version, plan.input_sha256,
                  pypi_purl(plan.input_name, plan.input_version), properties=(("retfwheel:file", plan.input_filename),))]
    if results.runtime and runtime_step:
        runtime = results.runtime
        provided = runtime.elf.newest_provided("GLIBCXX")
        spec = runtime_step.spec
        provider = ((("retfwheel:debian-package", f"{spec.package} {spec.version} ({spec.suite})"),
                     ("retfwheel:debian-package-sha256", spec.sha256)) if spec.source == "debian" else ())
        parts.append(Part("libstdc++", "libstdc++.so.6", "GLIBCXX_" + ".".join(map(str, provided or ())),
                          hashlib.sha256(runtime.member.data).hexdigest(), shipped=runtime_step.dest,
                          properties=(("retfwheel:source", spec.source), ("retfwheel:origin", runtime.origin))
                          + provider))
    vendor_step = next((s for s in plan.steps if isinstance(s, VendorDependencies)), None)
    if results.vendored and vendor_step:
        served = {canonicalize_name(share.name) for share in results.vendored.shares}
        for package in sorted(vendor_step.lock.packages, key=lambda p: canonicalize_name(p.name)):
            if canonicalize_name(package.name) in served:
                parts.append(Part("vendored", package.name, package.version, package.sha256,
                                  pypi_purl(package.name, package.version),
                                  properties=(("retfwheel:locked-file", package.filename),
                                              ("retfwheel:built-here-from-sdist", str(package.kind == "sdist").lower()))))
    ops_step = next((s for s in plan.steps if isinstance(s, BuildOps)), None)
    if results.ops and ops_step:
        library = next(m for m in results.ops.members if m.name == OPS_LIBRARY)
        flags = ops_step.flags
        parts.append(Part("op-library", "retf-ops", plan.tool_version, hashlib.sha256(library.data).hexdigest(),
                          shipped=OPS_LIBRARY,
                          properties=(("retfwheel:sources-sha256", results.ops.sources_sha256),
                                      ("retfwheel:compiler", results.ops.compiler),
                                      ("retfwheel:flags", f"-std={flags.std} -D_GLIBCXX_USE_CXX11_ABI={flags.cxx11_abi} "
                                                          f"-DEIGEN_MAX_ALIGN_BYTES={flags.eigen_align}"))))
    return tuple(parts)


def _bootstrap_notes(step: InjectBootstrap) -> list[str]:
    notes = [f"bootstrap injected into {step.init_name} ({BOOTSTRAP_MODULE})"]
    chosen = [BY_KEY[key].describe(value) for key, value in step.features]
    if step.ops_library:
        notes.append(f"{step.ops_library} registered while `import tensorflow` runs (RETF_OPS=0 leaves it out)")
    if step.api == "v1":
        notes.append("`import tensorflow` exposes the TF 1.x API with 1.x behaviour (RETF_API=2 keeps 2.x); "
                     f"tf.contrib explains its replacements; exports in TF 1.15's form, checked by {TF115_CHECK_SCRIPT} "
                     "(RETF_TF115_EXPORTS=0 keeps 2.x's)")
    if any(chosen):
        notes.append("switches: " + "; ".join(words for words in chosen if words))
    if step.runtime_env:
        notes.append("runtime defaults: " + ", ".join(f"{k}={v}" for k, v in step.runtime_env))
    return notes


def seal(plan: BuildPlan, produced: tuple[CopyMember | NewMember, ...], notes: tuple[str, ...],
              elves: tuple[ElfInfo, ...], recipe: Recipe, where: Path) -> BuildPlan:
    """The final plan once the steps have produced their members: tags from every ELF file shipped."""
    refuse_newer_glibc(elves, recipe.target)
    platforms = platform_tags(elves, where, recipe, frozenset())
    sealed = dataclasses.replace(plan, members=plan.members + tuple(produced), steps=(), changes=plan.changes + notes)
    return with_tags(sealed, platforms)


def _bootstrap_config(plan: BuildPlan, step: InjectBootstrap, runtime_step: VendorRuntime | None,
                      results: StepResults) -> BootstrapConfig:
    runtime = results.runtime.elf if results.runtime else None
    vendored = results.vendored
    built = results.elves
    libstdcxx: str | None = None
    needed: tuple[int, ...] = ()
    needed_by = ""
    wanted: tuple[int, ...] = ()
    if runtime_step and runtime:
        needs = [(v, e.path) for e in built if e is not runtime and (v := e.newest("GLIBCXX"))]
        # The op library is left out of a process whose older libstdc++ was loaded first; the rest is TensorFlow's.
        essential = [(v, path) for v, path in needs if path != OPS_LIBRARY]
        needed, needed_by = max(essential + [(runtime_step.needed, "the input's native code")])
        wanted = max([needed] + [v for v, _ in needs])
        if runtime_step.spec.vendor == "always":
            wanted = max(wanted, runtime.newest_provided("GLIBCXX") or wanted)
        libstdcxx, needed, wanted = runtime_step.dest, tuple(needed), tuple(wanted)
    distributions: tuple[Distribution, ...] = ()
    lazy: tuple[str, ...] = ()
    if vendored:
        distributions = tuple(Distribution(s.name, s.version, s.range, s.modules, metadata_folder(s.name, s.version))
                              for s in vendored.shares
                              if not s.not_served and not s.private_name)
        modules = {m for share in vendored.shares for m in share.modules}
        lazy = tuple(sorted(m for m in LAZY if m in modules))
    return BootstrapConfig(label=f"{plan.name} {plan.version}", dist_info=plan.dist_info, conflicts=step.conflicts,
                           env=step.runtime_env,
                           libstdcxx=libstdcxx, glibcxx_needed=needed, glibcxx_needed_by=needed_by,
                           glibcxx_wanted=wanted, deps=DEPS_DIR if vendored else None,
                           distributions=distributions, lazy=lazy)


def _bootstrap_members(plan: BuildPlan, step: InjectBootstrap, config: BootstrapConfig,
                       vendored: VendoredResult | None, ops_needs: tuple[int, ...] | None) -> list[NewMember]:
    shipped = wheel_files(BOOTSTRAP_FILES)
    check_bootstrap_schema(shipped[BOOTSTRAP_FILE], f"runtime/wheel/{BOOTSTRAP_FILE}")
    try:
        patched = inject(step.init_source, bootstrap_block(BOOTSTRAP_MODULE, config.to_json()), step.init_name)
        if step.ops_library:  # before the 1.x API block, which picks sparse Adam by whether they are registered
            ops = OpsSettings(config.label, step.ops_library, tuple(ops_needs or ()), config.libstdcxx, step.features)
            patched = append(patched, ops_block(OPS_MODULE, ops.to_json()), step.init_name)
        if step.api == "v1":
            api = ApiSettings(config.label, step.features)
            patched = append(patched, api_block(V1_API_MODULE, api.to_json()), step.init_name)
    except InjectionError as exc:
        raise WheelFormatError(str(exc)) from exc
    if step.api == "v1":
        shipped.update(wheel_files(V1_API_FILES))
    members = [NewMember(step.init_name, patched)] + [NewMember(path, data) for path, data in shipped.items()]
    scripts, module = _scripts(step, vendored)
    if step.entry_points_name is not None or scripts:
        members.append(NewMember(step.entry_points_name or f"{plan.dist_info}/entry_points.txt", scripts))
    if module:
        members.append(NewMember(SCRIPTS_MODULE.replace(".", "/") + ".py", module))
    return members


def _scripts(step: InjectBootstrap, vendored: VendoredResult | None) -> tuple[bytes, bytes | None]:
    """entry_points.txt of the output, and the module its rerouted scripts call (if any).

    Scripts of TensorFlow itself import tensorflow first, so they pass through the bootstrap
    anyway. Scripts that start in another package are rerouted through a shim that imports
    tensorflow first, unless the target environment owns that script name too (TF 1.15 and
    tensorboard 1.15 both declare `tensorboard`): then it stays as the input declares it, so the
    command keeps running the environment's own package, this wheel owning the script as the
    replaced TensorFlow did.
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
        if name in step.environment_scripts:
            continue
        del scripts[name]
        rerouted[name] = target
    if step.api == "v1":
        scripts[TF115_CHECK_SCRIPT] = f"{TF115_EXPORT_MODULE}:main"
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
