"""Carrying out a plan's doing steps: fetch, build and unpack what the plan names; the only stage that
runs subprocesses. Each step returns a frozen result (members for the writer, analyses for the audit,
notes); `finish` combines them, purely."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from retfwheel.errors import WheelFormatError
from retfwheel.native.elf import ElfInfo, read_elf
from retfwheel.native.scan import verified_elves
from retfwheel.stages.oplib import (
    LIBRARY_DIR,
    OPS_LIBRARY,
    build_info,
    compile_library,
    op_source_files,
    op_sources,
    python_files,
    sources_digest,
)
from retfwheel.stages.plan import (
    BuildOps,
    BuildPlan,
    CopyMember,
    NewMember,
    VendorDependencies,
    VendorRuntime,
)
from retfwheel.stages.sharing import NOT_SERVED, Dependency, Share, importable_names, metadata_folder, sharing_table
from retfwheel.targets.lock import fetch_locked
from retfwheel.targets.recipe import Recipe
from retfwheel.targets.runtime import obtain_runtime
from retfwheel.wheelfile.archive import Archive, MemberView, read_content
from retfwheel.wheelfile.record import file_sha256
from retfwheel.wheelfile.wheel import console_scripts, read_wheel

Progress = Callable[[str], None]
_DROPPED_DATA = ("scripts", "headers", "data")


@dataclass(frozen=True)
class RuntimeResult:
    """The vendored libstdc++ (VendorRuntime)."""

    member: NewMember
    elf: ElfInfo
    note: str
    origin: str = ""  # where it came from (a Debian package and its sha256, or this machine's compiler)


@dataclass(frozen=True)
class OpsResult:
    """The compiled op library and the retf package (BuildOps)."""

    members: tuple[NewMember, ...]
    elf: ElfInfo
    note: str
    compiler: str = ""  # what compiled it, e.g. "g++ (g++ (Debian 12.2.0-14) 12.2.0) on this machine"
    sources_sha256: str = ""  # oplib.sources_digest


@dataclass(frozen=True)
class VendoredResult:
    """The locked dependencies, unpacked into the private folder (VendorDependencies)."""

    members: tuple[CopyMember | NewMember, ...]
    elves: tuple[ElfInfo, ...]
    shares: tuple[Share, ...]  # how each vendored distribution is served
    entry_points: dict[str, str]  # console script -> "module:attr" across vendored distributions
    notes: tuple[str, ...]


@dataclass(frozen=True)
class StepResults:
    """What the plan's doing steps produced; `finish` turns them and the plan into the final plan."""

    ops: OpsResult | None = None
    runtime: RuntimeResult | None = None
    vendored: VendoredResult | None = None

    @property
    def elves(self) -> tuple[ElfInfo, ...]:
        """Every produced ELF file, under its output name."""
        ops = (self.ops.elf,) if self.ops else ()
        runtime = (self.runtime.elf,) if self.runtime else ()
        return ops + runtime + (self.vendored.elves if self.vendored else ())


def materialize(plan: BuildPlan, recipe: Recipe, archive: Archive, cache: Path, target_python: Path | None,
                progress: Progress) -> StepResults:
    """Run the plan's doing steps (each independent of the others); ``archive`` is the input wheel."""
    ops = runtime = vendored = None
    for step in plan.steps:
        if isinstance(step, BuildOps):
            ops = _build_ops(plan, step, archive, cache, progress)
        elif isinstance(step, VendorRuntime):
            runtime = _vendor_runtime(step, recipe, cache, progress)
        elif isinstance(step, VendorDependencies):
            vendored = _vendor_dependencies(step, plan, recipe, cache, target_python, progress)
    return StepResults(ops, runtime, vendored)


def _vendor_runtime(step: VendorRuntime, recipe: Recipe, cache: Path, progress: Progress) -> RuntimeResult:
    progress(f"obtaining libstdc++ from {step.spec.source}")
    data, origin = obtain_runtime(step.spec, recipe.target.arch, cache, progress)
    elf = read_elf(step.dest, MemberView(iter([data]), len(data)))
    provided = elf.newest_provided("GLIBCXX")
    return RuntimeResult(NewMember(step.dest, data, executable=True), elf,
                         f"vendored libstdc++.so.6 (GLIBCXX_{'.'.join(map(str, provided or ()))}) from {origin} as "
                         f"{step.dest}: {step.reason}", origin)


