import struct

import pytest

from factory import compile_library
from retfwheel.native.elf import majority_abi, parse_symbol_version, read_elf
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


# intel-tensorflow 2.6.0's shape: TensorFlow's own symbols use the old std::string, statically linked
# __gnu_cxx/std code carries more symbols of the C++11 one. Only the tensorflow:: ones count. The abi_tag
# mangles a name as the C++11 std::string's do (B5cxx11), whatever _GLIBCXX_USE_CXX11_ABI is.
MIXED_SOURCE = """
#include <string>
#define CXX11 __attribute__((abi_tag("cxx11")))
namespace tensorflow {
int NameLength(const std::string& name) { return static_cast<int>(name.size()); }
int PathLength(const std::string& path) { return static_cast<int>(path.size()) + 1; }
CXX11 int Cxx11Length(int n) { return n; }
}
namespace __gnu_cxx {
CXX11 int A(int n) { return n + 1; }
CXX11 int B(int n) { return n + 2; }
CXX11 int C(int n) { return n + 3; }
}
"""
PATH_LENGTH = "int PathLength(const std::string& path) { return static_cast<int>(path.size()) + 1; }"


def test_string_abi_is_the_majority_of_tensorflows_own_symbols(tmp_path):
    data = compile_library(tmp_path, "mixed.so", MIXED_SOURCE, flags=("-D_GLIBCXX_USE_CXX11_ABI=0",))
    info = read_elf("mixed.so", view(data), string_abi=True)
    assert info.string_abi_symbols == (1, 2)  # (C++11, old): the three __gnu_cxx:: ones are not counted
    assert info.cxx11_abi is False


def test_a_tie_decides_nothing(tmp_path):
    data = compile_library(tmp_path, "tie.so", MIXED_SOURCE.replace(PATH_LENGTH, ""), flags=("-D_GLIBCXX_USE_CXX11_ABI=0",))
    info = read_elf("tie.so", view(data), string_abi=True)
    assert info.string_abi_symbols == (1, 1) and info.cxx11_abi is None


def test_majority_abi():
    assert majority_abi(0, 683) is False and majority_abi(1044, 3) is True and majority_abi(5, 5) is None


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
