"""Entries of retfwheel's cache: made by one process at a time, published whole, checked when used.

Builds that share a cache (CI jobs on one machine) take an entry's lock (flock on `<entry>.lock`)
while they make it, so the second waits and then uses what the first made. A file entry is written
under a temporary name, renamed into place, and carries the sha256 of its content next to it
(`<file>.sha256`); an entry whose content no longer matches is damaged, and its maker makes it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from retfwheel.errors import InputFileError, OutputError

MARKER = ".retfwheel-cache"  # in every folder the tool has used as its cache: prune and clear need it


def ensure_writable(root: Path) -> Path:
    """``root``, made if missing and marked as a retfwheel cache; OutputError, with what to do, if this user
    cannot write there."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        if not (root / MARKER).exists():
            (root / MARKER).write_text("retfwheel's download and build cache (`retfwheel cache` shows it)\n")
    except OSError as exc:
        raise OutputError(f"{root}: the cache folder cannot be written ({exc.strerror or exc})",
                          hint="pass --cache-dir DIR or set RETFWHEEL_CACHE_DIR to a folder you can write") from exc
    return root


_HELD: dict[Path, int] = {}  # locks this process holds, by lock file: taking one again nests, never waits


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold the lock of the cache entry ``entry`` (a file or folder, which need not exist yet).

    Re-entrant within a process (making an environment makes its venv, the same entry): flock
    would make a second open of the lock file in the same process wait for the first forever.
    """
    entry.parent.mkdir(parents=True, exist_ok=True)
    lock = (entry.parent / f".{entry.name}.lock").resolve()
    if lock in _HELD:
        _HELD[lock] += 1
        try:
            yield
        finally:
            _HELD[lock] -= 1
        return
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _HELD[lock] = 1
        yield
    finally:
        _HELD.pop(lock, None)
        os.close(fd)


def publish(path: Path, data: bytes) -> None:
    """Write ``data`` to the file entry ``path`` whole (temporary name, then rename), with its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = path.with_name(path.name + ".sha256")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
    digest_tmp = digest.with_name(f".{digest.name}.{os.getpid()}.tmp")
    digest_tmp.write_text(hashlib.sha256(data).hexdigest() + "\n")
    os.replace(digest_tmp, digest)


def read_verified(path: Path) -> bytes | None:
    """The content of the file entry ``path`` if it is there and matches its recorded sha256, else None."""
    try:
        data = path.read_bytes()
        recorded = path.with_name(path.name + ".sha256").read_text().strip()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == recorded else None


def is_damaged(path: Path) -> bool:
    """Whether the file entry ``path`` exists but no longer matches its recorded sha256 (or has none)."""
    return path.exists() and read_verified(path) is None


# What each top folder of the cache holds (`retfwheel cache`). Only these are ever pruned or cleared:
# a cache folder pointed at something else by mistake keeps everything that is not one of them.
KINDS: dict[str, str] = {
    "inputs": "input wheels downloaded for recipes' [input]",
    "files": "locked files (wheels, sdists), checked by sha256 on every use",
    "built": "locked sdists built into wheels for a target",
    "sdk": "input wheels' headers and framework libraries",
    "ops": "compiled op libraries (with their sha256)",
    "venvs": "target interpreters' venvs that build sdists and resolve locks",
    "environments": "the emulated old environments `verify` and `run` use",
    "roots": "Debian build roots (debootstrap) for the op library",
    "debian": "Debian packages (the system libstdc++ of environments, a vendored libstdc++)",
    "scans": "ELF analyses of input wheels",
    "probes": "the GLIBCXX_3.4.29 probe extension `verify` loads",
    "locks": "locks made by `retfwheel lock` for built-in recipes",
}
STAGING_PREFIXES = (".build-", ".ops-", ".inputs-")  # scratch folders; left behind only by killed runs
STAGING_AGE = 86400.0  # seconds: a scratch folder this old belongs to no running build


@dataclass(frozen=True)
class Usage:
    kind: str
    entries: int
    bytes: int
    description: str


def usage(root: Path) -> list[Usage]:
    """Entries and size of each kind in the cache at ``root``."""
    found = []
    for kind, description in KINDS.items():
        folder = root / kind
        if folder.is_dir():
            entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
            found.append(Usage(kind, len(entries), size, description))
    return found


def _require_cache(root: Path) -> None:
    if not (root / MARKER).is_file():
        raise InputFileError(f"{root}: not a folder retfwheel has used as its cache (no {MARKER}); nothing removed",
                             hint="pass the cache folder with --cache-dir, or set RETFWHEEL_CACHE_DIR")


def prune(root: Path, older_than_days: float | None = None) -> list[Path]:
    """Remove what killed runs left half-made, damaged op libraries, and (with ``older_than_days``) entries not
    changed for that long; each under its lock, so a running build's entries are never touched."""
    _require_cache(root)
    removed: list[Path] = []
    now = time.time()
    cutoff = None if older_than_days is None else now - older_than_days * 86400
    for folder in [root] + [root / kind for kind in KINDS]:
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            scratch = entry.name.startswith(STAGING_PREFIXES) and now - entry.stat().st_mtime > STAGING_AGE
            if folder == root:
                old = damaged = False
            else:
                damaged = folder.name == "ops" and is_damaged(entry / "_retf_ops.so")
                old = cutoff is not None and not entry.name.startswith(".") and entry.stat().st_mtime < cutoff
            if scratch or damaged or old:
                with entry_lock(entry):
                    _remove(entry)
                removed.append(entry)
    return removed


def clear(root: Path) -> list[Path]:
    """Remove every kind of entry from the cache at ``root`` (nothing else there)."""
    _require_cache(root)
    removed = []
    for kind in KINDS:
        folder = root / kind
        if folder.is_dir():
            _remove(folder)
            removed.append(folder)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
