"""Every TensorFlow build users bring (slow; run in CI): each row is built with a shipped recipe and the lock
shipped for its input, verified in the recipe's old environment, and, for the first and the newest TensorFlow with
TSL's layout, its op library put through every op check (tests/ops/check_retf_ops.py, the checks in tests/ops/checks/).

| row | what it proves |
|---|---|
| tensorflow-cpu 2.11.0, Python 3.7, the 1.x API | TSL's header layout, C++17, the C++11 string ABI; numpy >= 1.20 against the environment's 1.18.5 (the TF 1.x programs of tests/test_tf1_programs.py run on this build too) |
| tensorflow-cpu 2.4.4, Python 3.6 | the oldest TF 2.x with ops: core headers, C++14 |
| intel-tensorflow 2.6.0, Python 3.6 | a framework library whose statically linked std code carries __cxx11 symbols |
| tensorflow-cpu 2.13.1, Python 3.8 | the newest TensorFlow with a cp38 wheel, in a plain venv (no TF 1.15 exists for 3.8): every dependency served privately, namespace packages (google of protobuf 4) included |

Two more are built and audited, not installed: tensorflow 2.6.2 (the GPU build, 458 MB: the same closure as
tensorflow-cpu 2.6.2, which every other test verifies) and tensorflow-cpu 2.12.0 (between 2.11 and 2.13). The op
checks run on 2.11 and 2.13. The rows build and verify two at a time.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (
    RECIPES,
    OpCheckRun,
    VerifiedBuilds,
    installed_environment,
    op_check_classes,
    run_cli,
    run_op_checks,
)

pytestmark = pytest.mark.slow

ROWS = [
    ("emulated-py37-tf1api", "tensorflow-cpu==2.11.0"),
    ("emulated-py38", "tensorflow-cpu==2.13.1"),
    ("emulated-py36", "tensorflow-cpu==2.4.4"),
    ("emulated-py36", "intel-tensorflow==2.6.0"),
]
BUILT_ONLY = [("emulated-py36", "tensorflow==2.6.2"), ("emulated-py38", "tensorflow-cpu==2.12.0")]
OP_CHECKED = ROWS[:2]


class Matrix:
    """The selected rows' builds and verifications (two at a time), and each op-checked row's op checks as soon as
    its verification is in: all started when the module's first test starts."""

    def __init__(self, builds: VerifiedBuilds, rows: list[tuple[str, str]]):
        self.builds = builds
        self.pool = ThreadPoolExecutor(max_workers=len(OP_CHECKED))
        builds.start(*rows)
        self.checks = {row: self.pool.submit(self._op_checks, row) for row in OP_CHECKED if row in rows}

    def _op_checks(self, row: tuple[str, str]) -> OpCheckRun:
        _, _, venv = self.builds(*row)
        return run_op_checks(str(venv / "bin" / "python"), CHECKED_HERE)

    def op_checks(self, recipe: str, requirement: str) -> OpCheckRun:
        return self.checks[(recipe, requirement)].result()


@pytest.fixture(scope="module", autouse=True)
def matrix(request, verified_builds):
    """Only the rows the selected tests need (all of them in CI)."""
    mine = [item for item in request.session.items if item.nodeid.startswith(request.node.nodeid + "::")]
    params = [item.callspec.params for item in mine if hasattr(item, "callspec")]
    rows = [row for row in ROWS if any((p.get("recipe"), p.get("requirement")) == row for p in params)]
    if any(item.name.startswith("test_numpy_imported_first") for item in mine):
        rows = list(dict.fromkeys([ROWS[0], *rows]))
    started = Matrix(verified_builds, rows)
    yield started
    started.pool.shutdown(wait=True)


@pytest.mark.parametrize("recipe, requirement", BUILT_ONLY)
def test_each_other_input_builds_with_its_op_library(recipe, requirement, tmp_path):
    import zipfile

    with zipfile.ZipFile(VerifiedBuilds.built(recipe, requirement, tmp_path)) as wheel:
        info = json.loads(wheel.read("retf/_build_info.json"))
        assert "retf/_retf_ops.so" in wheel.namelist()
    assert info["tensorflow_version"] == requirement.split("==")[1]


@pytest.mark.parametrize("recipe, requirement", ROWS)
def test_each_input_builds_and_verifies_in_its_old_environment(verified_builds, recipe, requirement):
    code, report, _ = verified_builds(recipe, requirement)
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert code == 0 and not failed, json.dumps(failed, indent=1)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["op library sparse update"]["status"] == "pass"
    assert checks["import tensorflow"]["detail"].startswith(f"tensorflow {requirement.split('==')[1]} ")


def test_numpy_imported_first_is_refused_with_both_versions_and_the_fixes(verified_builds, tmp_path):
    """tensorflow-cpu 2.11 needs numpy >= 1.20; a TF 1.15 program importing the environment's 1.18.5 first is told
    so and how to fix it, never "initialization failed"."""
    _, report, _ = verified_builds("emulated-py37-tf1api", "tensorflow-cpu==2.11.0")
    # the environment as TF 1.15.5 left it (emulated-py37-tf1api's upgrades numpy to 1.21.6 first)
    venv = installed_environment(RECIPES / "emulated-py37.toml", report["wheel"], tmp_path)
    run = run_cli("run", "--recipe", "emulated-py37", "--env", venv, "python", "-c", "import numpy; import tensorflow")
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()
    assert last[-2].startswith("ImportError: numpy 1.18.5 was already imported from ")
    assert "but this TensorFlow needs numpy >=1.20 (it ships numpy 1.21.6)" in last[-2]
    assert last[-1] == "Fix: import tensorflow before numpy, or install a version in the range into the environment " \
                       "(pip install 'numpy>=1.20')."
    assert "initialization failed" not in run.stderr


# DeepRec's API ships only with the Python 3.6 1.x API recipe (deeprec_api), whose TensorFlow 2.6 runs these checks
# in tests/ops/test_retf_ops.py; the newest TensorFlows run the checks of what every recipe with ops ships.
DEEPREC_ONLY = {"EmbeddingVariableTest", "StagedTest", "IncrementalCheckpointTest"}


CHECKED_HERE = [c for c in op_check_classes() if c not in DEEPREC_ONLY]


@pytest.mark.parametrize("check_class", CHECKED_HERE)
@pytest.mark.parametrize("recipe, requirement", OP_CHECKED)
def test_the_op_checks_pass_on_the_newest_tensorflows(matrix, recipe, requirement, check_class):
    failures = matrix.op_checks(recipe, requirement).failures(check_class)
    assert failures is None, failures
