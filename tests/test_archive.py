"""wheelfile.archive in-process: what is refused before anything is unpacked, and how members are read."""

import stat
import zipfile

import pytest

from retfwheel.errors import InputFileError, UnsafeArchiveError, WheelFormatError
from retfwheel.wheelfile.archive import MemberView, iter_content, open_archive_file, read_archive, read_content


def zip_with(path, entries):
    """entries: (name, data, mode or None)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode is not None:
                info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize("name", ["../evil.py", "pkg/../../evil.py", "/etc/passwd", "C:/windows.py"])
def test_names_that_leave_the_install_folder_are_refused(tmp_path, name):
    with pytest.raises(UnsafeArchiveError, match="evil|passwd|windows"):
        read_archive(zip_with(tmp_path / "a.whl", [(name, b"x", None)]))


def test_links_and_duplicates_and_encryption_are_refused(tmp_path):
    with pytest.raises(UnsafeArchiveError, match="symbolic link"):
        read_archive(zip_with(tmp_path / "l.whl", [("link", b"target", stat.S_IFLNK | 0o777)]))
    with pytest.raises(UnsafeArchiveError, match="appears twice"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns about the duplicate it is asked to write
            read_archive(zip_with(tmp_path / "d.whl", [("a.py", b"1", None), ("a.py", b"2", None)]))
    path = zip_with(tmp_path / "e.whl", [("a.py", b"1", None)])
    data = bytearray(path.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    data[central + 8] |= 0x1  # the central directory's general-purpose flag: encrypted
    path.write_bytes(bytes(data))
    with pytest.raises(UnsafeArchiveError, match="encrypted"):
        read_archive(path)


def test_empty_truncated_and_missing_files(tmp_path):
    with pytest.raises(InputFileError, match="no such file"):
        read_archive(tmp_path / "none.whl")
    (tmp_path / "empty.whl").write_bytes(b"")
    with pytest.raises(WheelFormatError, match="empty"):
        read_archive(tmp_path / "empty.whl")
    whole = zip_with(tmp_path / "w.whl", [("a.py", b"x" * 5000, None)]).read_bytes()
    (tmp_path / "cut.whl").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(WheelFormatError, match="not a zip archive or truncated"):
        read_archive(tmp_path / "cut.whl")


def test_content_is_checked_against_its_crc(tmp_path):
    payload = bytes(range(256)) * 64
    path = zip_with(tmp_path / "c.whl", [("data.bin", payload, 0o100755)])
    archive = read_archive(path)
    (member,) = archive.members
    assert member.executable and read_content(archive, member) == payload
    data = bytearray(path.read_bytes())
    data[data.find(b"data.bin") + len("data.bin") + 5] ^= 0xFF  # a byte of the compressed stream
    path.write_bytes(bytes(data))
    with pytest.raises(WheelFormatError, match="corrupt"):
        with open_archive_file(archive) as fh:
            b"".join(iter_content(fh, archive, member))


def test_member_view_reads_and_seeks_without_inflating_the_rest():
    chunks = iter([b"abc", b"def", b"ghi"])
    seen = []
    view = MemberView(chunks, 9, sink=seen.append)
    assert view.read(2) == b"ab" and seen == [b"abc"]
    view.seek(4)
    assert view.read(2) == b"ef" and seen == [b"abc", b"def"]
    view.seek(0)
    assert view.read() == b"abcdefghi"
