"""One parallel pass over a wheel's members: find and analyse ELF files, optionally verify RECORD hashes."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from retfwheel.cache import entry_lock, entry_path, publish_file, usable
from retfwheel.errors import RecordError, WheelFormatError
from retfwheel.native.elf import ElfInfo, is_elf, read_elf
from retfwheel.wheelfile.archive import Member, MemberView, iter_content, open_archive_file, read_prefix
from retfwheel.wheelfile.record import encode_digest, new_hasher
from retfwheel.wheelfile.wheel import WheelInfo

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Scan:
    elves: tuple[ElfInfo, ...]  # sorted by path


def scan_wheel(wheel: WheelInfo, *, verify: bool, workers: int | None = None) -> Scan:
    """Analyse every ELF member; with ``verify``, also check every member against RECORD.

    Without ``verify`` only ELF headers and dynamic segments are decompressed.
    """
    jobs = sorted(wheel.archive.members, key=lambda m: -m.compressed_size)
    local = threading.local()
    handles = []
    lock = threading.Lock()

    def handle():
        if not hasattr(local, "fh"):
            local.fh = open_archive_file(wheel.archive)
            with lock:
                handles.append(local.fh)
        return local.fh

    def run(member: Member) -> ElfInfo | None:
        fh = handle()
        if verify and member.name != wheel.record_path:
            return _verify_member(fh, wheel, member)
        if member.size < 52 or not is_elf(read_prefix(fh, wheel.archive, member, 4)):
            return None
        return _read_elf(wheel, member, MemberView(iter_content(fh, wheel.archive, member), member.size))

    workers = workers or min(4, os.cpu_count() or 1)
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run, jobs))
    finally:
        for fh in handles:
            fh.close()
    elves = tuple(sorted((e for e in results if e is not None), key=lambda e: e.path))
    return Scan(elves=elves)


# The analysis's version, part of its cache key: bumped whenever what a scan finds changes (2: string ABI
# symbol counts), so a newer retfwheel never serves an older analysis.
SCAN_VERSION = 2


def verified_elves(wheel: WheelInfo, sha256: str, cache: Path, progress: Progress = lambda message: None) -> tuple[ElfInfo, ...]:
    """``scan_wheel(verify=True)``, done once per file content: the result is cached by the file's sha256.

    A verification of these exact bytes against their RECORD still holds when the same bytes come back.
    """
    key = entry_path(cache, "scans", f"{sha256}-v{SCAN_VERSION}.json")
    with entry_lock(key):
        if usable(key, "scans", progress, "ELF analysis", "analysing the wheel again"):
            try:
                return tuple(_elf_from_json(item) for item in json.loads(key.read_text()))
            except (ValueError, TypeError, KeyError):
                progress(f"the cached ELF analysis {key} is unreadable; analysing the wheel again")
        elves = scan_wheel(wheel, verify=True).elves
        publish_file(key, "scans", json.dumps([dataclasses.asdict(e) for e in elves]).encode())
        return elves


def _elf_from_json(item: dict) -> ElfInfo:
    item = dict(item)
    for name in ("needed", "rpath", "runpath", "provides"):
        item[name] = tuple(item[name])
    item["version_needs"] = {k: tuple(v) for k, v in item["version_needs"].items()}
    if item.get("string_abi_symbols") is not None:
        item["string_abi_symbols"] = tuple(item["string_abi_symbols"])
    return ElfInfo(**item)  # an entry from an older scan (other fields) raises TypeError and is redone


def _verify_member(fh, wheel: WheelInfo, member: Member) -> ElfInfo | None:
    entry = wheel.record.get(member.name)
    if entry is None:  # RECORD signatures; their listing was checked by read_wheel
        return None
    hasher = new_hasher(entry.algorithm)
    view = MemberView(iter_content(fh, wheel.archive, member), member.size, sink=hasher.update)
    info = None
    if member.size >= 52 and is_elf(view.read(4)):
        view.seek(0)
        info = _read_elf(wheel, member, view)
    view.drain()
    if encode_digest(entry.algorithm, hasher.digest()) != entry.hash:
        raise RecordError(
            f"{wheel.path}: '{member.name}' does not match its RECORD hash (the file was changed after the wheel was built)"
        )
    return info


def is_framework_library(name: str) -> bool:
    """TensorFlow's framework library: custom ops link against it, so its ABI is the one to match."""
    return name.rsplit("/", 1)[-1].startswith("libtensorflow_framework.so")


def _read_elf(wheel: WheelInfo, member: Member, view: MemberView) -> ElfInfo:
    try:
        return read_elf(member.name, view, string_abi=is_framework_library(member.name))
    except ValueError as exc:
        raise WheelFormatError(f"{wheel.path}: {exc}") from exc
