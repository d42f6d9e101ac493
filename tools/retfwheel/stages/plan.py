"""Planning a build (pure): every output member, the steps that produce the rest, names and tags.

All validation of the input against the recipe happens here, before anything is fetched,
compiled or written; `--dry-run` prints the resulting plan. Steps (vendoring the C++ runtime and
the Python dependencies) are carried out by `materialize`; `finish` then adds the bootstrap and
recomputes what depends on their results (platform tags, file name, WHEEL, provenance).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name
from packaging.version import Version

from retfwheel.errors import AlreadyProcessedError, RecipeError, TargetMismatchError, WheelFormatError
from retfwheel.features import DEFAULTS
from retfwheel.manylinux import installable_platforms, load_policies
from retfwheel.native.elf import ElfInfo, format_version
from retfwheel.native.inspection import Inspection, require_tensorflow
from retfwheel.native.policy import lowest_policy
from retfwheel.native.verdict import Fit, bundled_libraries
from retfwheel.stages.oplib import OPS_LIBRARY, OpFlags
from retfwheel.targets.lock import Lock, locked_scripts, vendored_requirements
from retfwheel.targets.recipe import Recipe, RuntimeSpec, Target
from retfwheel.wheelfile.injection import InjectionError, bootstrap_block, inject
from retfwheel.wheelfile.metadata import rewrite_headers
from retfwheel.wheelfile.protos import ScalarField
from retfwheel.wheelfile.wheel import PROVENANCE_FILE, WheelInfo
from retfwheel.wheelfile.writer import CopyMember, NewMember

_SIGNATURES = ("RECORD.jws", "RECORD.p7s")
PACKAGE = "tensorflow"
BOOTSTRAP_MODULE = f"{PACKAGE}._retf"  # run: the first call of tensorflow/__init__.py
BOOTSTRAP_FILE = BOOTSTRAP_MODULE.replace(".", "/") + "/__init__.py"  # declares the settings SCHEMA it reads
OPS_MODULE = f"{BOOTSTRAP_MODULE}.ops"  # register_ops
V1_API_MODULE = f"{BOOTSTRAP_MODULE}.v1_api"  # expose_v1_api
SCRIPTS_MODULE = f"{PACKAGE}._retf_scripts"
# 1.x API mode: exports in TF 1.15's form, TF 1.15.5's op registry beside it (the module's REGISTRY_FILE), and the
# console script that checks a SavedModel, meta graph or GraphDef against that registry
TF115_EXPORT_MODULE = f"{BOOTSTRAP_MODULE}.tf115_export"
TF115_OPS_FILE = BOOTSTRAP_MODULE.replace(".", "/") + "/tf115_ops.json"  # read by the module beside it
TF115_CHECK_SCRIPT = "retf-tf115-check"
RUNTIME_DIR = f"{PACKAGE}.libs"  # auditwheel's <package>.libs convention
DEPS_DIR = f"{PACKAGE}.deps"
PRIVATE_PARENT = f"{PACKAGE}._vendor"  # the package the private_names distributions' modules ship in


@dataclass(frozen=True)
class VendorRuntime:
    """Ship a libstdc++.so.6 (unrenamed: one copy per process) in RUNTIME_DIR."""

    spec: RuntimeSpec
    needed: tuple[int, ...]  # newest GLIBCXX any ELF of the input needs
    reason: str

    @property
    def dest(self) -> str:
        return f"{RUNTIME_DIR}/libstdc++.so.6"


@dataclass(frozen=True)
class VendorDependencies:
    """Unpack the locked wheels into DEPS_DIR and drop them from Requires-Dist; the private_names ones into
    PRIVATE_PARENT, with every import of their modules (the input's, theirs, the other vendored ones') rewritten."""

    lock: Lock
    dest: str
    private_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildOps:
    """Compile the retf op library against the input's headers and ship it as the `retf` package."""

    flags: OpFlags  # derived from the wheel by the read stage
    builder: str
    compiler: str
    suite: str