def _build_ops(plan: BuildPlan, step: BuildOps, archive: Archive, cache: Path, progress: Progress) -> OpsResult:
    data, identity = compile_library(archive, plan.input_sha256, step.flags, step.builder, step.compiler, step.suite, cache, progress)
    name = OPS_LIBRARY
    members = [NewMember(path, content) for path, content in python_files().items()]
    members.append(NewMember(name, data, executable=True))
    members.append(NewMember(f"{LIBRARY_DIR}/_build_info.json", build_info(plan.tensorflow_version, identity, step.flags)))
    elf = read_elf(name, MemberView(iter([data]), len(data)))
    spec = op_sources()
    return OpsResult(tuple(members), elf, f"built the retf op library ({name}) with {identity}, -std={step.flags.std}, "
                     f"_GLIBCXX_USE_CXX11_ABI={step.flags.cxx11_abi}, EIGEN_MAX_ALIGN_BYTES={step.flags.eigen_align}",
                     identity, sources_digest(spec, op_source_files(spec)))


def _vendor_dependencies(step: VendorDependencies, plan: BuildPlan, recipe: Recipe, cache: Path,
                         target_python: Path | None, progress: Progress) -> VendoredResult:
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
        scan_elves = verified_elves(wheel, file_sha256(wheel.path), cache, progress)
        renamed: dict[str, str] = {}
        files: list[tuple[str, str]] = []
        for member in wheel.archive.members:
            name = _vendored_name(member.name, wheel.dist_info, wheel.data_dir,
                                  metadata_folder(wheel.metadata_name, str(wheel.version)))
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
            if not member.name.startswith(wheel.dist_info + "/"):
                files.append((name, str(wheel.version)))
        elves += [_renamed(elf, renamed[elf.path]) for elf in scan_elves if elf.path in renamed]
        entry = wheel.archive.member(f"{wheel.dist_info}/entry_points.txt")
        if entry is not None:
            entry_points.update(console_scripts(read_content(wheel.archive, entry)))
        modules, namespaces = importable_names(files)
        dependencies.append(Dependency(wheel.metadata_name, str(wheel.version), wheel.requires_dist,
                                       tuple(sorted(m for m in modules if m not in namespaces))))
    shares = sharing_table(plan.input_name, plan.input_requires, dependencies, recipe.target, plan.api_requires)
    notes = [f"vendored {len(dependencies)} locked distributions into {step.dest}/ (lock {step.lock.path.name}), "
             f"each served only where the environment lacks it or has it outside the range the input works with"]
    notes += [f"range of {s.name}: the input's {s.correction.pinned} taken as {s.correction.range} ({s.correction.reason})"
              for s in shares if s.correction]
    if skipped:
        notes.append(f"not vendored, left to the environment: {'; '.join(skipped)}")
    if dropped:
        notes.append(f"left out {len(dropped)} files pip would put outside site-packages or .pth files "
                     f"({', '.join(sorted(dropped)[:3])}{', ...' if len(dropped) > 3 else ''})")
    return VendoredResult(tuple(members), tuple(elves), shares, entry_points, tuple(notes))


def _vendored_name(name: str, dist_info: str, data_dir: str, metadata: str) -> str | None:
    """Where a member of a vendored wheel goes inside the private folder (None: left out); its .dist-info
    becomes ``metadata``."""
    if name.startswith(dist_info + "/"):
        return metadata + name[len(dist_info):]
    if name.startswith(data_dir + "/"):
        rest = name[len(data_dir) + 1 :]
        kind, _, path = rest.partition("/")
        return path if kind in ("purelib", "platlib") and path else None
    if "/" not in name and name.endswith(".pth"):
        return None  # .pth files are not processed outside site-packages; namespaces are the bootstrap's job
    return name


def _renamed(elf: ElfInfo, path: str) -> ElfInfo:
    return dataclasses.replace(elf, path=path)


