"""One interpreter, two worlds: the wheel's private dependencies next to the user's own, in the emulated
TF 1.15 environment under the old runtime (slow; run in CI). The environment has absl-py 1.4.0,
six 1.17.0, h5py 2.10.0, numpy 1.18.5, gast 0.2.2, wrapt 1.16.0, tensorboard 1.15.0 ... where the
input pins absl-py~=0.10, six~=1.15.0, h5py~=3.1.0, numpy~=1.19.2, gast==0.4.0, wrapt~=1.12.1,
tensorboard~=2.6 and keras~=2.6 (gast, wrapt, keras and tensorboard TensorFlow's own under private names:
[deps] private_names)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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
    assert "43 of 45 modules work and train a step" in before, before
    assert "1 refused with the range and the fix (tensorflow_estimator)" in before
    assert after.split("private: ")[1] == "tensorflow-estimator 2.6.0 (environment 1.15.1, needs <2.7,>=2.6.0)", after
    for name in ("gast", "wrapt", "tensorboard 2"):  # the environment's own; TensorFlow's under private names
        assert name not in after, after


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
report = {name: {"module": getattr(module, "__version__", None),
                 "private": "tensorflow.deps" in module.__file__ or "tensorflow/_vendor" in module.__file__,
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
report["tensorflow_wrapt"] = sys.modules["tensorflow._vendor.wrapt"].__version__
report["tensorflow_gast"] = sys.modules["tensorflow._vendor.gast"].__file__
report["tensorflow_tensorboard"] = sys.modules["tensorflow._vendor.tensorboard"].version.VERSION
print(json.dumps(report))
"""


def test_metadata_answers_with_what_was_imported(v1_venv):
    report = run_in(v1_venv, "python", "-c", METADATA)
    expected = {"gast": ("0.2.2", False), "h5py": ("2.10.0", False), "six": ("1.17.0", False),
                "tensorboard": ("1.15.0", False), "wrapt": ("1.16.0", False)}
    for name, (version, private) in expected.items():
        entry = report[name]
        assert entry["private"] is private, (name, entry)
        assert entry["importlib_metadata"] == entry["pkg_resources"] == version, (name, entry)
        assert entry["module"] in (None, version), (name, entry)
    # why TensorFlow keeps its own wrapt: from wrapt 1.15 on, TF 2.6's tracked dicts raise TypeError here
    assert report["tracked_dict"] == "AttributeError" and report["deps_on_sys_path"] is False
    assert report["tensorflow_wrapt"] == "1.12.1" and report["tensorflow_gast"].endswith("tensorflow/_vendor/gast/__init__.py")
    assert report["tensorflow_tensorboard"] == "2.6.0"


def test_a_module_outside_the_range_imported_first_is_refused_with_the_fix(v1_venv):
    """tensorflow_estimator 1.15 is TF 1.15's own half: it imports TF 1.15 internals that 2.6 moved, so it cannot run
    beside this TensorFlow under any name; imported first, it is refused with the fix."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(RECIPE), "--env", str(v1_venv),
                             "python", "-c", "import tensorflow_estimator"], PROGRAM_TIMEOUT, env=env)
    assert result.returncode != 0
    assert "tensorflow_estimator 1.15.1 was already imported from" in result.stderr
    assert "but this TensorFlow needs tensorflow-estimator <2.7,>=2.6.0" in result.stderr
    assert "Fix: import tensorflow before tensorflow_estimator, or install a version in the range" in result.stderr


TENSORBOARD_BESIDE_TENSORFLOW = """
import json, os, sys
tensorboard_first = sys.argv[2] == "tensorboard-first"
if tensorboard_first:
    import tensorboard
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.backend.event_processing import event_accumulator
import tensorflow as tf
if not tensorboard_first:
    import tensorboard
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.backend.event_processing import event_accumulator
from google.protobuf.internal import api_implementation

