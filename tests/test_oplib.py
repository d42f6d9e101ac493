"""stages.oplib's flags, derived from the input wheel's own headers and framework library's symbols."""

import pytest

from factory import make_wheel, tensorflow_files
from retfwheel.errors import OpBuildError
from retfwheel.stages.oplib import OpFlags, derive_flags, string_abi
from retfwheel.wheelfile.wheel import read_wheel

CORE = "tensorflow/include/tensorflow/core/framework/allocator.h"
TSL = "tensorflow/include/tensorflow/tsl/framework/allocator.h"
VERSION_H = "tensorflow/include/tensorflow/core/public/version.h"
# TF 2.11-2.13: the core header only includes TSL's, which defines the constant.
TSL_LAYOUT = {CORE: b'#include "tensorflow/tsl/framework/allocator.h"\n',
              TSL: b"namespace tsl {\nconstexpr size_t kAllocatorAlignment = 128;\n}\n"}
CORE_LAYOUT = {CORE: b"namespace tensorflow {\nconstexpr size_t kAllocatorAlignment = 32;\n}\n"}


def archive_of(tmp_path, libs, headers):
    return read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi, headers))).archive


@pytest.mark.parametrize("version, headers, expected", [
    ("2.4.4", CORE_LAYOUT, OpFlags("c++14", 0, 32)),
    ("2.6.0", CORE_LAYOUT, OpFlags("c++14", 0, 32)),
    ("2.11.0", TSL_LAYOUT, OpFlags("c++17", 1, 128)),
    ("2.13.1", TSL_LAYOUT, OpFlags("c++17", 1, 128)),
])
def test_flags_follow_the_wheels_header_layout(tmp_path, libs, version, headers, expected):
    symbols = (0, 683) if expected.cxx11_abi == 0 else (1044, 0)
    assert derive_flags(archive_of(tmp_path, libs, headers), version, symbols) == expected


def test_a_wheel_without_headers_is_told_the_way_out(tmp_path, libs):
    with pytest.raises(OpBuildError, match="ships no C.. headers for the op library") as error:
        derive_flags(archive_of(tmp_path, libs, {}), "2.6.2", (0, 683))
    assert "[ops] build = false" in error.value.hint


def test_an_unknown_header_layout_is_named(tmp_path, libs):
    with pytest.raises(OpBuildError, match=f"no kAllocatorAlignment in {CORE}") as error:
        derive_flags(archive_of(tmp_path, libs, {CORE: b"// moved elsewhere\n"}), "2.15.0", (1, 0))
    assert "[ops] build = false" in error.value.hint


@pytest.mark.parametrize("symbols, expected", [((0, 683), 0), ((4, 683), 0), ((1044, 0), 1), ((1044, 3), 1)])
def test_the_majority_of_tensorflow_symbols_decides_the_string_abi(symbols, expected):
    assert string_abi(symbols, "x.whl") == expected


def test_a_tie_is_refused_with_both_counts():
    with pytest.raises(OpBuildError) as error:
        string_abi((7, 7), "x.whl")
    assert str(error.value) == ("x.whl: cannot tell which std::string ABI libtensorflow_framework uses: 7 of its "
                                "tensorflow:: symbols use the C++11 std::string and 7 the old one")
    assert "[ops] build = false" in error.value.hint


def test_a_wheel_without_a_framework_library_is_refused():
    with pytest.raises(OpBuildError, match="no libtensorflow_framework.so.2"):
        string_abi(None, "x.whl")
