"""Compile the retf op library against one installed TensorFlow (a developer build).

    python runtime/ops/build_dev.py --site /tmp/tf26/lib/python3.6/site-packages --out /tmp/retf_build/retf/_retf_ops.so

Everything is derived from the TensorFlow under --site (headers, framework library, its version, C++
string ABI, C++ standard and allocator alignment) by the same code the shipped build uses
(retfwheel.stages.oplib and retfwheel.native.elf), and the command comes from runtime/ops/build.json as there.
That TensorFlow is never imported. Run it with the tool's Python (`.venv/bin/python` after
`make setup`). Writes the library and, beside it, _build_info.json.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from retfwheel.errors import RetfError
from retfwheel.native.elf import read_elf
from retfwheel.stages.oplib import (
    ALLOCATOR_HEADERS,
    build_info,
    compile_plan,
    flags_for,
    op_sources,
    run_plan,
    string_abi,
)
from retfwheel.wheelfile.archive import MemberView

OPS = Path(__file__).resolve().parent
FRAMEWORK = "libtensorflow_framework.so.2"


class BuildError(Exception):
    """A build that cannot go on; the message says what and what to do."""


def tensorflow_version(include_dir: Path) -> str:
    """The version in tensorflow/core/public/version.h, e.g. '2.6.2'."""
    header = include_dir / "tensorflow" / "core" / "public" / "version.h"
    try:
        text = header.read_text()
    except OSError as exc:
        raise BuildError(f"cannot read {header}: {exc}; is --site a site-packages with TensorFlow?") from exc
    fields = dict(re.findall(r"#define TF_(MAJOR_VERSION|MINOR_VERSION|PATCH_VERSION|VERSION_SUFFIX) (\S+)", text))
    try:
        return "{}.{}.{}{}".format(fields["MAJOR_VERSION"], fields["MINOR_VERSION"], fields["PATCH_VERSION"],
                                   fields.get("VERSION_SUFFIX", '""').strip('"'))
    except KeyError as exc:
        raise BuildError(f"{header}: no TF_{exc.args[0]} define") from exc


def string_abi_symbols(framework: Path) -> tuple[int, int] | None:
    """The framework library's (cxx11, old) tensorflow:: symbol counts, as the shipped build reads them."""
    data = framework.read_bytes()
    return read_elf(framework.name, MemberView(iter([data]), len(data)), string_abi=True).string_abi_symbols


def build(site: Path, out: Path, cxx: str, abi: int | None = None, verbose: bool = False):
    """Compile and link the library to ``out``, then write the build-info file beside it."""
    tensorflow = site / "tensorflow"
    framework = tensorflow / FRAMEWORK
    if not framework.is_file():
        raise BuildError(f"no {FRAMEWORK} under {tensorflow}; is --site the site-packages of a TensorFlow 2 install?")
    version = tensorflow_version(tensorflow / "include")
    headers = {name: (site / name).read_bytes() for name in ALLOCATOR_HEADERS if (site / name).is_file()}
    try:
        flags = flags_for(version, string_abi(string_abi_symbols(framework), str(site)) if abi is None else abi,
                          headers, str(site))
    except RetfError as exc:
        raise BuildError(f"{exc}; pass --cxx11-abi 0 or 1 if the ABI is the problem") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="retf-objects-") as objects:
        plan = compile_plan(op_sources(), flags, cxx, include=tensorflow / "include", framework=tensorflow,
                            output=str(out.resolve()), objects=objects)

        def run(command: tuple[str, ...]) -> subprocess.CompletedProcess:
            if verbose:
                print(" ".join(command), file=sys.stderr)
            return subprocess.run(command, cwd=OPS, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        result = run_plan(plan, run)
    if result.returncode != 0:
        raise BuildError(f"{' '.join(result.args)} failed:\n{result.stdout[-6000:]}")
    (out.parent / "_build_info.json").write_bytes(build_info(version, f"{cxx} (developer build)", flags))
    return version, flags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", required=True, type=Path, help="site-packages holding the target tensorflow/")
    parser.add_argument("--out", default=OPS / "retf" / "_retf_ops.so", type=Path, help="library to write")
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"), help="C++ compiler (default $CXX or g++)")
    parser.add_argument("--cxx11-abi", type=int, choices=(0, 1), help="override the detected string ABI")
    parser.add_argument("--verbose", action="store_true", help="print the command")
    args = parser.parse_args()
    try:
        version, flags = build(args.site.resolve(), args.out, args.cxx, args.cxx11_abi, args.verbose)
    except BuildError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"built {args.out} for TensorFlow {version} (-std={flags.std}, _GLIBCXX_USE_CXX11_ABI={flags.cxx11_abi}, "
          f"EIGEN_MAX_ALIGN_BYTES={flags.eigen_align})")


if __name__ == "__main__":
    main()
