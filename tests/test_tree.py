"""runtime/wheel/ is laid out as the produced wheel: each file ships at its own path, with one build step."""

from __future__ import annotations

from pathlib import Path

from retfwheel.tree import BOOTSTRAP_FILES, OPS_FILES, V1_API_FILES, wheel_files

WHEEL = Path(__file__).resolve().parent.parent / "runtime" / "wheel"
STEPS = {"bootstrap": BOOTSTRAP_FILES, "1.x API": V1_API_FILES, "op library": OPS_FILES}


def tree_files() -> set[str]:
    return {str(p.relative_to(WHEEL)) for p in WHEEL.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_every_file_ships_with_exactly_one_step():
    owners = {path: [step for step, paths in STEPS.items() if path in wheel_files(paths)] for path in tree_files()}
    assert {path: steps for path, steps in owners.items() if len(steps) != 1} == {}


def test_a_file_ships_at_its_own_path_with_its_bytes():
    for paths in STEPS.values():
        for path, data in wheel_files(paths).items():
            assert (WHEEL / path).read_bytes() == data, path
