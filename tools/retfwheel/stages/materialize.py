"""Carrying out a plan's doing steps: fetch, build and unpack what the plan names; the only stage that
runs subprocesses. Each step returns a frozen result (members for the writer, analyses for the audit,
notes); `finish` combines them, purely."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name

from retfwheel.errors import TargetMismatchError, WheelFormatError
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
    PRIVATE_PARENT,
    BuildOps,
    BuildPlan,
    CopyMember,
    InjectBootstrap,
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
from retfwheel.wheelfile.renaming import RenameError, rename_imports
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
    replaced: tuple[NewMember, ...] = ()  # members of the input rewritten to import the private_names modules


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
            vendored = _vendor_dependencies(step, plan, recipe, archive, cache, target_python, progress)
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


def _vendor_dependencies(step: VendorDependencies, plan: BuildPlan, recipe: Recipe, archive: Archive, cache: Path,
                         target_python: Path | None, progress: Progress) -> VendoredResult:
    wheels = fetch_locked(step.lock, recipe, cache, target_python, progress)
    members: list[CopyMember | NewMember] = []
    elves: list[ElfInfo] = []
    dependencies: list[Dependency] = []
    entry_points: dict[str, str] = {}
    dropped: list[str] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    private: dict[str, tuple[str, ...]] = {}  # private_names distribution -> its modules
    progress(f"verifying {len(wheels)} vendored wheels")
    for path in wheels:
        wheel = read_wheel(path)
        if str(wheel.name) in NOT_SERVED:
            skipped.append(f"{wheel.metadata_name} ({NOT_SERVED[wheel.name]})")
            continue
        scan_elves = verified_elves(wheel, file_sha256(wheel.path), cache, progress)
        folder = PRIVATE_FOLDER if str(wheel.name) in step.private_names else step.dest
        renamed: dict[str, str] = {}
        files: list[tuple[str, str]] = []
        for member in wheel.archive.members:
            name = _vendored_name(member.name, wheel.dist_info, wheel.data_dir,
                                  metadata_folder(wheel.metadata_name, str(wheel.version)))
            if name is None:
                dropped.append(f"{wheel.metadata_name}:{member.name}")
                continue
            dest = f"{folder}/{name}"
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
        if folder == PRIVATE_FOLDER:
            private[str(wheel.name)] = tuple(sorted(m for m in modules if m not in namespaces))
        dependencies.append(Dependency(wheel.metadata_name, str(wheel.version), wheel.requires_dist,
                                       tuple(sorted(m for m in modules if m not in namespaces))))
    shares = sharing_table(plan.input_name, plan.input_requires, dependencies, recipe.target, plan.api_requires)
    renames = _private_renames(step.private_names, private)
    replaced: tuple[NewMember, ...] = ()
    if renames:
        progress(f"pointing imports of {', '.join(sorted(renames))} at {PRIVATE_PARENT}")
        members = [_with_renamed_imports(member, renames) for member in members]
        members.append(NewMember(f"{PRIVATE_FOLDER}/__init__.py", PRIVATE_INIT))
        replaced = renamed_input_members(archive, plan, renames)
        shares = tuple(dataclasses.replace(s, private_name=True) if canonicalize_name(s.name) in private else s
                       for s in shares)
    notes = [f"vendored {len(dependencies)} locked distributions into {step.dest}/ (lock {step.lock.path.name}), "
             f"each served only where the environment lacks it or has it outside the range the input works with"]
    notes += [f"range of {s.name}: the input's {s.correction.pinned} taken as {s.correction.range} ({s.correction.reason})"
              for s in shares if s.correction]
    if skipped:
        notes.append(f"not vendored, left to the environment: {'; '.join(skipped)}")
    if dropped:
        notes.append(f"left out {len(dropped)} files pip would put outside site-packages or .pth files "
                     f"({', '.join(sorted(dropped)[:3])}{', ...' if len(dropped) > 3 else ''})")
    if renames:
        notes.append(f"{', '.join(sorted(private))} ship as {PRIVATE_PARENT}.<module>: {len(replaced)} of the input's "
                     "modules and the vendored ones import them there, so the environment's own keep their names")
    return VendoredResult(tuple(members), tuple(elves), tuple(shares), entry_points, tuple(notes), replaced)


PRIVATE_FOLDER = PRIVATE_PARENT.replace(".", "/")
PRIVATE_INIT = (b'"""Distributions TensorFlow imports under private names (retfwheel\'s [deps] private_names), so that\n'
                b'the environment\'s own copies keep their public names in the same process."""\n')


def _private_renames(wanted: tuple[str, ...], found: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """{top-level module: the package it ships in} of the private_names distributions the lock vendors."""
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise TargetMismatchError(f"[deps] private_names names {', '.join(missing)}, which the lock does not vendor",
                                  hint="name distributions the lock holds, or drop them from private_names")
    dotted = sorted(m for modules in found.values() for m in modules if "." in m)
    if dotted:
        raise TargetMismatchError(f"[deps] private_names: {', '.join(dotted)} live in namespace packages, which "
                                  "cannot move under a private name", hint="drop their distributions from private_names")
    return {module: PRIVATE_PARENT for modules in found.values() for module in modules}


def _mentions(data: bytes, renames: dict[str, str]) -> bool:
    return any(module.encode() in data for module in renames)


def _rewritten(data: bytes, where: str, renames: dict[str, str]) -> bytes:
    try:
        return rename_imports(data.decode("utf-8"), where, renames).encode("utf-8")
    except (RenameError, UnicodeDecodeError) as error:
        raise TargetMismatchError(f"cannot point {where} at the private names: {error}",
                                  hint="drop its distribution from [deps] private_names") from None


def _with_renamed_imports(member: CopyMember | NewMember, renames: dict[str, str]) -> CopyMember | NewMember:
    if not member.name.endswith(".py"):
        return member
    data = member.data if isinstance(member, NewMember) else read_content(member.archive, member.source)
    if not _mentions(data, renames):
        return member
    changed = _rewritten(data, member.name, renames)
    return member if changed == data else NewMember(member.name, changed, member.executable)


def renamed_input_members(archive: Archive, plan: BuildPlan, renames: dict[str, str]) -> tuple[NewMember, ...]:
    """The input's Python modules that import a renamed module, rewritten (same names: they replace the input's; the
    package's __init__ among them is the source `finish` injects the bootstrap into)."""
    shipped = {m.name for m in plan.members} | {s.init_name for s in plan.steps if isinstance(s, InjectBootstrap)}
    replaced = []
    for member in archive.members:
        if not member.name.endswith(".py") or member.name not in shipped:
            continue
        data = read_content(archive, member)
        if _mentions(data, renames):
            changed = _rewritten(data, member.name, renames)
            if changed != data:
                replaced.append(NewMember(member.name, changed, member.executable))
    return tuple(replaced)


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


