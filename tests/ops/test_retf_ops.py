"""The retf op package, checked inside the interpreter it ships for (Python 3.6 + TensorFlow).

The checks live in checks/ (one module per op family) and run through check_retf_ops.py under
$RETF_OPS_PYTHON: a Python with TensorFlow, NumPy and a built retf package importable (installed from
a built wheel, or via PYTHONPATH). The classes run in one process; one pytest test per check class, so a failure
names the area.
"""

from __future__ import annotations

import os

import pytest

from conftest import OpCheckRun, op_check_classes, run_op_checks


@pytest.fixture(scope="module")
def ops_python(request) -> str:
    """$RETF_OPS_PYTHON if set, else the kept environment holding the built wheel (the real TF 2.6.2)."""
    python = os.environ.get("RETF_OPS_PYTHON")
    if python:
        return python
    code, report, venv = request.getfixturevalue("verified")
    if code != 0:
        pytest.fail(f"the built wheel did not verify, so its op library cannot be checked: {report}")
    return str(venv / "bin" / "python")


def test_every_check_class_is_collected():
    assert {"SparseApplyAdamTest", "EmbeddingLookupSparseTest", "V1OptimizerTest", "KerasOptimizerTest",
            "SafeEmbeddingLookupSparseTest", "ThreadingTest", "LoaderTest", "SparseApplyAdagradTest", "SparseApplyFtrlTest", "SparseApplyAdagradDecayTest",
            "SparseApplyAdamAsyncTest", "FusedV1OptimizersTest", "DeepRecOptimizersTest", "EmbeddingVariableTest", "StagedTest",
            "IncrementalCheckpointTest"} <= set(op_check_classes())
    assert len(set(op_check_classes())) == len(op_check_classes()), "the runner needs one class per name"


@pytest.fixture(scope="module")
def op_checks(ops_python) -> OpCheckRun:
    return run_op_checks(ops_python, op_check_classes())


@pytest.mark.slow
@pytest.mark.parametrize("check_class", op_check_classes())
def test_retf_ops(op_checks, check_class):
    failures = op_checks.failures(check_class)
    assert failures is None, failures
