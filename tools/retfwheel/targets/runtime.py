"""Obtaining the libstdc++.so.6 a recipe vendors: from the toolchain, a file, or a pinned Debian package."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from retfwheel.cache import Progress, entry_lock, entry_path, publish_file, usable, work_folder
from retfwheel.errors import FetchError, InputFileError
from retfwheel.process import last_line
from retfwheel.targets.recipe import RuntimeSpec
from retfwheel.wheelfile.record import file_sha256

_ARCH = {"x86_64": ("amd64", "x86_64-linux-gnu"), "aarch64": ("arm64", "aarch64-linux-gnu")}


def obtain_runtime(spec: RuntimeSpec, arch: str, cache: Path, progress: Progress = lambda message: None) -> tuple[bytes, str]:
    """The bytes of the runtime and a one-line description of where they came from."""
    if spec.source == "toolchain":
        return _from_toolchain(spec.compiler)
    if spec.source == "file":
        assert spec.path is not None, "the recipe check requires [libstdcxx] path with source = \"file\""
        path = Path(spec.path)
        try:
            return path.read_bytes(), f"file {path}"
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read the [libstdcxx] file ({exc.strerror or exc})") from exc
    if spec.source == "debian":
        deb = fetch_deb(spec.package, spec.version, spec.suite, spec.sha256, arch, cache, progress)
        data = extract_library(deb, "libstdc++.so.6", _ARCH[arch][1])
        return data, f"Debian {spec.suite} {spec.package} {spec.version}"
    raise ValueError(f"no runtime source {spec.source!r}")


def _from_toolchain(compiler: str) -> tuple[bytes, str]:
    try:
        result = subprocess.run([compiler, "-print-file-name=libstdc++.so.6"], capture_output=True, text=True)
    except OSError as exc:
        raise InputFileError(f"[libstdcxx] compiler '{compiler}' cannot be run ({exc.strerror or exc})",
                             hint="install it, or choose source = \"debian\" in the recipe") from exc
    found = Path(result.stdout.strip())
    if result.returncode != 0 or not found.is_absolute() or not found.exists():
        raise InputFileError(f"[libstdcxx] '{compiler} -print-file-name=libstdc++.so.6' found no runtime",
                             hint="install the compiler's libstdc++, or choose source = \"debian\" in the recipe")
    real = found.resolve()
    return real.read_bytes(), f"the {compiler} toolchain ({real})"


def deb_cache_path(cache: Path, sha256: str, package: str, version: str, arch: str) -> Path:
    return entry_path(cache, "debian", sha256, f"{package}_{version.replace(':', '%3a')}_{_ARCH[arch][0]}.deb")


def fetch_deb(package: str, version: str, suite: str, sha256: str, arch: str, cache: Path,
              progress: Progress = lambda message: None) -> Path:
    """A pinned .deb, fetched once with apt from the machine's own Debian mirror and verified."""
    stored = deb_cache_path(cache, sha256, package, version, arch)
    with entry_lock(stored):
        if not usable(stored, "debian", progress, "Debian package", "fetching it again"):
            _download_deb(package, version, suite, sha256, arch, cache, stored)
    return stored


def _download_deb(package: str, version: str, suite: str, sha256: str, arch: str, cache: Path, stored: Path) -> None:
    mirror = debian_mirror()
    scratch = work_folder(cache, ".apt-")
    try:
        options = _private_apt(scratch, mirror, suite, _ARCH[arch][0])
        for command in (["apt-get", *options, "update"], ["apt-get", *options, "download", f"{package}:{_ARCH[arch][0]}={version}"]):
            result = subprocess.run(command, capture_output=True, text=True, cwd=scratch / "download")
            if result.returncode != 0:
                raise FetchError(f"apt-get {command[-2] if 'download' in command else 'update'} for {suite} failed: {last_line(result)}")
        debs = sorted((scratch / "download").glob("*.deb"))
        if len(debs) != 1:
            raise FetchError(f"apt-get download {package}={version} gave {len(debs)} files")
        digest = file_sha256(debs[0])
        if digest != sha256:
            raise FetchError(f"{package} {version} ({suite}) has sha256 {digest}, the recipe pins {sha256}; refusing it")
        publish_file(stored, "debian", debs[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def debian_mirror() -> str:
    """The Debian archive URI this machine's apt is configured with."""
    candidates = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    candidates += sorted(Path("/etc/apt/sources.list.d").glob("*.list"))
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for match in re.finditer(r"^URIs:\s*(\S+)", text, re.M):
            if "security" not in match.group(1):
                return match.group(1)
        for match in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", text, re.M):
            if "security" not in match.group(1):
                return match.group(1)
    raise FetchError("no Debian mirror is configured for apt on this machine",
                     hint="use [libstdcxx] source = \"file\" or \"toolchain\" instead")


def _private_apt(folder: Path, mirror: str, suite: str, arch: str) -> list[str]:
    """apt options that use only a private sources list and state under ``folder``."""
    for sub in ("lists/partial", "cache/archives/partial", "parts", "download"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    signed = f"Signed-By: {keyring}\n" if os.path.exists(keyring) else ""
    (folder / "suite.sources").write_text(
        f"Types: deb\nURIs: {mirror}\nSuites: {suite}\nComponents: main\nArchitectures: {arch}\n{signed}"
    )
    settings = {
        "Dir::Etc::SourceList": folder / "suite.sources",
        "Dir::Etc::SourceParts": folder / "parts",
        "Dir::State::Lists": folder / "lists",
        "Dir::Cache": folder / "cache",
        "Dir::Cache::pkgcache": "",
        "Dir::Cache::srcpkgcache": "",
        "APT::Sandbox::User": "root",
        "Acquire::Languages": "none",
        "APT::Architecture": arch,
    }
    return [f"-o{key}={value}" for key, value in settings.items()] + ["-qq"]


def extract_library(deb: Path, soname: str, triplet: str) -> bytes:
    """The real file behind ``soname`` in a .deb (ar archive holding data.tar.*), symlinks followed."""
    members = _ar_members(deb.read_bytes())
    data_name = next((n for n in members if n.startswith("data.tar")), None)
    if data_name is None:
        raise FetchError(f"{deb}: not a Debian package (no data.tar member)")
    with tarfile.open(fileobj=io.BytesIO(members[data_name])) as tar:
        by_name = {m.name.lstrip("./"): m for m in tar.getmembers()}
        name = f"usr/lib/{triplet}/{soname}"
        for _ in range(8):
            member = by_name.get(name)
            if member is None:
                raise FetchError(f"{deb}: has no {name}")
            if member.issym():
                name = os.path.normpath(os.path.join(os.path.dirname(name), member.linkname))
                continue
            extracted = tar.extractfile(member)
            if extracted is None:
                raise FetchError(f"{deb}: {name} is not a regular file")
            return extracted.read()
    raise FetchError(f"{deb}: symlink loop at {soname}")


def _ar_members(data: bytes) -> dict[str, bytes]:
    if not data.startswith(b"!<arch>\n"):
        raise FetchError("not an ar archive")
    members, offset = {}, 8
    while offset + 60 <= len(data):
        header = data[offset : offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        members[name] = data[offset + 60 : offset + 60 + size]
        offset += 60 + size + (size & 1)
    return members

