"""A user's first minute, as users run it (slow; run in CI): the wheel installed into the emulated TF 1.15.5
environment with the user's own pip, never upgraded first; `import pandas` (or another module whose C++ extension
maps the system libstdc++) before `import tensorflow`, then a training step; and a `pip install` killed half-way,
then repaired the way a user would.

| pip | who has it |
|---|---|
| 9.0.1 | Ubuntu 18.04's python3-pip |
| 18.1 | a new Python 3.6 venv |
| 19.0.3 | the oldest that installs TF 1.15.5 (manylinux2010) from PyPI: the recipes' `[environment] pip` |
| 20.0.2 | current while TF 1.15 was |
| 21.3.1 | the last for Python 3.6 |

pip 19.0.3 installs both wheels in every `verify` (and so in tests/test_real_tensorflow.py and test_tf1_api.py);
here the others install the 1.x-API wheel (the 2.x-API wheel's files are laid out the same), each into its own copy
of the environment.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROGRAM_TIMEOUT, RECIPES, run_bounded, run_cli

pytestmark = pytest.mark.slow

PROBE = Path(__file__).resolve().parent.parent / "runtime" / "probes" / "import_first.py"
V1 = RECIPES / "emulated-py36-tf1api.toml"
INSTALL_TIMEOUT = 900


def environment(recipe: Path, folder: Path, pip: str | None = None) -> Path:
    """A fresh copy of ``recipe``'s cached environment (made on first use), with ``pip`` installed as the user had it."""
    from retfwheel.targets.environment import prepare_environment
    from retfwheel.targets.fetch import cache_root
    from retfwheel.targets.recipe import load_recipe

    venv = prepare_environment(load_recipe(recipe), cache_root(), None, lambda message: None).copy_to(folder).python
    if pip is not None:
        python(venv, "-m", "pip", "install", "-q", f"pip=={pip}")
    return venv


def python(venv: Path, *arguments: str, timeout: float = INSTALL_TIMEOUT) -> subprocess.CompletedProcess:
    """The environment's Python, run from the environment's folder as a user's would be (a source checkout's
    *.egg-info in the working folder would join what pip sees)."""
    result = run_bounded([venv, *arguments], timeout, cwd=venv.parents[2])
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result


def pip_version(venv: Path) -> str:
    return python(venv, "-m", "pip", "--version").stdout.split()[1]


