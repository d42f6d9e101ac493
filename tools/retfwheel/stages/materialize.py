"""Carrying out a plan's doing steps: fetch, build and unpack what the plan names; the only stage that
runs subprocesses. Each step returns a frozen result (members for the writer, analyses for the audit,
notes); `finish` combines them, purely."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name

from retfwheel.cache import discard, entry_lock, entry_path, publish_file, usable
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
    ExtendProto,
    InjectBootstrap,
    NewMember,
    VendorDependencies,
    VendorRuntime,
)
from retfwheel.stages.sharing import NOT_SERVED, Dependency, Share, importable_names, metadata_folder, sharing_table
from retfwheel.targets.lock import fetch_locked
from retfwheel.targets.recipe import Recipe
from retfwheel.targets.runtime import obtain_runtime
from retfwheel.wheelfile import protos, renaming
from retfwheel.wheelfile.archive import Archive, MemberView, read_content
from retfwheel.wheelfile.protos import ProtoError, is_generated, move_proto, read_proto
from retfwheel.wheelfile.record import file_sha256
from retfwheel.wheelfile.renaming import (
    KEPT_STRINGS,
    PRIVATE_STRINGS,
    RenameError,
    rename_imports,
    replace_private_strings,
)
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
    extended: tuple[NewMember, ...] = ()  # the input's generated modules with fields added (ExtendProto)

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
    extended: list[NewMember] = []
    for step in plan.steps:
        if isinstance(step, BuildOps):
            ops = _build_ops(plan, step, archive, cache, progress)
        elif isinstance(step, VendorRuntime):
            runtime = _vendor_runtime(step, recipe, cache, progress)
        elif isinstance(step, VendorDependencies):
            vendored = _vendor_dependencies(step, plan, recipe, archive, cache, target_python, progress)
        elif isinstance(step, ExtendProto):
            extended.append(_extend_proto(step, archive))
    return StepResults(ops, runtime, vendored, tuple(extended))


def _extend_proto(step: ExtendProto, archive: Archive) -> NewMember:
    member = archive.member(step.member)
    if member is None:
        raise WheelFormatError(f"{archive.path}: no {step.member}")
    try:
        source = read_content(archive, member).decode("utf-8")
        return NewMember(step.member, protos.add_fields(source, step.member, step.message, step.fields).encode("utf-8"))
    except (UnicodeDecodeError, ProtoError) as exc:
        raise TargetMismatchError(f"{step.member} cannot take DeepRec's {step.message} fields: {exc}",
                                  hint="set [features] deeprec_api = false for this input") from None


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
            scripts = console_scripts(read_content(wheel.archive, entry))
            if folder == PRIVATE_FOLDER:  # its scripts run its modules under their private names
                scripts = {name: f"{PRIVATE_PARENT}.{target.strip()}" for name, target in scripts.items()}
            entry_points.update(scripts)
        modules, namespaces = importable_names(files)
        if folder == PRIVATE_FOLDER:
            private[str(wheel.name)] = tuple(sorted(m for m in modules if m not in namespaces))
        dependencies.append(Dependency(wheel.metadata_name, str(wheel.version), wheel.requires_dist,
                                       tuple(sorted(m for m in modules if m not in namespaces))))
    shares = sharing_table(plan.input_name, plan.input_requires, dependencies, recipe.target, plan.api_requires)
    renames = _private_renames(private)
    absent = sorted(set(step.private_names) - set(private))
    replaced: tuple[NewMember, ...] = ()
    if renames:
        progress(f"pointing imports of {', '.join(sorted(renames))} at {PRIVATE_PARENT}")
        key = entry_path(cache, "renamed", f"{_rewrite_key(plan, members, renames)}.zip")
        with entry_lock(key):
            cached = _cached_rewrite(key, progress)
            if cached is None:
                rewritten = (_with_renamed_imports(m, renames) for m in _with_moved_protos(members))
                cached = ({m.name: m for m in rewritten if isinstance(m, NewMember)},
                          renamed_input_members(archive, plan, renames))
                publish_file(key, "renamed", _rewrite_archive(*cached))
        changed, replaced = cached
        members = [changed.get(member.name, member) for member in members]
        members.append(NewMember(f"{PRIVATE_FOLDER}/__init__.py", PRIVATE_INIT))
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
    if absent:
        notes.append(f"[deps] private_names: {', '.join(absent)} not among this input's locked distributions; "
                     "nothing to rename for them")
    if renames:
        notes.append(f"{', '.join(sorted(private))} ship as {PRIVATE_PARENT}.<module>: {len(replaced)} of the input's "
                     "modules and the vendored ones import them there, so the environment's own keep their names")
    return VendoredResult(tuple(members), tuple(elves), tuple(shares), entry_points, tuple(notes), replaced)


PRIVATE_FOLDER = PRIVATE_PARENT.replace(".", "/")
PRIVATE_INIT = (b'"""Distributions TensorFlow imports under private names (retfwheel\'s [deps] private_names), so that\n'
                b'the environment\'s own copies keep their public names in the same process."""\n')


