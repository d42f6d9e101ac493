"""Compiling the retf op library against the input wheel's own headers, framework library and flags.

The sources (ops/, shipped inside retfwheel as data) are compiled with the recipe's builder: the
host compiler, or g++ inside a Debian build root made once with debootstrap (old glibc symbol
versions for old targets). Results are cached by input wheel, compiler identity, sources and flags.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from retfwheel.cache import (
    entry_lock,
    entry_path,
    publish_file,
    publish_folder,
    scratch_path,
    seal,
    usable,
    work_folder,
)
from retfwheel.errors import InputFileError, OpBuildError
from retfwheel.native.elf import majority_abi
from retfwheel.targets.runtime import debian_mirror
from retfwheel.tree import OPS_FILES, ops_root, wheel_files
from retfwheel.wheelfile.archive import Archive, iter_content, open_archive_file, read_content

Progress = Callable[[str], None]
LIBRARY_DIR = "retf"
OPS_LIBRARY = f"{LIBRARY_DIR}/_retf_ops.so"
_SDK_PREFIX = "tensorflow/include/"
# Where the wheel's headers define kAllocatorAlignment: TF <= 2.10 in core, TF 2.11-2.13 in TSL, which
# they ship inside tensorflow/ (tensorflow/core/framework/allocator.h then includes it).
ALLOCATOR_HEADERS = (f"{_SDK_PREFIX}tensorflow/core/framework/allocator.h",
                     f"{_SDK_PREFIX}tensorflow/tsl/framework/allocator.h")
_NO_OPS = "set [ops] build = false in the recipe to build the wheel without the op library"


@dataclass(frozen=True)
class OpFlags:
    """Compiler flags that must match how the input TensorFlow was built (derived from the wheel)."""

    std: str  # "c++14" for TF < 2.10, "c++17" after
    cxx11_abi: int
    eigen_align: int  # EIGEN_MAX_ALIGN_BYTES: TF keeps it equal to its allocator alignment


def derive_flags(archive: Archive, tensorflow_version: str, string_abi_symbols: tuple[int, int] | None) -> OpFlags:
    """The flags a custom op for this wheel needs, read from the wheel itself."""
    where = str(archive.path)
    headers = {name: read_content(archive, member) for name in ALLOCATOR_HEADERS if (member := archive.member(name))}
    return flags_for(tensorflow_version, string_abi(string_abi_symbols, where), headers, where)


def string_abi(symbols: tuple[int, int] | None, where: str) -> int:
    """_GLIBCXX_USE_CXX11_ABI from the framework library's (cxx11, old) tensorflow:: symbol counts: their majority."""
    if symbols is None:
        raise OpBuildError(f"{where}: has no libtensorflow_framework.so.2 to take the std::string ABI from",
                           hint=f"the op library links against it; {_NO_OPS}")
    decided = majority_abi(*symbols)
    if decided is None:
        cxx11, old = symbols
        raise OpBuildError(f"{where}: cannot tell which std::string ABI libtensorflow_framework uses: {cxx11} of its "
                           f"tensorflow:: symbols use the C++11 std::string and {old} the old one",
                           hint=f"a tie; {_NO_OPS} (runtime/ops/build_dev.py takes --cxx11-abi for a developer build)")
    return int(decided)


def flags_for(tensorflow_version: str, cxx11_abi: int, allocator_headers: dict[str, bytes], where: str) -> OpFlags:
    """The one derivation of the op library's flags (the shipped build and runtime/ops/build_dev.py both use it):
    the C++ standard from the version, the string ABI as given (see ``string_abi``), EIGEN_MAX_ALIGN_BYTES
    from the allocator's alignment in whichever of ALLOCATOR_HEADERS (path -> text) defines it."""
    if not allocator_headers:
        raise OpBuildError(f"{where}: the wheel ships no C++ headers for the op library (none of "
                           f"{', '.join(ALLOCATOR_HEADERS)})",
                           hint=f"the op library is compiled against the input's own headers; {_NO_OPS}")
    alignments = [int(m.group(1)) for text in allocator_headers.values()
                  if (m := re.search(rb"kAllocatorAlignment\s*=\s*(\d+)", text))]
    if not alignments:
        raise OpBuildError(f"{where}: no kAllocatorAlignment in {', '.join(sorted(allocator_headers))}: "
                           "a header layout retfwheel does not know",
                           hint=f"EIGEN_MAX_ALIGN_BYTES must match TensorFlow's allocator; {_NO_OPS}")
    major, minor = (int(p) for p in re.findall(r"\d+", tensorflow_version)[:2])
    return OpFlags("c++17" if (major, minor) >= (2, 10) else "c++14", cxx11_abi, alignments[0])


