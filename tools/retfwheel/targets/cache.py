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
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold the lock of the cache entry ``entry`` (a file or folder, which need not exist yet)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(entry.parent / f".{entry.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
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