@dataclass(frozen=True)
class InjectBootstrap:
    """Patch tensorflow/__init__.py to call the bootstrap first; route console scripts through it."""

    init_name: str
    init_source: bytes
    entry_points_name: str | None
    entry_points_source: bytes | None
    conflicts: str
    scripts: dict[str, str]  # vendored console script -> published name
    environment_scripts: tuple[str, ...]  # never claimed: the target environment owns them
    api: str = "v2"
    runtime_env: tuple[tuple[str, str], ...] = ()
    ops_library: str | None = None  # registered while `import tensorflow` runs, when the wheel ships it
    features: tuple[tuple[str, str], ...] = DEFAULTS  # the switches (retfwheel.features), as the recipe sets them


@dataclass(frozen=True)
class ExtendProto:
    """Add scalar fields to a message of one of the input's generated ``_pb2`` modules (rewritten, not copied)."""

    member: str
    message: str
    fields: tuple[ScalarField, ...]


CONFIG_MODULE = f"{PACKAGE}/core/protobuf/config_pb2.py"
# DeepRec's own fields of tensorflow.OptimizerOptions (its tensorflow/core/protobuf/config.proto), which its model zoo
# sets on the session's ConfigProto: with the deeprec_api switch the wheel's ConfigProto has them too, and the
# bootstrap says what each does here (tensorflow/_retf/deeprec_config.py). TensorFlow's C++ side reads the numbers
# as unknown fields of OptimizerOptions and leaves them alone.
DEEPREC_OPTIMIZER_OPTIONS = (
    ScalarField("do_op_fusion", 7, "bool"),
    ScalarField("micro_batch_num", 9, "int32"),
    ScalarField("do_smart_stage", 10, "bool"),
    ScalarField("do_smart_stage_gpu", 11, "bool"),
    ScalarField("do_async_embedding", 12, "bool"),
    ScalarField("embedding_layer_device_placement_optimization", 14, "bool"),
    ScalarField("stage_multi_stream", 15, "bool"),
)


@dataclass(frozen=True)
class BuildPlan:
    input_filename: str
    input_sha256: str
    input_name: str
    input_version: str
    input_requires: tuple[str, ...]  # the input's Requires-Dist
    api_requires: tuple[str, ...]  # what the API mode needs beyond it (recipe.api_requirements)
    tensorflow_version: str
    recipe_name: str
    recipe_sha256: str
    tool_version: str
    name: str
    version: str
    dist_info: str
    python_tags: tuple[tuple[str, str], ...]
    platforms: tuple[str, ...]
    tags: tuple[str, ...]
    filename: str
    members: tuple[CopyMember | NewMember, ...]  # everything but RECORD, in no particular order
    steps: tuple[object, ...]
    changes: tuple[str, ...]
    source_wheel_file: bytes
    # what the wheel does at run time, recorded in its provenance for `verify` and for readers
    api: str = "v2"
    ops: bool = False  # ships the retf op library
    features: tuple[tuple[str, str], ...] = DEFAULTS

    @property
    def record_path(self) -> str:
        return f"{self.dist_info}/RECORD"


