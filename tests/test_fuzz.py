"""The wheel reader under fuzzing: real small wheels, mutated (bytes, names, sizes, offsets, flags, RECORD), built.

Whatever the damage, `build` either writes a wheel that passes its own audit or raises one of the documented
error families (a RetfError, which the CLI turns into one line and an exit code, never a traceback); and nothing
is left anywhere but the finished wheel in the output folder. Derandomized, so CI runs the same examples.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factory import make_wheel, tensorflow_files
from retfwheel.errors import RetfError
from retfwheel.stages.pipeline import build_wheel
from retfwheel.targets.recipe import load_recipe

CENTRAL = b"PK\x01\x02"
LOCAL = b"PK\x03\x04"


@pytest.fixture(scope="module")
def source(libs, tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("fuzz-source")
    return make_wheel(folder, tensorflow_files(libs.framework_old_abi, {"tensorflow/python/x.py": b"x = 1\n"})).read_bytes()


@pytest.fixture(scope="module")
def fuzz_recipe(tmp_path_factory):
    from conftest import BASE_RECIPE

    path = tmp_path_factory.mktemp("fuzz-recipe") / "fuzz-py36.toml"
    path.write_text(BASE_RECIPE.format(glibc="host", glibcxx="3.4.28", label="retf.fuzz"))
    return load_recipe(path)


def _headers(data: bytes, signature: bytes) -> list[int]:
    found, start = [], 0
    while (index := data.find(signature, start)) >= 0:
        found.append(index)
        start = index + 1
    return found


# Each mutation takes the wheel's bytes and a random draw, and returns damaged bytes. The structured ones aim at
# the fields a reader trusts: sizes, offsets, flags and names in the central directory and local headers.
def flip_bytes(data: bytes, draw) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        out[draw(st.integers(0, len(out) - 1))] ^= draw(st.integers(1, 255))
    return bytes(out)


def truncate(data: bytes, draw) -> bytes:
    return data[:draw(st.integers(0, len(data) - 1))]


def central_field(data: bytes, draw) -> bytes:
    """Rewrite one field of one central directory entry: flags, method, sizes, name length, local header offset."""
    entries = _headers(data, CENTRAL)
    at = draw(st.sampled_from(entries))
    offset, size = draw(st.sampled_from([(8, 2), (10, 2), (20, 4), (24, 4), (28, 2), (30, 2), (42, 4)]))
    value = draw(st.sampled_from([0, 1, 0xFFFF, 0xFFFFFFFF, len(data), len(data) * 2, draw(st.integers(0, 2**16))]))
    out = bytearray(data)
    out[at + offset:at + offset + size] = (value & (256**size - 1)).to_bytes(size, "little")
    return bytes(out)


def local_field(data: bytes, draw) -> bytes:
    """Rewrite one field of one local header: flags, method, sizes, name or extra length."""
    entries = _headers(data, LOCAL)
    at = draw(st.sampled_from(entries))
    offset, size = draw(st.sampled_from([(6, 2), (8, 2), (18, 4), (22, 4), (26, 2), (28, 2)]))
    value = draw(st.integers(0, 256**size - 1))
    out = bytearray(data)
    out[at + offset:at + offset + size] = value.to_bytes(size, "little")
    return bytes(out)


def rename(data: bytes, draw) -> bytes:
    """Give one member a hostile name in both headers (same length, so the archive stays well-formed)."""
    with zipfile.ZipFile(_as_file(data)) as archive:
        names = archive.namelist()
    name = draw(st.sampled_from(names)).encode()
    hostile = draw(st.sampled_from([b"../", b"/", b"./", b"\\", b"\x00", b"//"]))
    new = (hostile + name)[:len(name)]
    return data.replace(name, new)


def rewrite_record(data: bytes, draw) -> bytes:
    """Rebuild the archive with RECORD rows dropped, duplicated, re-hashed or garbled."""
    source = zipfile.ZipFile(_as_file(data))
    record_name = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
    rows = source.read(record_name).decode().splitlines()
    choice = draw(st.sampled_from(["drop", "duplicate", "hash", "size", "garble"]))
    index = draw(st.integers(0, len(rows) - 1))
    if choice == "drop":
        rows.pop(index)
    elif choice == "duplicate":
        rows.append(rows[index])
    elif choice == "hash":
        rows[index] = rows[index].replace("sha256=", "sha256=A", 1)
    elif choice == "size":
        rows[index] = rows[index].rsplit(",", 1)[0] + ",-1"
    else:
        rows[index] = rows[index].replace(",", ";")
    target = _scratch() / "w.whl"
    with zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            out.writestr(info, "\n".join(rows) + "\n" if info.filename == record_name else source.read(info))
    return target.read_bytes()


MUTATIONS = [flip_bytes, truncate, central_field, local_field, rename, rewrite_record]
_SCRATCH: list[Path] = []


def _scratch() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="retfwheel-fuzz-"))
    _SCRATCH.append(folder)
    return folder


def _as_file(data: bytes):
    import io

    return io.BytesIO(data)


@settings(max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_damaged_wheel_builds_cleanly_or_fails_with_a_documented_error(source, fuzz_recipe, data):
    mutation = data.draw(st.sampled_from(MUTATIONS))
    try:
        damaged = mutation(source, data.draw)
    except (zipfile.BadZipFile, StopIteration, ValueError, IndexError):
        return  # the mutation itself found nothing to damage this way
    work = _scratch()
    try:
        wheel = work / "in" / "tensorflow_cpu-2.6.2-cp36-cp36m-manylinux2010_x86_64.whl"
        wheel.parent.mkdir()
        wheel.write_bytes(damaged)
        out = work / "out"
        cache = work / "cache"
        try:
            result = build_wheel(wheel, fuzz_recipe, out, cache=cache)
        except RetfError as error:
            assert error.exit_code > 1, f"{type(error).__name__} has no family exit code"
            assert not out.exists() or list(out.iterdir()) == [], f"{mutation.__name__} left {list(out.iterdir())}"
        else:
            assert result.output is not None and result.audit is not None
            assert [p.name for p in out.iterdir()] == [result.output.name]
        written = {p.relative_to(work) for p in work.rglob("*") if p.is_file()}
        stray = {p for p in written if p.parts[0] not in ("in", "out", "cache")}
        assert not stray, f"files outside the input, output and cache folders: {sorted(stray)[:5]}"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_mutations_reach_the_readers_checks(source, fuzz_recipe, tmp_path):
    """The fuzz test could not fail if its mutations never got past the reader: fixed draws of three of them are
    each refused by the check they aim at."""
    def fixed(*values):
        queue = list(values)
        return lambda strategy: queue.pop(0)

    cases = [(rename, fixed("tensorflow/python/x.py", b"../"), "UnsafeArchiveError"),
             (truncate, fixed(len(source) // 2), "WheelFormatError"),
             (rewrite_record, fixed("hash", 0), "RecordError")]
    for mutation, draw, family in cases:
        wheel = tmp_path / mutation.__name__ / "tensorflow_cpu-2.6.2-cp36-cp36m-manylinux2010_x86_64.whl"
        wheel.parent.mkdir()
        wheel.write_bytes(mutation(source, draw))
        with pytest.raises(RetfError) as caught:
            build_wheel(wheel, fuzz_recipe, tmp_path / mutation.__name__ / "out", cache=tmp_path / "cache")
        assert type(caught.value).__name__ == family, f"{mutation.__name__}: {caught.value!r}"


def teardown_module(module):
    for folder in _SCRATCH:
        shutil.rmtree(folder, ignore_errors=True)