loss = tf.compat.v1.placeholder(tf.float32, [])
summary = tf.compat.v1.summary.scalar("loss", loss)
with tf.compat.v1.Session() as session, tf.compat.v1.summary.FileWriter(sys.argv[1]) as writer:
    for step, value in enumerate([0.5, 0.25, 0.125]):
        writer.add_summary(session.run(summary, {loss: value}), step)
events = event_accumulator.EventAccumulator(sys.argv[1])  # the user's TensorBoard 1.15 reads what TensorFlow wrote
events.Reload()
ours = sys.modules["tensorflow._vendor.tensorboard.compat.proto.summary_pb2"]
print(json.dumps({"tensorboard": tensorboard.__file__, "version": tensorboard.version.VERSION,
                  "protobuf": api_implementation.Type(),
                  "names": [summary_pb2.Summary.DESCRIPTOR.full_name, ours.Summary.DESCRIPTOR.full_name],
                  "files": [summary_pb2.DESCRIPTOR.name, ours.DESCRIPTOR.name],
                  "scalars": [e.value for e in events.Scalars("loss")]}))
"""


@pytest.mark.parametrize("order", ["tensorboard-first", "tensorflow-first"])
def test_the_users_tensorboard_loads_its_protos_beside_tensorflows_and_reads_its_events(v1_venv, tmp_path, order):
    program = tmp_path / "tensorboard_beside.py"
    program.write_text(TENSORBOARD_BESIDE_TENSORFLOW)
    report = run_in(v1_venv, "python", str(program), str(tmp_path / "logs"), order)
    assert "tensorflow" not in report["tensorboard"] and report["version"] == "1.15.0"
    assert report["protobuf"] == "cpp"  # the implementation that refuses a second file or symbol of one name
    assert report["names"] == ["tensorboard.Summary", "tensorflow._vendor.tensorboard.Summary"]
    assert report["files"] == ["tensorboard/compat/proto/summary.proto",
                               "tensorflow/_vendor/tensorboard/compat/proto/summary.proto"]
    assert report["scalars"] == [0.5, 0.25, 0.125]


AUTOGRAPH_AFTER_THE_USERS_GAST = """
import json
import gast, wrapt
import tensorflow as tf

def step(x):
    if x > 2:
        x = x * 10
    else:
        x = x - 1
    return x

values = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(5).map(step)).get_next()
converted = tf.function(step)(tf.constant(3))
with tf.compat.v1.Session() as session:
    mapped = [int(session.run(values)) for _ in range(5)]
    print(json.dumps({"gast": gast.__file__, "wrapt": wrapt.__version__, "mapped": mapped,
                      "converted": int(session.run(converted))}))
"""


def test_the_users_wrapt_and_gast_imported_first_stay_theirs_and_autograph_converts(v1_venv, tmp_path):
    program = tmp_path / "autograph_after_gast.py"  # a file: AutoGraph reads the functions' source
    program.write_text(AUTOGRAPH_AFTER_THE_USERS_GAST)
    report = run_in(v1_venv, "python", str(program))
    assert "tensorflow" not in report["gast"] and report["wrapt"] == "1.16.0"
    assert report["mapped"] == [-1, 0, 1, 30, 40] and report["converted"] == 30


STANDALONE_KERAS = """
import json, sys
if sys.argv[1] == "libraries-first":
    import deprecated, keras  # Deprecated imports wrapt as it starts
    import tensorflow as tf
else:
    import tensorflow as tf
    import deprecated, keras
import numpy as np
import wrapt

@deprecated.deprecated(reason="use g")
def f(x):
    return x + 1

model = keras.models.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                                 keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05), loss="binary_crossentropy")
x = np.random.RandomState(0).rand(512, 4).astype("float32")
y = (x.sum(axis=1) > 2).astype("float32")
history = model.fit(x, y, epochs=20, batch_size=64, verbose=0)
print(json.dumps({"keras": [keras.__version__, keras.__file__], "wrapt": [wrapt.__version__, wrapt.__file__],
                  "tf_keras": tf.keras.__name__, "deprecated": f(1), "loss": history.history["loss"]}))
