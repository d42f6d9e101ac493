"""The runtime tree: what of retfwheel runs outside the tool, read as data (runtime/ of the repository,
the package retfwheel.runtime once installed; never imported by the tool).

runtime/wheel/ is laid out as the produced wheel: a file ships at its own path below it. What ships
depends on what the build does, and is declared here once: the bootstrap's files with every
injected bootstrap, the 1.x API's with api = "v1", the retf package with the op library.
"""

from __future__ import annotations

import importlib.resources
from importlib.abc import Traversable

PACKAGE = "retfwheel.runtime"

# Paths under runtime/wheel/ (a folder ends with "/"), by the build step that ships them.
_BOOTSTRAP = "tensorflow/_retf/"
BOOTSTRAP_FILES = tuple(f"{_BOOTSTRAP}{name}" for name in ("__init__.py", "collector.py", "heap.py", "imports.py", "pages.py",
                                                           "routing.py", "runtime.py", "switches.py", "tf1_libraries.py",
                                                           "tf115_names.py", "versions.py"))
V1_API_FILES = tuple(f"{_BOOTSTRAP}{name}" for name in ("v1_api.py", "keras_bridge.py", "tf115_export.py",
                                                        "tf115_ops.json")) + ("tensorflow/contrib/",)
OPS_FILES = (f"{_BOOTSTRAP}ops.py", "retf/")


def root() -> Traversable:
    return importlib.resources.files(PACKAGE)


def wheel_files(paths: tuple[str, ...]) -> dict[str, bytes]:
    """{path in the wheel: bytes} of the files of runtime/wheel/ that ``paths`` name (a folder: every file in it)."""
    files: dict[str, bytes] = {}
    for path in paths:
        entry = root() / "wheel" / path.rstrip("/")
        if path.endswith("/"):
            _collect(entry, path.rstrip("/"), files)
        else:
            files[path] = entry.read_bytes()
    return files


def _collect(folder: Traversable, prefix: str, files: dict[str, bytes]) -> None:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            if entry.name != "__pycache__":
                _collect(entry, f"{prefix}/{entry.name}", files)
        elif not entry.name.endswith((".pyc", ".pyo")):
            files[f"{prefix}/{entry.name}"] = entry.read_bytes()


def ops_root() -> Traversable:
    """runtime/ops/: the op library's C++ sources and build.json (paths in it are relative to this folder)."""
    return root() / "ops"


def probe(name: str) -> str:
    """The path of a script of runtime/probes/, run by a target environment's interpreter."""
    return str(root() / "probes" / name)
