"""Compile the retf op library against one installed TensorFlow (a developer build).

    python3 ops/build_dev.py --site /tmp/tf26/lib/python3.6/site-packages --out ops/retf/_retf_ops.so

Sources and flags come from ops/build.json. Everything is derived from the TensorFlow under
--site (headers, framework library, its version and C++ string ABI); that TensorFlow is never
imported, so any Python 3 can run this. Writes the library and, beside it, _build_info.json.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

OPS = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(OPS, "build.json")
FRAMEWORK = "libtensorflow_framework.so.2"
# A framework function returning std::string: its mangled name carries the [abi:cxx11] tag
# exactly when the library was built with _GLIBCXX_USE_CXX11_ABI=1.
ABI_PROBES = {
    b"_ZN10tensorflow14DataTypeStringB5cxx11ENS_8DataTypeE": 1,
    b"_ZN10tensorflow14DataTypeStringENS_8DataTypeE": 0,
}


class BuildError(Exception):
    """A build that cannot go on; the message says what and what to do."""


def read_config(path=CONFIG):
    """The sources and flag templates of ops/build.json."""
    with open(path) as stream:
        return json.load(stream)


def tensorflow_version(include_dir):
    """The version in the wheel's tensorflow/core/public/version.h, e.g. '2.6.2'."""
    header = os.path.join(include_dir, "tensorflow", "core", "public", "version.h")
    try:
        with open(header) as stream:
            text = stream.read()
    except OSError as exc:
        raise BuildError("cannot read {}: {}; is --site a site-packages with TensorFlow?".format(header, exc)) from exc
    fields = dict(re.findall(r"#define TF_(MAJOR_VERSION|MINOR_VERSION|PATCH_VERSION|VERSION_SUFFIX) (\S+)", text))
    try:
        return "{}.{}.{}{}".format(fields["MAJOR_VERSION"], fields["MINOR_VERSION"], fields["PATCH_VERSION"],
                                   fields.get("VERSION_SUFFIX", '""').strip('"'))
    except KeyError as exc:
        raise BuildError("{}: no TF_{} define".format(header, exc.args[0])) from exc


def cxx11_abi(framework_path):
    """0 or 1: the _GLIBCXX_USE_CXX11_ABI the framework library was compiled with."""
    with open(framework_path, "rb") as stream:
        data = stream.read()
    found = {abi for probe, abi in ABI_PROBES.items() if probe in data}
    if len(found) != 1:
        raise BuildError("cannot tell the C++ string ABI of {}; pass --cxx11-abi 0 or 1".format(framework_path))
    return found.pop()


def make_commands(config, site, out, cxx, abi, objects_dir):
    """The compile commands (one per source) and the link command."""
    tensorflow_dir = os.path.join(site, "tensorflow")
    values = {"include": os.path.join(tensorflow_dir, "include"), "framework_dir": tensorflow_dir, "abi": abi}
    compile_flags = [flag.format(**values) for flag in config["compile_flags"]]
    link_flags = [flag.format(**values) for flag in config["link_flags"]]
    compiles, objects = [], []
    for source in config["sources"]:
        target = os.path.join(objects_dir, os.path.basename(source) + ".o")
        compiles.append([cxx, *compile_flags, "-c", os.path.join(OPS, source), "-o", target])
        objects.append(target)
    link = [cxx, *compile_flags, *objects, "-o", out, *link_flags]
    return compiles, link


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if result.returncode != 0:
        raise BuildError("{} failed:\n{}".format(" ".join(command), result.stdout[-6000:]))


def build(site, out, cxx, abi=None, jobs=2, verbose=False):
    """Compile and link the library to out, then write the build-info file beside it."""
    framework = os.path.join(site, "tensorflow", FRAMEWORK)
    if not os.path.isfile(framework):
        raise BuildError("no {} under {}/tensorflow; is --site the site-packages of a TensorFlow 2 install?".format(
            FRAMEWORK, site))
    version = tensorflow_version(os.path.join(site, "tensorflow", "include"))
    if abi is None:
        abi = cxx11_abi(framework)
    config = read_config()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with tempfile.TemporaryDirectory() as objects_dir:
        partial = os.path.join(objects_dir, os.path.basename(out))
        compiles, link = make_commands(config, site, partial, cxx, abi, objects_dir)
        if verbose:
            for command in compiles + [link]:
                print(" ".join(command), file=sys.stderr)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(run, compiles))
        run(link)
        shutil.move(partial, out)
    info_path = os.path.join(os.path.dirname(os.path.abspath(out)), os.path.basename(config["build_info"]))
    with open(info_path, "w") as stream:
        json.dump({"tensorflow_version": version, "cxx11_abi": abi}, stream, indent=2, sort_keys=True)
        stream.write("\n")
    return version, abi


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", required=True, help="site-packages holding the target tensorflow/")
    parser.add_argument("--out", default=os.path.join(OPS, "retf", "_retf_ops.so"), help="library to write")
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"), help="C++ compiler (default $CXX or g++)")
    parser.add_argument("--cxx11-abi", type=int, choices=(0, 1), help="override the detected string ABI")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compiles")
    parser.add_argument("--verbose", action="store_true", help="print the commands")
    args = parser.parse_args()
    try:
        version, abi = build(os.path.abspath(args.site), args.out, args.cxx, args.cxx11_abi, args.jobs, args.verbose)
    except BuildError as exc:
        print("ERROR: {}".format(exc), file=sys.stderr)
        sys.exit(1)
    print("built {} for TensorFlow {} (_GLIBCXX_USE_CXX11_ABI={})".format(args.out, version, abi))


if __name__ == "__main__":
    main()
