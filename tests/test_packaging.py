"""The tool's own wheel ships every file the tool reads: each folder it reads is a listed package, and each of
their data files matches the package's package-data (a file left out works from a checkout and fails once
installed from the wheel)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
# Read by people, not by the tool: they stay out of the tool's wheel.
UNSHIPPED = {"runtime/ops/README.md"}


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
    shipped: set[Path] = set()
    for package, patterns in table.get("package-data", {}).items():
        folder = package_folder(package, table["package-dir"])
        shipped |= {path for pattern in patterns for path in folder.glob(pattern)}
    roots = {REPO / folder for folder in table["package-dir"].values()}
    missing = []
    for root in sorted(roots):
        for path in sorted(root.rglob("*")):
            relative = str(path.relative_to(REPO))
            if path.is_dir() or "__pycache__" in path.parts or relative in UNSHIPPED or path in shipped:
                continue
            if path.suffix == ".py" and path.parent in folders:
                continue  # a module of a listed package
            missing.append(relative)
    return missing


def test_every_file_the_tool_reads_is_in_its_wheel():
    assert left_out() == []
