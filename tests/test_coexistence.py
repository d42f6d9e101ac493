"""One interpreter, two worlds: the wheel's private dependencies next to the user's own, in the emulated
TF 1.15 environment under the old runtime (slow; run in CI). The environment has absl-py 1.4.0,
six 1.17.0, h5py 2.10.0, numpy 1.18.5, gast 0.2.2, wrapt 1.16.0, tensorboard 1.15.0 ... where the
input pins absl-py~=0.10, six~=1.15.0, h5py~=3.1.0, numpy~=1.19.2, gast==0.4.0, wrapt~=1.12.1."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import PROGRAM_TIMEOUT, RECIPES, run_bounded

pytestmark = pytest.mark.slow

PROGRAMS = Path(__file__).resolve().parent / "programs"
RECIPE = RECIPES / "emulated-py36-tf1api.toml"


def run_in(venv: Path, *command: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(RECIPE), "--env", str(venv),
                             *command], PROGRAM_TIMEOUT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_verify_counts_the_import_orders(v1_venv):
    rows = [re.match(r"^  (pass|FAIL|n/a)  (.+?)\s{2,}", line) for line in (v1_venv.parent.parent / "verify.txt").read_text().splitlines()]
    lines = {row.group(2): row.string for row in rows if row}
    before, after = lines["imported before tensorflow"], lines["imported after tensorflow"]
    assert before.startswith("  pass") and after.startswith("  pass"), (before, after)
    assert "refused with the range and the fix (gast, tensorboard, tensorflow_estimator, wrapt)" in before
    assert "private: gast 0.4.0 (environment 0.2.2, needs ==0.4.0)" in after


def test_a_script_that_imports_absl_and_six_first_trains(v1_venv):
    report = run_in(v1_venv, "python", str(PROGRAMS / "absl_first.py"), "--steps", "30")
    assert "tensorflow.deps" not in report["absl"] and "tensorflow.deps" not in report["six"]
    assert report["six_version"] == "1.17.0"
    assert report["losses"][-1] < report["losses"][0] / 2


def test_code_for_h5py_2_gets_the_environments_h5py_after_import_tensorflow(v1_venv, tmp_path):
    report = run_in(v1_venv, "python", str(PROGRAMS / "h5py_after_tf.py"), str(tmp_path))
    assert report["h5py"] == "2.10.0" and "tensorflow.deps" not in report["file"]
    assert report["names"] == ["first", "second"] and report["total"] == 15.0 and report["model_round_trip"]


METADATA = """
import json, sys
import tensorflow as tf
import gast, h5py, six, tensorboard, wrapt
import importlib_metadata, pkg_resources
modules = {"gast": gast, "h5py": h5py, "six": six, "tensorboard": tensorboard, "wrapt": wrapt}
report = {name: {"module": getattr(module, "__version__", None), "private": "tensorflow.deps" in module.__file__,
                 "importlib_metadata": importlib_metadata.version(name),
                 "pkg_resources": pkg_resources.get_distribution(name).version} for name, module in modules.items()}
tracked = tf.Module()
tracked.d = {"a": 1}
try:
    tracked.d.__dict__
except AttributeError:
    report["tracked_dict"] = "AttributeError"
except TypeError as error:
    report["tracked_dict"] = "TypeError: %s" % error
report["deps_on_sys_path"] = any("tensorflow.deps" in entry for entry in sys.path)
print(json.dumps(report))
"""


def test_metadata_answers_with_what_was_imported(v1_venv):
    report = run_in(v1_venv, "python", "-c", METADATA)
    expected = {"gast": ("0.4.0", True), "h5py": ("2.10.0", False), "six": ("1.17.0", False),
                "tensorboard": ("2.6.0", True), "wrapt": ("1.12.1", True)}
    for name, (version, private) in expected.items():
        entry = report[name]
        assert entry["private"] is private, (name, entry)
        assert entry["importlib_metadata"] == entry["pkg_resources"] == version, (name, entry)
        assert entry["module"] in (None, version), (name, entry)
    # why wrapt stays private: from wrapt 1.15 on, TF 2.6's tracked dicts raise TypeError here
    assert report["tracked_dict"] == "AttributeError" and report["deps_on_sys_path"] is False


def test_a_module_outside_the_range_imported_first_is_refused_with_the_fix(v1_venv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(RECIPE), "--env", str(v1_venv),
                             "python", "-c", "import wrapt; import tensorflow"], PROGRAM_TIMEOUT, env=env)
    assert result.returncode != 0
    assert "wrapt 1.16.0 was already imported from" in result.stderr
    assert "but this TensorFlow needs wrapt <1.15,>=1.11.0 (it ships wrapt 1.12.1)" in result.stderr
    assert "Fix: import tensorflow before wrapt, or install a version in the range" in result.stderr
