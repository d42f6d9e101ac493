"""Libraries built for TensorFlow 1.x in an environment: ELF files that link TF 1.x's framework library.

TensorFlow 2.x cannot stand in for that library (it is libtensorflow_framework.so.2, with another ABI), so such a
library, a custom-op library loaded with tf.load_op_library most often, cannot load once the environment's TF 1.15
is replaced. `inspect --recipe` and `verify` list them before the user finds out from dlopen.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from retfwheel.native.elf import ELF_MAGIC

TF1_FRAMEWORK = "libtensorflow_framework.so.1"


def needed_libraries(path: Path) -> tuple[str, ...]:
    """DT_NEEDED of the ELF file at ``path``; () for any other file (or a damaged one).

    Reads the header, the program headers, the dynamic segment and the needed names only (a few KB, no
    pyelftools): an environment's few hundred libraries take milliseconds.
    """
    try:
        with open(path, "rb") as stream:
            return _needed(stream)
    except (OSError, struct.error, ValueError):
        return ()


def _needed(stream: BinaryIO) -> tuple[str, ...]:
    head = stream.read(64)
    if len(head) < 52 or head[:4] != ELF_MAGIC or head[4] not in (1, 2):
        return ()
    wide, end = head[4] == 2, "<" if head[5] == 1 else ">"
    phoff = struct.unpack_from(end + ("Q" if wide else "I"), head, 32 if wide else 28)[0]
    phentsize, phnum = struct.unpack_from(end + "HH", head, 54 if wide else 42)
    stream.seek(phoff)
    table = stream.read(phentsize * phnum)
    loads, dynamic = [], None
    for index in range(phnum):
        if wide:
            kind, _, offset, address, _, size = struct.unpack_from(end + "IIQQQQ", table, index * phentsize)
        else:
            kind, offset, address, _, size = struct.unpack_from(end + "IIIII", table, index * phentsize)
        if kind == 1:  # PT_LOAD
            loads.append((address, offset, size))
        elif kind == 2:  # PT_DYNAMIC
            dynamic = (offset, size)
    if dynamic is None:
        return ()
    stream.seek(dynamic[0])
    entries = stream.read(dynamic[1])
    step, form = (16, end + "qQ") if wide else (8, end + "iI")
    names, strtab = [], None
    for at in range(0, len(entries) - step + 1, step):
        tag, value = struct.unpack_from(form, entries, at)
        if tag == 0:  # DT_NULL
            break
        if tag == 1:  # DT_NEEDED
            names.append(value)
        elif tag == 5:  # DT_STRTAB, an address
            strtab = value
    base = next((offset + strtab - address for address, offset, size in loads
                 if strtab is not None and address <= strtab < address + size), None)
    if base is None:
        return ()
    found = []
    for name in names:
        stream.seek(base + name)
        found.append(stream.read(4096).split(b"\x00", 1)[0].decode("utf-8", "replace"))
    return tuple(found)


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
