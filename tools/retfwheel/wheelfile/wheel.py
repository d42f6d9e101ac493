"""Reading a wheel: its name, tags, .dist-info metadata, and RECORD checked against the archive."""

from __future__ import annotations

import configparser
import email.parser
import email.policy
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import Version

from retfwheel.errors import RecordError, WheelFormatError
from retfwheel.wheelfile.archive import Archive, read_archive, read_content
from retfwheel.wheelfile.record import RecordEntry, parse_record

PROVENANCE_FILE = "retfwheel.json"
# Files a wheel may carry without a RECORD row: RECORD itself and its signatures.
_UNRECORDED = ("RECORD", "RECORD.jws", "RECORD.p7s")


def console_scripts(entry_points: bytes) -> dict[str, str]:
    """{script: "module:attr"} of an entry_points.txt's [console_scripts] (names keep their case)."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(entry_points.decode("utf-8"))
    return dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}


@dataclass(frozen=True)
class WheelInfo:
    """Everything about an input wheel that can be known without reading its payload."""

    archive: Archive
    filename: str
    name: NormalizedName
    version: Version
    build: tuple
    tags: frozenset[Tag]
    dist_info: str  # e.g. "tensorflow_cpu-2.6.2.dist-info"
    metadata: bytes
    wheel_file: bytes
    record: dict[str, RecordEntry]
    metadata_name: str
    requires_dist: tuple[str, ...]
    provenance: bytes | None
    entry_points: bytes | None = None

    @property
    def path(self) -> Path:
        return self.archive.path

    @property
    def data_dir(self) -> str:
        return self.dist_info[: -len(".dist-info")] + ".data"

    @property
    def record_path(self) -> str:
        return f"{self.dist_info}/RECORD"


def read_wheel(path: Path) -> WheelInfo:
    """Open ``path`` as a wheel and check that its RECORD lists exactly the files it holds."""
    path = Path(path)
    archive = read_archive(path)
    try:
        name, version, build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise WheelFormatError(f"{path}: not a wheel file name ({exc})") from exc
    dist_info = _find_dist_info(archive, path)
    texts = {}
    for leaf in ("METADATA", "WHEEL", "RECORD"):
        member = archive.member(f"{dist_info}/{leaf}")
        if member is None:
            raise WheelFormatError(f"{path}: {dist_info}/{leaf} is missing")
        texts[leaf] = read_content(archive, member)
    record_text = _decode(texts["RECORD"], f"{path}: {dist_info}/RECORD")
    record = parse_record(record_text, f"{path}: {dist_info}/RECORD")
    _check_record_listing(archive, record, dist_info)
    message = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(texts["METADATA"])
    if not message.get("Name") or not message.get("Version"):
        raise WheelFormatError(f"{path}: {dist_info}/METADATA has no Name or Version")
    provenance_member = archive.member(f"{dist_info}/{PROVENANCE_FILE}")
    entry_points_member = archive.member(f"{dist_info}/entry_points.txt")
    return WheelInfo(
        archive=archive,
        filename=path.name,
        name=name,
        version=version,
        build=build,
        tags=tags,
        dist_info=dist_info,
        metadata=texts["METADATA"],
        wheel_file=texts["WHEEL"],
        record=record,
        metadata_name=str(message["Name"]),
        requires_dist=tuple(str(r) for r in message.get_all("Requires-Dist") or ()),
        provenance=read_content(archive, provenance_member) if provenance_member else None,
        entry_points=read_content(archive, entry_points_member) if entry_points_member else None,
    )


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WheelFormatError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def _find_dist_info(archive: Archive, path: Path) -> str:
    tops = {m.name.split("/", 1)[0] for m in archive.members if "/" in m.name}
    dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
    if not dist_infos:
        raise WheelFormatError(f"{path}: no .dist-info directory; this is not a wheel")
    if len(dist_infos) > 1:
        raise WheelFormatError(f"{path}: several .dist-info directories ({', '.join(dist_infos)})")
    return dist_infos[0]


def _check_record_listing(archive: Archive, record: dict[str, RecordEntry], dist_info: str) -> None:
    where = f"{archive.path}: {dist_info}/RECORD"
    unrecorded = {f"{dist_info}/{leaf}" for leaf in _UNRECORDED}
    names = {m.name for m in archive.members}
    missing = sorted(n for n in names if n not in record and n not in unrecorded)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise RecordError(f"{where} does not list '{missing[0]}'{more}")
    absent = sorted(p for p in record if p not in names and p not in unrecorded)
    if absent:
        more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        raise RecordError(f"{where} lists '{absent[0]}'{more}, which the archive does not contain")
    for member in archive.members:
        entry = record.get(member.name)
        if entry is None or member.name in unrecorded:
            continue
        if not entry.hash:
            raise RecordError(f"{where}: '{member.name}' has no hash")
        if entry.size is not None and entry.size != member.size:
            raise RecordError(f"{where}: '{member.name}' is {member.size} bytes, RECORD says {entry.size}")
