"""Reading a zip archive safely: member list, raw (compressed) bytes, and decompressed streams.

zipfile parses the central directory; member data is read here from offsets so that several
threads can stream members through their own file handles and unchanged members can be copied
into the output without recompressing (zipfile has no public raw-copy API).
"""

from __future__ import annotations

import io
import os
import stat
import struct
import types
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from retfwheel.errors import InputFileError, UnsafeArchiveError, WheelFormatError

_inflate: types.ModuleType
try:  # ISA-L inflates ~2.5x faster than zlib; a 400 MB TensorFlow library dominates every scan.
    from isal import isal_zlib as _inflate
except ImportError:  # pragma: no cover - platforms without isal wheels
    _inflate = zlib
_INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate.error)

CHUNK = 1 << 20
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
_LOCAL_MAGIC = b"PK\x03\x04"
SUPPORTED_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}


@dataclass(frozen=True)
class Member:
    """One file in an archive, as its central directory describes it."""

    name: str
    size: int
    compressed_size: int
    crc: int
    method: int
    executable: bool
    header_offset: int


@dataclass(frozen=True)
class Archive:
    path: Path
    members: tuple[Member, ...]
    size: int

    def member(self, name: str) -> Member | None:
        return self._index().get(name)

    def _index(self) -> dict[str, Member]:
        index = self.__dict__.get("_by_name")
        if index is None:
            index = {m.name: m for m in self.members}
            object.__setattr__(self, "_by_name", index)
        return index


