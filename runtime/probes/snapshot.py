"""Distributions installed in this environment and the sha256 of each file they own (JSON on stdout).

Runs inside target environments (Python 3.6+, standard library only).
"""
import glob
import hashlib
import json
import os
import site
import sys


def _files(info_dir, base):
    record = os.path.join(info_dir, "RECORD")
    if os.path.exists(record):
        with open(record) as handle:
            for line in handle:
                path = line.rsplit(",", 2)[0].strip().strip('"')
                if path:
                    yield os.path.normpath(os.path.join(base, path))
        return
    listing = os.path.join(info_dir, "installed-files.txt")
    if os.path.exists(listing):
        with open(listing) as handle:
            for line in handle:
                if line.strip():
                    yield os.path.normpath(os.path.join(info_dir, line.strip()))


def _digest(path):
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def main():
    result = {}
    for base in site.getsitepackages():
        for info_dir in sorted(glob.glob(os.path.join(base, "*.dist-info")) + glob.glob(os.path.join(base, "*.egg-info"))):
            metadata = os.path.join(info_dir, "METADATA")
            if not os.path.exists(metadata):
                metadata = os.path.join(info_dir, "PKG-INFO")
            name = version = None
            with open(metadata, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.startswith("Name:") and name is None:
                        name = line.split(":", 1)[1].strip()
                    elif line.startswith("Version:") and version is None:
                        version = line.split(":", 1)[1].strip()
                    if not line.strip():
                        break
            files = {}
            for path in _files(info_dir, base):
                if path.endswith(".pyc") or "__pycache__" in path:
                    continue
                files[os.path.relpath(path, sys.prefix)] = _digest(path)
            result[(name or os.path.basename(info_dir)).lower().replace("_", "-")] = {"version": version, "files": files}
    json.dump(result, sys.stdout, sort_keys=True)


main()