def op_sources() -> dict:
    """runtime/ops/build.json: sources, headers, flags with placeholders."""
    return json.loads((ops_root() / "build.json").read_text())


def sources_digest(spec: dict, sources: dict[str, bytes]) -> str:
    """One sha256 over the library's source files and runtime/ops/build.json's flags (what the SBOM names it by)."""
    listing = [sorted((name, hashlib.sha256(data).hexdigest()) for name, data in sources.items()),
               spec["compile_flags"], spec["link_flags"]]
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()


def op_source_files(spec: dict) -> dict[str, bytes]:
    root = ops_root()
    return {name: (root / name).read_bytes() for name in spec["sources"] + spec["headers"]}


def python_files() -> dict[str, bytes]:
    """The retf Python package, as {path inside the wheel: bytes} (runtime/wheel/retf/)."""
    return wheel_files(OPS_FILES)


def compile_library(archive: Archive, input_sha256: str, flags: OpFlags, builder: str, compiler: str, suite: str,
                    cache: Path, progress: Progress) -> tuple[bytes, str]:
    """The compiled library and a description of the compiler that made it (cached)."""
    spec = op_sources()
    sources = op_source_files(spec)
    identity = _compiler_identity(builder, compiler, suite, cache, progress)
    key = hashlib.sha256(json.dumps([input_sha256, identity, sorted((k, hashlib.sha256(v).hexdigest()) for k, v in sources.items()),
                                     vars(flags), spec["compile_flags"], spec["link_flags"]]).encode()).hexdigest()[:20]
    built = entry_path(cache, "ops", key, "_retf_ops.so")
    with entry_lock(built):  # two builds sharing the cache: the second waits, then uses the first's
        if usable(built, "ops", progress, "op library", "compiling it again"):
            return built.read_bytes(), identity
        data = _compile(spec, sources, flags, builder, compiler, suite, archive, input_sha256, cache, key, identity,
                        progress)
        publish_file(built, "ops", data)
        return data, identity


def _compile(spec: dict, sources: dict[str, bytes], flags: OpFlags, builder: str, compiler: str, suite: str,
             archive: Archive, input_sha256: str, cache: Path, key: str, identity: str, progress: Progress) -> bytes:
    sdk = _sdk(archive, input_sha256, cache, progress)
    progress(f"compiling the retf op library with {identity}")
    work = work_folder(cache, ".ops-", "ops")
    try:
        for name, data in sources.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(data)
        if builder == "host":
            plan = compile_plan(spec, flags, compiler, include=sdk / "tensorflow" / "include", framework=sdk / "tensorflow")
            (work / "objects").mkdir()
            result = run_plan(plan, lambda command: subprocess.run(command, cwd=work, capture_output=True, text=True))
        else:
            result = _compile_in_root(spec, flags, compiler, suite, cache, sdk, work, key)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line] or result.stderr.splitlines()[-3:]
            raise OpBuildError(f"compiling the op library failed: {errors[0] if errors else 'no output'}")
        return (work / "_retf_ops.so").read_bytes()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_info(tensorflow_version: str, identity: str, flags: OpFlags) -> bytes:
    document = {"tensorflow_version": tensorflow_version, "compiler": identity, "std": flags.std,
                "cxx11_abi": flags.cxx11_abi, "eigen_max_align_bytes": flags.eigen_align}
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


@dataclass(frozen=True)
class CompilePlan:
    """How runtime/ops/build.json builds the library, run in a copy of runtime/ops/: ``compiles`` (one per source,
    independent of each other), then ``link``. Linked in the sources' order, the library is byte for byte the one
    that a single ``CXX compile_flags sources -o library link_flags`` makes."""
    compiles: tuple[tuple[str, ...], ...]
    link: tuple[str, ...]


def compile_plan(spec: dict, flags: OpFlags, compiler: str, include: Path, framework: Path,
                 output: str = "_retf_ops.so", objects: str = "objects") -> CompilePlan:
    values = {"include": str(include), "framework_dir": str(framework), "headers_root": str(Path(include).parent.parent),
              "abi": str(flags.cxx11_abi),
              "std": flags.std, "eigen_align": str(flags.eigen_align)}
    compile_flags = [f.format(**values) for f in spec["compile_flags"]]
    link_flags = [f.format(**values) for f in spec["link_flags"]]
    named = [(source, f"{objects}/{source.replace('/', '_')}.o") for source in spec["sources"]]
    return CompilePlan(tuple((compiler, *compile_flags, "-c", source, "-o", obj) for source, obj in named),
                       (compiler, *(obj for _, obj in named), "-o", output, *link_flags))