def _private_renames(found: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """{top-level module: the package it ships in} of the private_names distributions the lock vendors (a recipe
    serves several inputs: a name one input's lock lacks, keras for TF 2.4, renames nothing there)."""
    dotted = sorted(m for modules in found.values() for m in modules if "." in m)
    if dotted:
        raise TargetMismatchError(f"[deps] private_names: {', '.join(dotted)} live in namespace packages, which "
                                  "cannot move under a private name", hint="drop their distributions from private_names")
    return {module: PRIVATE_PARENT for modules in found.values() for module in modules}


def _mentions(data: bytes, renames: dict[str, str]) -> bool:
    """Whether ``data`` names a renamed module where the rewrite looks (an import, a string): the name as a word of its
    own, not an attribute (``tensorflow.python.keras``) or part of a longer name."""
    pattern = rb"(?<![\w.])(" + b"|".join(re.escape(m.encode()) for m in sorted(renames)) + rb")(?!\w)"
    return re.search(pattern, data) is not None


def _rewritten(data: bytes, where: str, renames: dict[str, str]) -> bytes:
    inside = where[len(PRIVATE_FOLDER) + 1:] if where.startswith(PRIVATE_FOLDER + "/") else where
    keep = KEPT_STRINGS.get(inside, ((), ""))[0]
    try:
        source = data.decode("utf-8")
        if inside in PRIVATE_STRINGS and where != inside:
            source = replace_private_strings(source, where, PRIVATE_STRINGS[inside][0])
        return rename_imports(source, where, renames, keep).encode("utf-8")
    except (RenameError, UnicodeDecodeError) as error:
        raise TargetMismatchError(f"cannot point {where} at the private names: {error}",
                                  hint="drop its distribution from [deps] private_names") from None


def _rewrite_key(plan: BuildPlan, members: list[CopyMember | NewMember], renames: dict[str, str]) -> str:
    """The private-names rewrite's cache key: the input and which of its modules ship, the vendored Python modules it reads (by content: a
    distribution built from an sdist is the same whatever its zip's times), the names it moves, and the code that
    moves them (this module, renaming and protos: a retfwheel that rewrites differently never serves an older one)."""
    modules = [(m.name, m.hash if isinstance(m, CopyMember) else hashlib.sha256(m.data).hexdigest(), m.executable)
               for m in members if m.name.endswith(".py")]
    shipped = sorted(name for name in _shipped_input_names(plan) if name.endswith(".py"))
    digest = hashlib.sha256(json.dumps([plan.input_sha256, shipped, sorted(renames.items()), sorted(modules)]).encode())
    for module in (__file__, renaming.__file__, protos.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()


def _rewrite_archive(changed: dict[str, NewMember], replaced: tuple[NewMember, ...]) -> bytes:
    """The rewritten members as one zip: ``vendored/<name>`` and ``input/<name>``, the executable bit kept."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for prefix, group in (("vendored/", sorted(changed.values(), key=lambda m: m.name)), ("input/", replaced)):
            for member in group:
                info = zipfile.ZipInfo(prefix + member.name, (1980, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if member.executable else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, member.data)
    return buffer.getvalue()


def _cached_rewrite(key: Path, progress: Progress) -> tuple[dict[str, NewMember], tuple[NewMember, ...]] | None:
    if not usable(key, "renamed", progress, "private-names rewrite", "rewriting again"):
        return None
    changed: dict[str, NewMember] = {}
    replaced: list[NewMember] = []
    try:
        with zipfile.ZipFile(key) as archive:
            for info in archive.infolist():
                group, _, name = info.filename.partition("/")
                member = NewMember(name, archive.read(info), bool(info.external_attr >> 16 & 0o100))
                if group == "vendored":
                    changed[name] = member
                else:
                    replaced.append(member)
    except (OSError, zipfile.BadZipFile):
        progress(f"the cached private-names rewrite {key} is unreadable; rewriting again")
        discard(key)
        return None
    return changed, tuple(replaced)


def _with_moved_protos(members: list[CopyMember | NewMember]) -> list[CopyMember | NewMember]:
    """The private distributions' generated protobuf modules with their proto files and packages moved under the
    private names (retfwheel.wheelfile.protos), so the environment's copies of the same protos load beside them."""
    sources: dict[str, str] = {}
    for member in members:
        if member.name.startswith(PRIVATE_FOLDER + "/") and member.name.endswith("_pb2.py"):
            data = member.data if isinstance(member, NewMember) else read_content(member.archive, member.source)
            text = data.decode("utf-8", errors="replace")
            if is_generated(text):
                sources[member.name] = text
    try:
        files = [read_proto(text, name) for name, text in sources.items()]
        names = {f.name for f in files}
        symbols = {symbol for f in files for symbol in f.symbols}
        moved = {f.path: move_proto(sources[f.path], f.path, PRIVATE_PARENT, names, symbols) for f in files}
    except ProtoError as error:
        raise TargetMismatchError(f"cannot move the protos of the private names: {error}",
                                  hint="drop its distribution from [deps] private_names") from None
    return [NewMember(m.name, moved[m.name].encode("utf-8"), m.executable) if m.name in moved else m for m in members]


def _with_renamed_imports(member: CopyMember | NewMember, renames: dict[str, str]) -> CopyMember | NewMember:
    if not member.name.endswith(".py"):
        return member
    data = member.data if isinstance(member, NewMember) else read_content(member.archive, member.source)
    if not _mentions(data, renames):
        return member
    changed = _rewritten(data, member.name, renames)
    return member if changed == data else NewMember(member.name, changed, member.executable)


def _shipped_input_names(plan: BuildPlan) -> set[str]:
    return {m.name for m in plan.members} | {s.init_name for s in plan.steps if isinstance(s, InjectBootstrap)}


def renamed_input_members(archive: Archive, plan: BuildPlan, renames: dict[str, str]) -> tuple[NewMember, ...]:
    """The input's Python modules that import a renamed module, rewritten (same names: they replace the input's; the
    package's __init__ among them is the source `finish` injects the bootstrap into)."""
    shipped = _shipped_input_names(plan)
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


