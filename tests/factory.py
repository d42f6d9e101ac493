"""Small real wheels for tests: RECORD computed from the bytes, with knobs to break them."""

from __future__ import annotations

import base64
import hashlib
import stat
import subprocess
import zipfile
from pathlib import Path

VERSION_H = b"""#define TF_MAJOR_VERSION 2
#define TF_MINOR_VERSION 6
#define TF_PATCH_VERSION 2
#define TF_VERSION_SUFFIX ""
"""


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    folder: Path,
    files: dict[str, bytes],
    *,
    name: str = "tensorflow_cpu",
    version: str = "2.6.2",
    tag: str = "cp36-cp36m-manylinux2010_x86_64",
    requires: tuple[str, ...] = ("numpy (~=1.19.2)", "six (~=1.15.0)"),
    executables: tuple[str, ...] = (),
    extra_dist_info: dict[str, bytes] | None = None,
    omit_from_record: tuple[str, ...] = (),
    tamper: dict[str, bytes] | None = None,
    filename: str | None = None,
) -> Path:
    """Write a wheel whose RECORD matches its bytes, then apply the requested damage."""
    dist_info = f"{name}-{version}.dist-info"
    metadata = (
        f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
        f"Summary: test wheel\n" + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\nA description.\n"
    ).encode()
    wheel_file = f"Wheel-Version: 1.0\nGenerator: factory\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    contents = dict(files)
    contents[f"{dist_info}/METADATA"] = metadata
    contents[f"{dist_info}/WHEEL"] = wheel_file
    for leaf, data in (extra_dist_info or {}).items():
        contents[f"{dist_info}/{leaf}"] = data
    rows = [f"{p},{record_hash(d)},{len(d)}" for p, d in contents.items() if p not in omit_from_record]
    rows.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    contents.update(tamper or {})
    path = Path(folder) / (filename or f"{name}-{version}-{tag}.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in contents.items():
            info = zipfile.ZipInfo(member, date_time=(2021, 11, 1, 12, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = ((0o755 if member in executables else 0o644) | stat.S_IFREG) << 16
            zf.writestr(info, data)
    return path


def tensorflow_files(framework: bytes, extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    files = {
        "tensorflow/__init__.py": b'"""TensorFlow."""\nfrom __future__ import absolute_import\n__version__ = "2.6.2"\n',
        "tensorflow/include/tensorflow/core/public/version.h": VERSION_H,
        "tensorflow/libtensorflow_framework.so.2": framework,
        "tensorflow/python/ops/array_ops.py": b"def identity(x):\n    return x\n",
    }
    files.update(extra or {})
    return files


def compile_library(folder: Path, name: str, source: str, *, cxx: bool = True, flags: tuple[str, ...] = ()) -> bytes:
    """Compile ``source`` into a shared library with this machine's compiler and return its bytes."""
    folder = Path(folder)
    src = folder / (name + (".cc" if cxx else ".c"))
    src.write_text(source)
    out = folder / name
    compiler = "g++" if cxx else "gcc"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", *flags, "-o", str(out), str(src)], check=True)
    return out.read_bytes()


# Old enough to load anywhere (GLIBC_2.2.5, GLIBCXX_3.4) while showing its std::string ABI.
FRAMEWORK_SOURCE = """
#include <cstdio>
#include <new>
#include <string>
namespace tensorflow {
int NameLength(const std::string& name) { return static_cast<int>(name.size()); }
void* Allocate(std::size_t n) { return ::operator new(n); }
void Say(const char* text) { std::puts(text); }
}
"""

TO_CHARS_SOURCE = """
#include <charconv>
extern "C" int format_double(char* first, char* last, double value) {
  return static_cast<int>(std::to_chars(first, last, value).ptr - first);
}
"""

NEW_GLIBC_SOURCE = """
#include <stdlib.h>
unsigned int draw(void) { return arc4random(); }
"""