def run_plan(plan: CompilePlan, run: Callable[[tuple[str, ...]], subprocess.CompletedProcess],
             jobs: int | None = None) -> subprocess.CompletedProcess:
    """The compiles at once, ``jobs`` at a time (one per CPU by default), then the link; the first failure's result."""
    with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        results = list(pool.map(run, plan.compiles))
    failed = [result for result in results if result.returncode != 0]
    return failed[0] if failed else run(plan.link)


def _sdk(archive: Archive, input_sha256: str, cache: Path, progress: Progress) -> Path:
    """The wheel's headers and framework library, unpacked once per input wheel."""
    folder = entry_path(cache, "sdk", input_sha256[:20])
    with entry_lock(folder):
        if not usable(folder, "sdk", progress, "SDK (the input's headers)", "unpacking it again"):
            _unpack_sdk(archive, folder, progress)
        return folder


def _unpack_sdk(archive: Archive, folder: Path, progress: Progress) -> None:
    progress("unpacking the input's headers and framework library")
    scratch = scratch_path(folder)
    shutil.rmtree(scratch, ignore_errors=True)
    wanted = [m for m in archive.members if m.name.startswith(_SDK_PREFIX) or m.name.startswith("tensorflow/libtensorflow_framework.so")]
    with open_archive_file(archive) as handle:
        for member in wanted:
            target = scratch / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as out:
                for chunk in iter_content(handle, archive, member):
                    out.write(chunk)
    publish_folder(folder, "sdk", scratch)


def _compiler_identity(builder: str, compiler: str, suite: str, cache: Path, progress: Progress) -> str:
    if builder == "host":
        try:
            result = subprocess.run([compiler, "--version"], capture_output=True, text=True)
        except OSError as exc:
            raise InputFileError(f"[ops] compiler '{compiler}' cannot be run ({exc.strerror or exc})",
                                 hint="install g++ >= 11, set [ops] compiler, or [ops] build = false") from exc
        return f"{compiler} ({result.stdout.splitlines()[0] if result.stdout else 'unknown'}) on this machine"
    root = build_root(suite, cache, progress)
    result = subprocess.run(["chroot", str(root), compiler, "--version"], capture_output=True, text=True)
    return f"{compiler} ({result.stdout.splitlines()[0] if result.stdout else 'unknown'}) in a Debian {suite} build root"


def build_root(suite: str, cache: Path, progress: Progress) -> Path:
    """A minimal Debian ``suite`` root with g++, made once with debootstrap from the machine's mirror."""
    root = entry_path(cache, "roots", suite)
    with entry_lock(root):
        if not usable(root, "roots", progress, f"Debian {suite} build root", "making it again"):
            _make_root(suite, root, progress)
    return root


def _make_root(suite: str, root: Path, progress: Progress) -> None:
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise OpBuildError(f"the [ops] builder 'debian-root' needs root and debootstrap to make a Debian {suite} build root",
                           hint="install debootstrap (apt-get install debootstrap) and run as root, "
                                "use the docker/builder image, or set [ops] builder = \"host\" for a newer target")
    progress(f"creating a Debian {suite} build root with debootstrap (once, ~70 s)")
    root.parent.mkdir(parents=True, exist_ok=True)
    # made in place: debootstrap's root is not moved once made
    result = subprocess.run(["debootstrap", "--variant=minbase", "--include=g++", suite, str(root), debian_mirror()],
                            capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise OpBuildError(f"debootstrap {suite} failed: {(result.stderr or result.stdout).strip().splitlines()[-1:]}")
    seal(root, "roots")


def _compile_in_root(spec: dict, flags: OpFlags, compiler: str, suite: str, cache: Path, sdk: Path, work: Path,
                     key: str):
    # The folder is named by the build's key, not at random: the headers' paths end up in the library
    # (__FILE__ in TensorFlow's inline code), so a random name made every build's bytes different.
    root = entry_path(cache, "roots", suite)
    inside = root / "build" / key  # a scratch folder of the root, left out of its manifest
    try:
        shutil.rmtree(inside, ignore_errors=True)
        shutil.copytree(work, inside)
        shutil.copytree(sdk / "tensorflow", inside / "tensorflow", symlinks=True)
        plan = compile_plan(spec, flags, compiler, include=Path("/build") / key / "tensorflow" / "include",
                            framework=Path("/build") / key / "tensorflow")
        (inside / "objects").mkdir()

        def run(command: tuple[str, ...]) -> subprocess.CompletedProcess:
            script = f"cd /build/{key} && {shlex.join(command)}"
            return subprocess.run(["chroot", str(root), "sh", "-c", script], capture_output=True, text=True)

        result = run_plan(plan, run)
        if result.returncode == 0:
            shutil.copy(inside / "_retf_ops.so", work / "_retf_ops.so")
        return result
    finally:
        shutil.rmtree(inside, ignore_errors=True)

