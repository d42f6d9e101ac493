import pytest

from retfwheel.wheelfile.metadata import rewrite_headers

METADATA = b"Metadata-Version: 2.1\nName: tensorflow-cpu\nVersion: 2.6.2\nSummary: long\n  continued\nRequires-Dist: numpy\n\nName: in the body stays\n"


def test_replaces_only_headers_and_keeps_body():
    out = rewrite_headers(METADATA, {"Name": "tensorflow", "Version": "2.6.2+retf.x"})
    assert out.startswith(b"Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.6.2+retf.x\nSummary: long\n  continued\n")
    assert out.endswith(b"\nName: in the body stays\n")


def test_drop_removes_continuation_lines_and_append_adds():
    out = rewrite_headers(METADATA, {}, drop={"Summary"}, append=[("Tag", "cp36-cp36m-linux_x86_64")])
    assert b"continued" not in out and b"Summary" not in out
    assert b"Requires-Dist: numpy\nTag: cp36-cp36m-linux_x86_64\n\n" in out


def test_crlf_line_endings_are_kept():
    out = rewrite_headers(METADATA.replace(b"\n", b"\r\n"), {"Version": "3"})
    assert b"Version: 3\r\n" in out and b"\n" not in out.replace(b"\r\n", b"")


def test_missing_header_is_an_error():
    with pytest.raises(ValueError, match="no header name"):
        rewrite_headers(b"Version: 1\n", {"Name": "x"})
