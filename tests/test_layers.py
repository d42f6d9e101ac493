"""The tool's packages import one way: each layer only from the layers below it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tools" / "retfwheel"

# Lowest first. A module may import from its own layer and any layer before it.
LAYERS = (
    ("errors", "process", "cache", "manylinux", "features", "tree"),  # shared by every layer
    ("wheelfile",),  # the wheel format: archives, RECORD, metadata, writing, the injected blocks
    ("targets",),  # recipes, interpreters, environments, locks, fetching
    ("native",),  # ELF files, manylinux policies and verdicts, inspecting a wheel
    ("stages",),  # planning and carrying out a build
    ("proof",),  # verify and its cluster
    ("cli", "__main__"),
)


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "retfwheel" or len(parts) == 1:
        return None
    for index, names in enumerate(LAYERS):
        if parts[1] in names:
            return index
    raise AssertionError(f"{module}: in no layer; add it to LAYERS in {Path(__file__).name}")


def upward_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("retfwheel", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        own = layer_of(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                theirs = layer_of(name)
                if own is not None and theirs is not None and theirs > own:
                    found.append(f"{module} imports {name} (line {node.lineno})")
    return found


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "retfwheel"
    (fake / "wheelfile").mkdir(parents=True)
    (fake / "wheelfile" / "writer.py").write_text("from retfwheel.stages.plan import BuildPlan\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert upward_imports() == ["retfwheel.wheelfile.writer imports retfwheel.stages.plan (line 1)"]