def first_import_then_train(recipe: Path, venv: Path, module: str, warnings: int = 0) -> dict:
    """The probe under the old runtime: ``module`` imported, then tensorflow, then a training step (``warnings``:
    how many times stderr may say the op library was left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(recipe), "--env", str(venv.parent.parent),
                          "python", str(PROBE), module], PROGRAM_TIMEOUT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("left out its retf op library") == warnings, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def site_packages(venv: Path) -> Path:
    return next(venv.parent.parent.glob("lib/python3.*/site-packages"))


# The 1.x-API wheel (the 2.x-API wheel's layout is the same, and every `verify` installs it with pip 19.0.3); pip
# 19.3.1 installs as 19.0.3 and 20.0.2 do.
PIPS = ["9.0.1", "18.1", "20.0.2", "21.3.1"]


@pytest.fixture(scope="module")
def pip_installs(request, v1_wheel, tmp_path_factory):
    """pip -> (the venv, its `pip install WHEEL`'s output): each selected pip's environment made and the wheel
    installed by it, two at a time (pip runs on one core), all begun when the first test asks."""
    from concurrent.futures import ThreadPoolExecutor

    selected = {item.callspec.params.get("pip") for item in request.session.items
                if item.originalname == "test_the_users_pip_installs_the_wheel_and_pandas_first_trains"}

    def install(pip: str, folder: Path) -> tuple[Path, subprocess.CompletedProcess]:
        venv = environment(V1, folder, pip)
        assert pip_version(venv) == pip
        return venv, python(venv, "-m", "pip", "install", str(v1_wheel))  # the user's own command, nothing more

    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {pip: pool.submit(install, pip, tmp_path_factory.mktemp(f"pip-{pip}")) for pip in PIPS if pip in selected}


@pytest.mark.parametrize("pip", PIPS)
def test_the_users_pip_installs_the_wheel_and_pandas_first_trains(v1_wheel, pip_installs, pip):
    recipe, wheel = V1, v1_wheel
    venv, install = pip_installs[pip].result()
    assert "Successfully installed tensorflow-2.6.2" in install.stdout, install.stdout[-2000:]
    site = site_packages(venv)
    assert [p.name for p in site.glob("tensorflow-*.dist-info")] == [wheel.name.split("-cp36")[0] + ".dist-info"]
    report = first_import_then_train(recipe, venv, "pandas")
    assert report["mapped_before"] and not report["ops_left_out"], report
    assert report["loss"][1] < report["loss"][0], report
    python(venv, "-m", "pip", "check")


@pytest.mark.parametrize("module", ["scipy.sparse", "sklearn.linear_model", "matplotlib.pyplot"])
def test_data_libraries_imported_first_leave_the_op_library_in(v1_venv, module):
    """Their C++ extensions map the system's libstdc++ 6.0.28; the wheel's op library needs no newer one."""
    report = first_import_then_train(V1, v1_venv / "bin" / "python", module)
    assert len(report["mapped_before"]) == 1 and "/libstdc++.so.6" in report["mapped_before"][0], report
    assert report["ops_left_out"] is None and report["loss"][1] < report["loss"][0], report


def test_an_op_library_that_needs_a_newer_runtime_is_left_out_not_refused(real_wheel, tmp_path):
    """The 1.x-API recipe with its op library built by this machine's g++ 12 (GLIBCXX_3.4.30, newer than the target's
    3.4.28): after `import pandas` mapped the system's libstdc++, tensorflow imports without it, says so once with the
    LD_PRELOAD fix, and trains on TensorFlow's own optimizers; imported first, it preloads the vendored runtime and
    registers the library."""
    folder = tmp_path / "recipes"
    folder.mkdir()
    recipe = folder / V1.name
    text = V1.read_text()
    assert text.count('\nbuilder = "debian-root"') == 1
    recipe.write_text(text.replace('\nbuilder = "debian-root"', '\nbuilder = "host"'))
    for lock in RECIPES.glob(f"{V1.stem}.*.lock"):
        (folder / lock.name).write_bytes(lock.read_bytes())
    built = run_cli("build", real_wheel, "--recipe", recipe, "--out-dir", tmp_path / "out")
    assert built.returncode == 0, built.stderr[-3000:]
    venv = environment(recipe, tmp_path)
    python(venv, "-m", "pip", "install", built.stdout.strip().splitlines()[-1])
    report = first_import_then_train(recipe, venv, "pandas", warnings=1)
    assert "needs GLIBCXX_3.4.30" in report["ops_left_out"] and "start Python with LD_PRELOAD=" in report["ops_left_out"]
    assert report["loss"][1] < report["loss"][0], report
    report = first_import_then_train(recipe, venv, "json")  # no C++ extension: tensorflow maps the runtime first
    assert not report["mapped_before"] and report["ops_left_out"] is None and report["loss"][1] < report["loss"][0]


def install_killed(venv: Path, wheel: Path, share: float) -> str:
    """Start `pip install WHEEL` and kill it (SIGKILL, its whole process group) once TF 1.15.5 is uninstalled
    and ``share`` of the wheel's files are in site-packages; how far it had got then."""
    site = site_packages(venv)
    paths = tensorflow_record(wheel)

    def when(site: Path) -> str:
        if any(site.glob("tensorflow-1.15.5.dist-info")):
            return ""
        present = sum(1 for path in paths if (site / path).exists())
        return f"{present} of {len(paths)} files" if present >= share * len(paths) else ""

    # A killed pip leaves its unpacked wheel in its temporary folder: one of this test's, not the machine's /tmp.
    scratch = venv.parents[2] / "killed-pip-tmp"
    scratch.mkdir(exist_ok=True)
    process = subprocess.Popen([str(venv), "-m", "pip", "install", str(wheel)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True, cwd=venv.parents[2],
                               env=dict(os.environ, TMPDIR=str(scratch)))
    deadline = time.monotonic() + INSTALL_TIMEOUT
    try:
        while process.poll() is None and time.monotonic() < deadline:
            state = when(site)
            if state:
                return state
            time.sleep(0.05)
        pytest.fail(f"pip finished (exit {process.returncode}) before the point to kill it at")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def tensorflow_record(wheel: Path) -> list[str]:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        return [line.rsplit(",", 2)[0] for line in zf.read(record).decode().splitlines() if line]


# Early: TF 1.15.5 moved aside, a few of the wheel's files written; late: most of them.
KILL_POINTS = {"early": 0.02, "late": 0.7}


def repaired_by_installing_again(wheel: Path, pip: str, point: str, folder: Path) -> None:
    recipe = V1
    venv = environment(recipe, folder, pip)
    state = install_killed(venv, wheel, KILL_POINTS[point])
    python(venv, "-m", "pip", "install", str(wheel))
    # pip before 20.3 copies the unpacked wheel in the file system's order: where its metadata came first, pip takes
    # the half-written package for installed, and `import tensorflow` says so and how to repair it
    probe = run_bounded([venv, "-c", "import tensorflow"], PROGRAM_TIMEOUT, cwd=venv.parents[2])
    if probe.returncode != 0:
        assert "is half-installed" in probe.stderr and "pip install --force-reinstall --no-deps" in probe.stderr, (
            state, probe.stderr[-3000:])
        python(venv, "-m", "pip", "install", "--force-reinstall", "--no-deps", str(wheel))
    report = first_import_then_train(recipe, venv, "pandas")
    assert report["loss"][1] < report["loss"][0], (state, report)
    python(venv, "-m", "pip", "check")
    python(venv, "-m", "pip", "uninstall", "-y", "tensorflow")
    site = site_packages(venv)
    left = [path for path in tensorflow_record(wheel) if (site / path).exists()]
    assert not left, (state, left[:10])


TF115_PROGRAM = """
import json
import pandas
import tensorflow as tf
x = tf.get_variable("x", [4], initializer=tf.ones_initializer())
loss = tf.reduce_sum(x * x)
train = tf.train.AdamOptimizer(0.1).minimize(loss)
with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    before = session.run(loss)
    session.run(train)
    print(json.dumps({"version": tf.__version__, "loss": [float(before), float(session.run(loss))]}))
"""


def gives_way_to_tensorflow_1_15(wheel: Path, pip: str, point: str, folder: Path) -> None:
    """The other way back: `pip install tensorflow==1.15.5` after the kill gives a TF 1.15.5 that trains. Where the
    wheel's metadata was written before the kill, pip removes every file of the wheel on the way."""
    recipe = V1
    venv = environment(recipe, folder, pip)
    state = install_killed(venv, wheel, KILL_POINTS[point])
    site = site_packages(venv)
    recorded = any(site.glob("tensorflow-2.6.2*.dist-info/RECORD"))
    python(venv, "-m", "pip", "install", "tensorflow==1.15.5")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    run = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(recipe), "--env", str(venv.parents[1]),
                       "python", "-c", TF115_PROGRAM], PROGRAM_TIMEOUT, env=env)
    assert run.returncode == 0, (state, run.stderr[-3000:])
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["version"] == "1.15.5" and report["loss"][1] < report["loss"][0], (state, report)
    if recorded:
        with open(next(site.glob("tensorflow-1.15.5.dist-info/RECORD"))) as record:
            theirs = {line.rsplit(",", 2)[0] for line in record}
        left = [path for path in tensorflow_record(wheel) if (site / path).exists() and path not in theirs]
        assert not left, (state, left[:10])