def make_plan(inspection: Inspection, recipe: Recipe, input_sha256: str, tool_version: str, lock: Lock | None = None,
              op_flags: OpFlags | None = None) -> BuildPlan:
    """Decide the whole output of `retfwheel build` from the read stage's results."""
    wheel = inspection.wheel
    if inspection.processed is not None:
        raise AlreadyProcessedError(f"{wheel.path}: already produced by retfwheel ({wheel.dist_info}/{PROVENANCE_FILE})")
    tf_version = require_tensorflow(inspection)
    python_tags = _python_tags(wheel, recipe.target)
    runtime = _runtime_step(inspection, recipe)
    platforms = platform_tags(inspection.elves, inspection.wheel.path, recipe, _bundled_runtime(runtime))

    name = recipe.output.name
    version = _output_version(wheel.version, recipe.output.local_version)
    stem = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    renames = {f"{wheel.dist_info}/": f"{dist_info}/", f"{wheel.data_dir}/": f"{stem}.data/"}

    steps: list[object] = []
    if recipe.ops.build:
        if op_flags is None:
            raise TargetMismatchError(f"{wheel.path}: [ops] build = true, but the read stage derived no compiler flags")
        steps.append(BuildOps(op_flags, recipe.ops.builder, recipe.ops.compiler, recipe.ops.suite))
    if runtime:
        steps.append(runtime)
    drop_requirements: set[str] = set()
    if recipe.deps and recipe.deps.vendor:
        if lock is None:
            raise TargetMismatchError(f"{recipe.path}: [deps] vendor = true needs a lock file (retfwheel lock)")
        _check_scripts(recipe, lock)
        steps.append(VendorDependencies(lock, DEPS_DIR, recipe.deps.private_names))
        drop_requirements = {str(canonicalize_name(r.name)) for r in vendored_requirements(wheel, recipe.deps.leave, recipe.api_requirements)}
    if recipe.feature("deeprec_api") == "1":
        if wheel.archive.member(CONFIG_MODULE) is None:
            raise TargetMismatchError(f"{wheel.path}: no {CONFIG_MODULE}, which [features] deeprec_api extends with "
                                      "DeepRec's ConfigProto fields", hint="set deeprec_api = false for this input")
        steps.append(ExtendProto(CONFIG_MODULE, "tensorflow.OptimizerOptions", DEEPREC_OPTIMIZER_OPTIONS))
    entry_points = f"{wheel.dist_info}/entry_points.txt"
    init_name = f"{PACKAGE}/__init__.py"
    patched: set[str] = set()
    if steps or recipe.api == "v1" or recipe.runtime_env:
        steps.append(
            InjectBootstrap(
                init_name,
                inspection.package_init or b"",
                _rename(entry_points, renames) if wheel.entry_points is not None else None,
                wheel.entry_points,
                recipe.conflicts,
                dict(recipe.deps.scripts or {}) if recipe.deps else {},
                recipe.deps.environment_scripts if recipe.deps else (),
                api=recipe.api,
                runtime_env=tuple(sorted((recipe.runtime_env or {}).items())),
                ops_library=OPS_LIBRARY if recipe.ops.build else None,
                features=recipe.features,
            )
        )
        patched = {init_name, entry_points}
        _trial_injection(inspection.package_init or b"", init_name)

    metadata = _rewrite_metadata(wheel, name, str(version), drop_requirements)
    changes = [
        f"distribution {wheel.metadata_name} {wheel.version} -> {name} {version}",
        f"{wheel.dist_info} -> {dist_info} (METADATA Name/Version and WHEEL Generator/Tag rewritten)",
    ]
    if drop_requirements:
        changes.append(f"Requires-Dist: removed the {len(drop_requirements)} vendored requirements")
    for step in steps:
        if isinstance(step, ExtendProto):
            changes.append(f"{step.member}: {step.message} gains DeepRec's "
                           f"{', '.join(f.name for f in step.fields)}")
    members: list[CopyMember | NewMember] = []
    replaced = {f"{wheel.dist_info}/{leaf}" for leaf in ("METADATA", "WHEEL", "RECORD", *_SIGNATURES)} | patched
    for member in wheel.archive.members:
        if member.name not in replaced:
            members.append(CopyMember(_rename(member.name, renames), member, wheel.record[member.name].hash, wheel.archive))
    if any(wheel.archive.member(f"{wheel.dist_info}/{s}") for s in _SIGNATURES):
        changes.append("dropped the RECORD signature (it cannot cover the rewritten RECORD)")
    members.append(NewMember(f"{dist_info}/METADATA", metadata))
    plan = BuildPlan(
        input_filename=wheel.filename,
        input_sha256=input_sha256,
        input_name=wheel.metadata_name,
        input_version=str(wheel.version),
        input_requires=tuple(wheel.requires_dist),
        api_requires=recipe.api_requirements,
        tensorflow_version=tf_version,
        recipe_name=recipe.name,
        recipe_sha256=recipe.sha256,
        tool_version=tool_version,
        name=name,
        version=str(version),
        dist_info=dist_info,
        python_tags=tuple(python_tags),
        platforms=platforms,
        tags=(),
        filename="",
        members=tuple(members),
        steps=tuple(steps),
        changes=tuple(changes),
        source_wheel_file=wheel.wheel_file,
        api=recipe.api,
        ops=recipe.ops.build,
        features=recipe.features,
    )
    return with_tags(plan, platforms)


