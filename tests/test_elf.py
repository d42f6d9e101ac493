import struct

import pytest

from retfwheel.native.elf import parse_symbol_version, read_elf
from retfwheel.wheelfile.archive import MemberView


def view(data: bytes, chunk: int = 4096) -> MemberView:
    return MemberView(iter([data[i : i + chunk] for i in range(0, len(data), chunk)]), len(data))


def test_reads_needed_rpath_and_versions(libs):
    info = read_elf("fw0.so", view(libs.framework_old_abi))
    assert "libstdc++.so.6" in info.needed and "libc.so.6" in info.needed
    assert info.rpath == ("$ORIGIN/",) or info.runpath == ("$ORIGIN/",)
    assert info.machine == "EM_X86_64" and info.elf_class == 64
    assert info.newest("GLIBC") is not None


def test_symbol_versions_decide_newest(libs):
    assert read_elf("tc.so", view(libs.to_chars)).newest("GLIBCXX") >= (3, 4, 29)
    assert read_elf("ng.so", view(libs.new_glibc)).newest("GLIBC") >= (2, 36)


@pytest.mark.parametrize("which, expected", [("framework_old_abi", False), ("framework_new_abi", True)])
def test_string_abi_is_derived_from_the_library(libs, which, expected):
    assert read_elf("fw.so", view(getattr(libs, which)), string_abi=True).cxx11_abi is expected


def test_result_does_not_depend_on_chunking(libs):
    assert read_elf("a", view(libs.to_chars)) == read_elf("a", view(libs.to_chars, chunk=7))


def test_the_section_table_at_the_end_is_never_read(libs):
    data = libs.framework_old_abi
    section_table = struct.unpack_from("<Q", data, 0x28)[0]
    stream = view(data, chunk=256)
    read_elf("fw.so", stream)
    assert len(stream._buffer) < section_table


def test_not_elf_is_refused():
    with pytest.raises(ValueError, match="not an ELF file"):
        read_elf("x", view(b"#!/bin/sh\n" * 10))


def test_parse_symbol_version():
    assert parse_symbol_version("GLIBCXX_3.4.29") == ("GLIBCXX", (3, 4, 29))
    assert parse_symbol_version("GLIBC_PRIVATE") is None
    assert parse_symbol_version("CXXABI_TM_1") is None
