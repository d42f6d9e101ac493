"""Planning a build (pure): every output member, the output name and tags, and what changed.

All validation of the input against the recipe happens here, before anything is fetched,
compiled or written; `--dry-run` prints the resulting plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name
from packaging.version import Version

from retfwheel.archive import Member
from retfwheel.elf import format_version
from retfwheel.errors import AlreadyProcessedError, TargetMismatchError
from retfwheel.inspection import Inspection, require_tensorflow
from retfwheel.metadata import rewrite_headers
from retfwheel.policy import installable_platforms, load_policies
from retfwheel.recipe import Recipe, Target
from retfwheel.verdict import Fit
from retfwheel.wheel import PROVENANCE_FILE, WheelInfo

_SIGNATURES = ("RECORD.jws", "RECORD.p7s")


@dataclass(frozen=True)
class CopyMember:
    """An input member written unchanged (its compressed bytes copied), possibly renamed."""

    name: str
    source: Member
    hash: str  # the RECORD hash the read stage verified against the member's bytes

    @property
    def executable(self) -> bool:
        return self.source.executable


@dataclass(frozen=True)
class NewMember:
    """A member whose bytes the plan itself produces."""

    name: str
    data: bytes
    executable: bool = False


@dataclass(frozen=True)
class BuildPlan:
    input_filename: str
    input_sha256: str
    recipe_name: str
    filename: str
    name: str
    version: str
    tags: tuple[str, ...]
    platforms: tuple[str, ...]
    dist_info: str
    members: tuple[CopyMember | NewMember, ...]  # everything but RECORD, in no particular order
    changes: tuple[str, ...]

    @property
    def record_path(self) -> str:
        return f"{self.dist_info}/RECORD"


def make_plan(inspection: Inspection, recipe: Recipe, input_sha256: str, tool_version: str) -> BuildPlan:
    """Decide the whole output of `retfwheel build` from the read stage's results."""
    wheel = inspection.wheel
    if inspection.processed is not None:
        raise AlreadyProcessedError(f"{wheel.path}: already produced by retfwheel ({wheel.dist_info}/{PROVENANCE_FILE})")
    tf_version = require_tensorflow(inspection)
    python_tags = _python_tags(wheel, recipe.target)
    _check_runs_on_target(inspection, recipe)
    platforms = _platform_tags(inspection, recipe)
    tags = tuple(f"{interp}-{abi}-{plat}" for interp, abi in python_tags for plat in platforms)

    name = recipe.output.name
    version = _output_version(wheel.version, recipe.output.local_version)
    stem = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    filename = "-".join(
        [
            canonicalize_name(name).replace("-", "_"),
            str(version),
            ".".join(sorted({i for i, _ in python_tags})),
            ".".join(sorted({a for _, a in python_tags})),
            ".".join(platforms),
        ]
    ) + ".whl"

    renames = {f"{wheel.dist_info}/": f"{dist_info}/", f"{wheel.data_dir}/": f"{stem}.data/"}
    metadata = rewrite_headers(wheel.metadata, {"Name": name, "Version": str(version)})
    wheel_file = rewrite_headers(
        wheel.wheel_file,
        {"Generator": f"retfwheel {tool_version}"},
        drop={"Tag", "Build"},
        append=[("Tag", t) for t in tags],
    )
    changes = [
        f"distribution {wheel.metadata_name} {wheel.version} -> {name} {version}",
        f"tags {', '.join(sorted(str(t) for t in wheel.tags))} -> {', '.join(tags)}",
        f"{wheel.dist_info} -> {dist_info} (METADATA Name/Version and WHEEL Generator/Tag rewritten)",
    ]
    members: list[CopyMember | NewMember] = []
    replaced = {f"{wheel.dist_info}/{leaf}" for leaf in ("METADATA", "WHEEL", "RECORD", *_SIGNATURES)}
    for member in wheel.archive.members:
        if member.name in replaced:
            continue
        members.append(CopyMember(_rename(member.name, renames), member, wheel.record[member.name].hash))
    if any(wheel.archive.member(f"{wheel.dist_info}/{s}") for s in _SIGNATURES):
        changes.append("dropped the RECORD signature (it cannot cover the rewritten RECORD)")
    members.append(NewMember(f"{dist_info}/METADATA", metadata))
    members.append(NewMember(f"{dist_info}/WHEEL", wheel_file))
    provenance = _provenance(wheel, recipe, input_sha256, tool_version, name, str(version), tags, tf_version, changes)
    members.append(NewMember(f"{dist_info}/{PROVENANCE_FILE}", provenance))
    return BuildPlan(
        input_filename=wheel.filename,
        input_sha256=input_sha256,
        recipe_name=recipe.name,
        filename=filename,
        name=name,
        version=str(version),
        tags=tags,
        platforms=platforms,
        dist_info=dist_info,
        members=tuple(members),
        changes=tuple(changes),
    )


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


def _check_runs_on_target(inspection: Inspection, recipe: Recipe) -> None:
    for verdict in inspection.verdicts or ():
        if verdict.fit is Fit.CANNOT_RUN:
            raise TargetMismatchError(
                f"{inspection.wheel.path}: {verdict.path} cannot run on {recipe.name}: {'; '.join(verdict.reasons)}",
                hint="this wheel needs a newer system than the recipe's target; rebuild TensorFlow on an older toolchain",
            )
        if verdict.fit is Fit.NEEDS_LIBSTDCXX:
            raise TargetMismatchError(
                f"{inspection.wheel.path}: {verdict.path} {'; '.join(verdict.reasons)}, and {recipe.name} vendors no libstdc++",
                hint="use a recipe that vendors a newer libstdc++ for this target",
            )


def _platform_tags(inspection: Inspection, recipe: Recipe) -> tuple[str, ...]:
    target = recipe.target
    if recipe.output.platform == "auto":
        policy = inspection.policy
        if policy is None:
            chosen: tuple[str, ...] = (f"linux_{target.arch}",)
        else:
            if policy.glibc > tuple(target.glibc[:2]):
                raise TargetMismatchError(
                    f"{inspection.wheel.path}: its native code needs {policy.name}, newer than the target's glibc "
                    f"{format_version(target.glibc)}"
                )
            chosen = tuple(sorted(policy.tags(target.arch), key=lambda t: (not t.startswith("manylinux_"), t)))
    else:
        chosen = (recipe.output.platform,)
        known = {t for p in load_policies(target.arch) for t in p.tags(target.arch)} | {f"linux_{target.arch}"}
        if chosen[0] not in known:
            raise TargetMismatchError(f"{recipe.path}: [output] platform '{chosen[0]}' is not a {target.arch} platform tag")
    extra = tuple(t for t in recipe.output.extra_platform_tags if t not in chosen)
    return chosen + extra


def _output_version(version: Version, label: str) -> Version:
    local = f"{version.local}.{label}" if version.local else label
    return Version(f"{version.public}+{local}")


def _rename(name: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def _provenance(wheel, recipe, input_sha256, tool_version, name, version, tags, tf_version, changes) -> bytes:
    document = {
        "tool": "retfwheel",
        "tool_version": tool_version,
        "recipe": {"name": recipe.name, "sha256": recipe.sha256},
        "input": {
            "filename": wheel.filename,
            "sha256": input_sha256,
            "name": wheel.metadata_name,
            "version": str(wheel.version),
            "tensorflow_version": tf_version,
        },
        "output": {"name": name, "version": version, "tags": list(tags)},
        "changes": list(changes),
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")