def _check_scripts(recipe: Recipe, lock: Lock) -> None:
    """Refuse now a [deps] scripts entry no locked distribution declares (locks list their scripts)."""
    assert recipe.deps is not None
    declared = locked_scripts(lock)
    if not declared:
        return  # a lock written before locks listed scripts: the finish stage checks the unpacked wheels
    problems = [f"[deps] scripts: no vendored distribution declares a console script '{script}'"
                for script in sorted(recipe.deps.scripts or {}) if script not in declared]
    problems += [f"[deps] scripts: '{published}' is owned by the target environment; publish it under another name"
                 for published in sorted((recipe.deps.scripts or {}).values()) if published in recipe.deps.environment_scripts]
    if problems:
        raise RecipeError([f"{recipe.path}: {p}" for p in problems])


def _trial_injection(source: bytes, where: str) -> None:
    """Refuse now, before any download or compile, a package __init__ the bootstrap cannot go into."""
    try:
        inject(source, bootstrap_block(BOOTSTRAP_MODULE, {}), where)
    except InjectionError as exc:
        raise WheelFormatError(str(exc)) from exc


def with_tags(plan: BuildPlan, platforms: tuple[str, ...]) -> BuildPlan:
    tags = tuple(f"{interp}-{abi}-{plat}" for interp, abi in plan.python_tags for plat in platforms)
    filename = "-".join(
        [
            canonicalize_name(plan.name).replace("-", "_"),
            plan.version,
            ".".join(sorted({i for i, _ in plan.python_tags})),
            ".".join(sorted({a for _, a in plan.python_tags})),
            ".".join(platforms),
        ]
    ) + ".whl"
    wheel_file = rewrite_headers(
        plan.source_wheel_file,
        {"Generator": f"retfwheel {plan.tool_version}"},
        drop={"Tag", "Build"},
        append=[("Tag", t) for t in tags],
    )
    changes = tuple(c for c in plan.changes if not c.startswith("tags ")) + (f"tags -> {', '.join(tags)}",)
    fixed = dataclasses.replace(plan, platforms=platforms, tags=tags, filename=filename, changes=changes)
    keep = [m for m in plan.members if m.name not in (f"{plan.dist_info}/WHEEL", f"{plan.dist_info}/{PROVENANCE_FILE}")]
    keep.append(NewMember(f"{plan.dist_info}/WHEEL", wheel_file))
    keep.append(NewMember(f"{plan.dist_info}/{PROVENANCE_FILE}", _provenance(fixed)))
    return dataclasses.replace(fixed, members=tuple(keep))


def target_tags(target: Target) -> set[Tag]:
    platforms = installable_platforms(target.glibc, target.arch)
    tags = set(cpython_tags(target.python, abis=[target.abi], platforms=platforms))
    tags.update(compatible_tags(target.python, target.python_tag, platforms))
    return tags


def _python_tags(wheel: WheelInfo, target: Target) -> list[tuple[str, str]]:
    usable = wheel.tags & target_tags(target)
    if not usable:
        have = ", ".join(sorted(str(t) for t in wheel.tags))
        raise TargetMismatchError(
            f"{wheel.path}: built for {have}, but the recipe targets {target.python_tag}-{target.abi} "
            f"on glibc {format_version(target.glibc)}",
            hint=f"download the wheel for the target, e.g. pip download --no-deps --python-version "
            f"{target.python[0]}.{target.python[1]} --only-binary=:all: tensorflow-cpu",
        )
    return sorted({(t.interpreter, t.abi) for t in usable})