"""


@pytest.fixture(scope="module")
def user_libraries(v1_venv, tmp_path_factory):
    """Standalone Keras 2.3.1 (TF 1.15's era) and Deprecated (which imports wrapt as it starts), installed with the
    environment's pip into a folder of their own on PYTHONPATH, so the shared environment stays as verify saw it."""
    folder = tmp_path_factory.mktemp("user-libraries")
    result = run_bounded([v1_venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
                          "--no-deps", "--target", folder, "keras==2.3.1", "pyyaml==5.4.1", "Deprecated==1.2.14"],
                         PROGRAM_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.mark.parametrize("order", ["libraries-first", "tensorflow-first"])
def test_standalone_keras_and_a_library_importing_wrapt_stay_the_users_in_either_order(v1_venv, user_libraries,
                                                                                      tmp_path, order):
    program = tmp_path / "standalone_keras.py"
    program.write_text(STANDALONE_KERAS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    env["PYTHONPATH"] = str(user_libraries)
    result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(RECIPE), "--env", str(v1_venv),
                          "python", str(program), order], PROGRAM_TIMEOUT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["keras"] == ["2.3.1", str(user_libraries / "keras" / "__init__.py")]
    assert report["wrapt"][0] == "1.16.0" and "tensorflow" not in report["wrapt"][1]
    assert report["tf_keras"] == "tensorflow._vendor.keras.api._v1.keras" and report["deprecated"] == 2
    assert report["loss"][-1] < report["loss"][0] / 2, report["loss"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


WRITE_EVENTS = """
import sys
import tensorflow as tf
loss = tf.placeholder(tf.float32, [])
summary = tf.summary.scalar("loss", loss)
with tf.Session() as session, tf.summary.FileWriter(sys.argv[1]) as writer:
    for step, value in enumerate([0.5, 0.25, 0.125]):
        writer.add_summary(session.run(summary, {loss: value}), step)
"""


def _served_scalars(command: list, logdir: Path, env: dict) -> tuple[list, str]:
    """Start a TensorBoard ``command`` on a free port, read the scalars of the run in ``logdir`` and stop it."""
    port = _free_port()
    server = subprocess.Popen([*command, "--logdir", str(logdir), "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=.&tag=loss"
    try:
        deadline, scalars = time.monotonic() + 120, []
        while len(scalars) < 3 and time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    scalars = json.loads(answer.read())
            except (OSError, ValueError):
                pass
            time.sleep(1)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        _, stderr = server.communicate()
    return [value for _, _, value in scalars], stderr


def test_the_environments_tensorboard_and_the_wheels_retf_tensorboard_serve_the_wheels_events(v1_venv, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    run = [sys.executable, "-m", "retfwheel", "run", "--recipe", str(RECIPE), "--env", str(v1_venv)]
    program = tmp_path / "write_events.py"
    program.write_text(WRITE_EVENTS)
    written = run_bounded([*run, "python", str(program), str(tmp_path / "logs")], PROGRAM_TIMEOUT, env=env)
    assert written.returncode == 0, written.stderr[-3000:]
    version = run_bounded([*run, str(v1_venv / "bin" / "tensorboard"), "--version_tb"], PROGRAM_TIMEOUT, env=env)
    assert version.stdout.strip().splitlines()[-1] == "1.15.0", version.stderr[-2000:]
    for command, says in (("tensorboard", "TensorBoard 1.15.0"), ("retf-tensorboard", "TensorBoard 2.6.0")):
        scalars, stderr = _served_scalars([*run, str(v1_venv / "bin" / command)], tmp_path / "logs", env)
        assert scalars == [0.5, 0.25, 0.125], (command, stderr[-3000:])
        assert says in stderr, (command, stderr[-3000:])