def read_archive(path: Path) -> Archive:
    """List an archive's members, refusing anything unsafe to unpack."""
    path = Path(path)
    if not path.exists():
        raise InputFileError(f"{path}: no such file")
    if not path.is_file():
        raise InputFileError(f"{path}: not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise WheelFormatError(f"{path}: file is empty")
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except zipfile.BadZipFile as exc:
        raise WheelFormatError(f"{path}: not a zip archive or truncated ({exc})") from exc
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    members = []
    seen: set[str] = set()
    for info in infos:
        _check_name(path, info.orig_filename)  # zipfile cuts filename at a NUL byte; the original keeps it
        if info.filename in seen:
            raise UnsafeArchiveError(f"{path}: entry '{info.filename}' appears twice")
        seen.add(info.filename)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UnsafeArchiveError(f"{path}: entry '{info.filename}' is a symbolic link")
        if info.is_dir():
            continue
        if info.flag_bits & 0x1:
            raise UnsafeArchiveError(f"{path}: entry '{info.filename}' is encrypted")
        if info.compress_type not in SUPPORTED_METHODS:
            raise WheelFormatError(
                f"{path}: entry '{info.filename}' uses compression method {info.compress_type};"
                " wheels use deflate or stored"
            )
        if info.header_offset + info.compress_size > size:
            raise WheelFormatError(f"{path}: entry '{info.filename}' runs past the end of the file (truncated)")
        members.append(
            Member(
                name=info.filename,
                size=info.file_size,
                compressed_size=info.compress_size,
                crc=info.CRC,
                method=info.compress_type,
                executable=bool(mode & 0o111),
                header_offset=info.header_offset,
            )
        )
    return Archive(path=path, members=tuple(members), size=size)


def _check_name(path: Path, name: str) -> None:
    if "\\" in name or "\x00" in name:
        raise UnsafeArchiveError(f"{path}: entry {name!r} has a backslash or NUL in its name")
    if not name:
        raise UnsafeArchiveError(f"{path}: an entry has an empty name")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{path}: entry '{name}' is an absolute path")
    if ".." in name.split("/"):  # a ".." component, as PurePosixPath(name).parts finds it, without a path object per name
        raise UnsafeArchiveError(f"{path}: entry '{name}' escapes the install directory ('..')")


def data_offset(fh: BinaryIO, archive: Archive, member: Member) -> int:
    """Offset of ``member``'s compressed bytes, checked against its local header."""
    fh.seek(member.header_offset)
    header = fh.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or not header.startswith(_LOCAL_MAGIC):
        raise WheelFormatError(f"{archive.path}: entry '{member.name}' has no valid local header (corrupt or truncated)")
    fields = _LOCAL_HEADER.unpack(header)
    name_len, extra_len = fields[-2], fields[-1]
    local_name = fh.read(name_len)
    if local_name.decode("utf-8", "replace") != member.name and local_name.decode("cp437") != member.name:
        raise UnsafeArchiveError(
            f"{archive.path}: entry '{member.name}' is named '{local_name.decode('utf-8', 'replace')}' in its local header"
        )
    return member.header_offset + _LOCAL_HEADER.size + name_len + extra_len


def iter_raw(fh: BinaryIO, archive: Archive, member: Member) -> Iterator[bytes]:
    """The member's stored (compressed) bytes, in chunks."""
    fh.seek(data_offset(fh, archive, member))
    remaining = member.compressed_size
    while remaining:
        chunk = fh.read(min(CHUNK, remaining))
        if not chunk:
            raise WheelFormatError(f"{archive.path}: entry '{member.name}' is truncated")
        remaining -= len(chunk)
        yield chunk


def iter_content(fh: BinaryIO, archive: Archive, member: Member) -> Iterator[bytes]:
    """The member's decompressed bytes, in chunks; CRC and size are checked at the end."""
    crc = 0
    produced = 0
    where = f"{archive.path}: entry '{member.name}'"
    inflater = _inflate.decompressobj(-15) if member.method == zipfile.ZIP_DEFLATED else None
    try:
        for raw in iter_raw(fh, archive, member):
            chunk = inflater.decompress(raw) if inflater else raw
            if chunk:
                crc = _inflate.crc32(chunk, crc)
                produced += len(chunk)
                yield chunk
        if inflater:
            tail = inflater.flush()
            if tail:
                crc = _inflate.crc32(tail, crc)
                produced += len(tail)
                yield tail
            if not inflater.eof:
                raise WheelFormatError(f"{where} ends before its compressed data does (truncated)")
    except _INFLATE_ERRORS as exc:
        raise WheelFormatError(f"{where} is corrupt ({exc})") from exc
    if produced != member.size or crc != member.crc:
        raise WheelFormatError(f"{where} fails its CRC/size check (corrupt)")


def read_content(archive: Archive, member: Member) -> bytes:
    with open_archive_file(archive) as fh:
        return b"".join(iter_content(fh, archive, member))


def read_prefix(fh: BinaryIO, archive: Archive, member: Member, count: int) -> bytes:
    """Up to ``count`` leading bytes of the member, decompressing as little as possible."""
    fh.seek(data_offset(fh, archive, member))
    raw = fh.read(min(member.compressed_size, max(count * 4, 512)))
    if member.method == zipfile.ZIP_STORED:
        return raw[:count]
    try:
        return _inflate.decompressobj(-15).decompress(raw, count)
    except _INFLATE_ERRORS:
        return b""


def open_archive_file(archive: Archive) -> BinaryIO:
    try:
        return open(archive.path, "rb")
    except OSError as exc:
        raise InputFileError(f"{archive.path}: cannot read ({exc.strerror or exc})") from exc


class MemberView(io.RawIOBase):
    """A seekable, read-only view of a member that decompresses only as far as it is read.

    Whatever was decompressed stays buffered so readers may seek back. ``sink`` sees every
    chunk once, in order (used to hash the whole member while parsing only its head).
    """

    def __init__(self, chunks: Iterator[bytes], size: int, sink=None) -> None:
        super().__init__()
        self._chunks = chunks
        self._size = size
        self._sink = sink
        self._buffer = bytearray()
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        self._fill(end)
        data = bytes(self._buffer[self._pos : end])
        self._pos += len(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def patch(self, offset: int, data: bytes) -> None:
        """Overwrite already-buffered bytes (never what ``sink`` saw)."""
        self._fill(offset + len(data))
        self._buffer[offset : offset + len(data)] = data

    def drain(self) -> None:
        """Consume the rest of the member without buffering it."""
        for chunk in self._chunks:
            if self._sink:
                self._sink(chunk)

    def _fill(self, end: int) -> None:
        while len(self._buffer) < end:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            if self._sink:
                self._sink(chunk)
            self._buffer += chunk