# Each test's (pip, kill point)s: pip 19.0.3 copies the unpacked wheel in the file system's order, pip 21.3.1 straight
# from the zip in its order.
REPAIRED = [("19.0.3", "late"), ("21.3.1", "early")]
GIVES_WAY = [("19.0.3", "late")]
SCENARIOS = {"test_a_killed_install_is_repaired_by_installing_again": (repaired_by_installing_again, REPAIRED),
             "test_a_killed_install_gives_way_to_tensorflow_1_15": (gives_way_to_tensorflow_1_15, GIVES_WAY)}


@pytest.fixture(scope="module")
def killed_installs(request, v1_wheel, tmp_path_factory):
    """(test name, pip, kill point) -> the run of that killed install and its repair: the selected ones two at a time
    (pip runs on one core, each in its own copy of the environment), all begun when the first test asks."""
    from concurrent.futures import ThreadPoolExecutor

    selected = [(item.originalname, item.callspec.params["pip"], item.callspec.params.get("point", "late"))
                for item in request.session.items if item.originalname in SCENARIOS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {(name, pip, point): pool.submit(SCENARIOS[name][0], v1_wheel, pip, point,
                                               tmp_path_factory.mktemp(f"killed-{pip}-{point}"))
               for name, pip, point in selected}


@pytest.mark.parametrize("pip, point", REPAIRED)
def test_a_killed_install_is_repaired_by_installing_again(killed_installs, pip, point):
    killed_installs["test_a_killed_install_is_repaired_by_installing_again", pip, point].result()


@pytest.mark.parametrize("pip, point", GIVES_WAY)
def test_a_killed_install_gives_way_to_tensorflow_1_15(killed_installs, pip, point):
    killed_installs["test_a_killed_install_gives_way_to_tensorflow_1_15", pip, point].result()
