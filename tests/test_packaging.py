"""The tool's own wheel ships every file the tool reads: each folder it reads is a listed package, and each of
their data files matches the package's package-data (a file left out works from a checkout and fails once
installed from the wheel)."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
# Read by people, not by the tool: they stay out of the tool's wheel.
UNSHIPPED = {"ops/README.md"}


def setuptools_table() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_folder(package: str, mapping: dict[str, str]) -> Path:
    for prefix in sorted(mapping, key=len, reverse=True):
        if package == prefix or package.startswith(prefix + "."):
            rest = package[len(prefix):].lstrip(".")
            return REPO / mapping[prefix] / Path(*rest.split(".")) if rest else REPO / mapping[prefix]
    raise AssertionError(f"{package}: no package-dir")


def left_out() -> list[str]:
    """Files under the folders the tool ships that its wheel would not hold."""
    table = setuptools_table()
    folders = {package_folder(p, table["package-dir"]): p for p in table["packages"]}
    data = table.get("package-data", {})
    roots = {REPO / folder for package, folder in table["package-dir"].items()}
    missing = []
    for root in sorted(roots):
        for path in sorted(root.rglob("*")):
            relative = str(path.relative_to(REPO))
            if path.is_dir() or "__pycache__" in path.parts or relative in UNSHIPPED:
                continue
            package = folders.get(path.parent)
            if package is None:
                missing.append(f"{relative} (its folder is not a listed package)")
            elif path.suffix != ".py" and not any(fnmatch.fnmatch(path.name, p) for p in data.get(package, ())):
                missing.append(f"{relative} (not in [tool.setuptools.package-data] {package})")
    return missing


def test_every_file_the_tool_reads_is_in_its_wheel():
    assert left_out() == []
