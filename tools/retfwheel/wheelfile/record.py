"""RECORD rows as small value types: parse, format and hash."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from dataclasses import dataclass

from retfwheel.errors import RecordError

HASH_ALGORITHM = "sha256"
# Algorithms pip accepts in RECORD; anything weaker is refused as unverifiable.
_ACCEPTED = {"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"}


@dataclass(frozen=True)
class RecordEntry:
    path: str
    hash: str  # "sha256=<urlsafe b64, no padding>", or "" for RECORD itself
    size: int | None

    @property
    def algorithm(self) -> str:
        return self.hash.partition("=")[0]


def encode_digest(algorithm: str, digest: bytes) -> str:
    return f"{algorithm}=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def hash_bytes(data: bytes) -> str:
    """The RECORD hash field of ``data`` (sha256)."""
    return encode_digest(HASH_ALGORITHM, hashlib.sha256(data).digest())


def entry_for(path: str, data: bytes) -> RecordEntry:
    return RecordEntry(path, hash_bytes(data), len(data))


def parse_record(text: str, where: str) -> dict[str, RecordEntry]:
    """Rows of a RECORD file keyed by path; ``where`` names the file in errors."""
    entries: dict[str, RecordEntry] = {}
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row:
            continue
        if len(row) != 3:
            raise RecordError(f"{where}:{lineno}: expected 3 fields (path,hash,size), found {len(row)}")
        path, digest, size = row
        if path in entries:
            raise RecordError(f"{where}:{lineno}: '{path}' is listed twice")
        if digest and digest.partition("=")[0] not in _ACCEPTED:
            raise RecordError(f"{where}:{lineno}: '{path}' uses unsupported hash '{digest.partition('=')[0]}'")
        try:
            size_value = int(size) if size else None
        except ValueError:
            raise RecordError(f"{where}:{lineno}: '{path}' has a non-numeric size '{size}'") from None
        entries[path] = RecordEntry(path, digest, size_value)
    return entries


def format_record(entries: list[RecordEntry], record_path: str) -> bytes:
    """RECORD bytes for ``entries`` (in the given order) followed by RECORD's own row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for entry in entries:
        writer.writerow([entry.path, entry.hash, "" if entry.size is None else entry.size])
    writer.writerow([record_path, "", ""])
    return out.getvalue().encode("utf-8")


def file_sha256(path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def new_hasher(algorithm: str):
    return hashlib.new(algorithm)
