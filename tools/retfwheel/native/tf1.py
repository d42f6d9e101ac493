"""Libraries built for TensorFlow 1.x in an environment: ELF files that link TF 1.x's framework library.

TensorFlow 2.x cannot stand in for that library (it is libtensorflow_framework.so.2, with another ABI), so such a
library, a custom-op library loaded with tf.load_op_library most often, cannot load once the environment's TF 1.15
is replaced. `inspect --recipe` and `verify` list them before the user finds out from dlopen.
"""

from __future__ import annotations

import os
from pathlib import Path

from retfwheel.native.elf import ELF_MAGIC, read_elf
from retfwheel.wheelfile.archive import MemberView

TF1_FRAMEWORK = "libtensorflow_framework.so.1"


def needed_libraries(path: Path) -> tuple[str, ...]:
    """DT_NEEDED of the ELF file at ``path``, reading only its head and dynamic segment; () for any other file."""
    try:
        with open(path, "rb") as stream:
            if stream.read(4) != ELF_MAGIC:
                return ()
            stream.seek(0)
            chunks = iter(lambda: stream.read(1 << 16), b"")
            return read_elf(str(path), MemberView(chunks, os.fstat(stream.fileno()).st_size)).needed
    except (OSError, ValueError):
        return ()


def tf1_extensions(distributions: dict[str, dict], prefix: Path) -> dict[str, tuple[str, ...]]:
    """{"name version": files} of the distributions that hold an ELF file linking TF 1.x's framework library.

    ``distributions`` is an environment snapshot ({name: {"version": ..., "files": [...]}}, the files relative to
    ``prefix``). TF 1.x itself (tensorflow, tensorflow-gpu, ...: the distribution that ships the framework library,
    which the wheel replaces) is not one of them.
    """
    found: dict[str, tuple[str, ...]] = {}
    for name, info in sorted(distributions.items()):
        if any(path.rsplit("/", 1)[-1] == TF1_FRAMEWORK for path in info["files"]):
            continue
        files = tuple(path for path in sorted(info["files"]) if _is_library(path)
                      and TF1_FRAMEWORK in needed_libraries(prefix / path))
        if files:
            found[f"{name} {info['version']}"] = files
    return found


def _is_library(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".so") or ".so." in name
