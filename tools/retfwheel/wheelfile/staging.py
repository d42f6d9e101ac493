"""The hidden folder a wheel is written in before its atomic rename into the output folder.

Each staging folder holds a lock file its build keeps locked (flock) while it runs. A build killed
outright (SIGKILL, power loss) cannot remove its folder, but its lock dies with it: the next build
into the same output folder removes every staging folder whose lock it can take, and never one of a
build still running there.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from retfwheel.errors import OutputError

PREFIX = ".retfwheel-"
OWNER = ".owner"  # the lock file inside a staging folder
UNOWNED_GRACE = 60.0  # seconds: a folder without its lock file yet may be one being made this instant


def remove_stale(out_dir: Path) -> list[Path]:
    """Remove the staging folders of builds that died in ``out_dir``; return them."""
    removed = []
    for folder in sorted(out_dir.glob(PREFIX + "*")):
        if folder.is_dir() and not folder.is_symlink() and _abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _abandoned(folder: Path) -> bool:
    try:
        fd = os.open(folder / OWNER, os.O_RDONLY)
    except FileNotFoundError:  # killed between making the folder and its lock file, or not ours: only if empty
        return not any(folder.iterdir()) and time.time() - folder.stat().st_mtime > UNOWNED_GRACE
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its build is still running
    finally:
        os.close(fd)
    return True


@contextmanager
def staging_folder(out_dir: Path) -> Iterator[Path]:
    """A fresh staging folder in ``out_dir``, locked for as long as the block runs, removed after it."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=out_dir))
        fd = os.open(folder / OWNER, os.O_CREAT | os.O_WRONLY, 0o600)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create the output ({exc.strerror or exc})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
