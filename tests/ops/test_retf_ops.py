"""The retf op package, checked inside the interpreter it ships for (Python 3.6 + TensorFlow).

The checks live in checks/ (one module per op family) and run through check_retf_ops.py under
$RETF_OPS_PYTHON: a Python with TensorFlow, NumPy and a built retf package importable (installed from
a built wheel, or via PYTHONPATH). One pytest test per check class, so a failure names the area.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import OP_CHECKS, op_check_classes


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
            "ThreadingTest", "LoaderTest", "SparseApplyAdagradTest", "SparseApplyFtrlTest", "SparseApplyAdagradDecayTest",
            "SparseApplyAdamAsyncTest", "FusedV1OptimizersTest", "DeepRecOptimizersTest", "EmbeddingVariableTest", "StagedTest"} <= set(op_check_classes())
    assert len(set(op_check_classes())) == len(op_check_classes()), "the runner needs one class per name"


@pytest.mark.slow
@pytest.mark.parametrize("check_class", op_check_classes())
def test_retf_ops(ops_python, check_class):
    result = subprocess.run([ops_python, str(OP_CHECKS), "-v", check_class], capture_output=True, text=True,
                            timeout=1200)
    assert result.returncode == 0, f"{check_class} failed under {ops_python}:\n{result.stderr[-8000:]}"