def _runtime_step(inspection: Inspection, recipe: Recipe) -> VendorRuntime | None:
    """Whether (and why) the C++ runtime is vendored; refuses native code the target cannot load."""
    needs_runtime = []
    for verdict in inspection.verdicts or ():
        if verdict.fit is Fit.CANNOT_RUN:
            raise TargetMismatchError(
                f"{inspection.wheel.path}: {verdict.path} cannot run on {recipe.name}: {'; '.join(verdict.reasons)}",
                hint="this wheel needs a newer system than the recipe's target; rebuild TensorFlow on an older toolchain",
            )
        if verdict.fit is Fit.NEEDS_LIBSTDCXX:
            needs_runtime.append(verdict)
    needed = max((e.newest("GLIBCXX") or (3, 4)) for e in inspection.elves) if inspection.elves else (3, 4)
    spec = recipe.runtime
    if needs_runtime and spec.source == "none":
        first = needs_runtime[0]
        raise TargetMismatchError(
            f"{inspection.wheel.path}: {first.path} {'; '.join(first.reasons)}, and {recipe.name} vendors no libstdc++",
            hint="set [libstdcxx] source in the recipe (toolchain, file or debian)",
        )
    if spec.source == "none":
        return None
    if needs_runtime:
        return VendorRuntime(spec, needed, f"{len(needs_runtime)} ELF files need more than the target's libstdc++ ({needs_runtime[0].reasons[0]})")
    if spec.vendor == "always":
        return VendorRuntime(spec, needed, "the recipe vendors it always (for extensions built with a newer GCC)")
    return None


def _bundled_runtime(runtime: VendorRuntime | None) -> frozenset[str]:
    return frozenset({"libstdc++.so.6"}) if runtime else frozenset()


def platform_tags(elves: tuple[ElfInfo, ...], where: Path, recipe: Recipe, extra_bundled: frozenset[str]) -> tuple[str, ...]:
    target = recipe.target
    if recipe.output.platform == "auto":
        policy = lowest_policy(elves, bundled_libraries(elves) | extra_bundled, target.arch)
        if policy is None:
            chosen: tuple[str, ...] = (f"linux_{target.arch}",)
        else:
            if policy.glibc > tuple(target.glibc[:2]):
                raise TargetMismatchError(
                    f"{where}: its native code needs {policy.name}, newer than the target's glibc {format_version(target.glibc)}"
                )
            chosen = tuple(sorted(policy.tags(target.arch), key=lambda t: (not t.startswith("manylinux_"), t)))
    else:
        chosen = (recipe.output.platform,)
        known = {t for p in load_policies(target.arch) for t in p.tags(target.arch)} | {f"linux_{target.arch}"}
        if chosen[0] not in known:
            raise TargetMismatchError(f"{recipe.path}: [output] platform '{chosen[0]}' is not a {target.arch} platform tag")
    extra = tuple(t for t in recipe.output.extra_platform_tags if t not in chosen)
    return chosen + extra


def _rewrite_metadata(wheel: WheelInfo, name: str, version: str, drop_requirements: set[str]) -> bytes:
    metadata = rewrite_headers(wheel.metadata, {"Name": name, "Version": version})
    if not drop_requirements:
        return metadata
    keep = [r for r in wheel.requires_dist if str(canonicalize_name(Requirement(r).name)) not in drop_requirements]
    return rewrite_headers(metadata, {}, drop={"Requires-Dist"}, append=[("Requires-Dist", r) for r in keep])


def _output_version(version: Version, label: str) -> Version:
    local = f"{version.local}.{label}" if version.local else label
    return Version(f"{version.public}+{local}")


def _rename(name: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def _provenance(plan: BuildPlan) -> bytes:
    document = {
        "tool": "retfwheel",
        "tool_version": plan.tool_version,
        "recipe": {"name": plan.recipe_name, "sha256": plan.recipe_sha256},
        "input": {
            "filename": plan.input_filename,
            "sha256": plan.input_sha256,
            "name": plan.input_name,
            "version": plan.input_version,
            "tensorflow_version": plan.tensorflow_version,
        },
        "output": {"name": plan.name, "version": plan.version, "tags": list(plan.tags)},
        "changes": list(plan.changes),
        "settings": {"api": plan.api, "ops": plan.ops, "features": dict(plan.features)},
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")
