import pytest

from retfwheel.errors import RecordError
from retfwheel.wheelfile.record import entry_for, format_record, hash_bytes, parse_record


def test_round_trip_keeps_rows_and_puts_record_last():
    entries = [entry_for("a/b.py", b"x = 1\n"), entry_for("a/c,comma.txt", b"")]
    text = format_record(entries, "d-1.dist-info/RECORD").decode()
    parsed = parse_record(text, "RECORD")
    assert list(parsed) == ["a/b.py", "a/c,comma.txt", "d-1.dist-info/RECORD"]
    assert parsed["a/b.py"].hash == hash_bytes(b"x = 1\n") and parsed["a/b.py"].size == 6
    assert text.endswith("d-1.dist-info/RECORD,,\n")


def test_hash_is_unpadded_urlsafe_sha256():
    assert hash_bytes(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a.py,sha256=x\n", "expected 3 fields"),
        ("a.py,md5=x,1\n", "unsupported hash 'md5'"),
        ("a.py,sha256=x,one\n", "non-numeric size"),
        ("a.py,sha256=x,1\na.py,sha256=x,1\n", "listed twice"),
    ],
)
def test_bad_rows_name_file_and_line(text, fragment):
    with pytest.raises(RecordError, match=fragment) as info:
        parse_record(text, "w.whl: d.dist-info/RECORD")
    assert "w.whl: d.dist-info/RECORD:" in str(info.value)
