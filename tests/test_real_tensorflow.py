"""End to end on the real tensorflow-cpu 2.6.2 cp36 wheel and a real Python 3.6 (slow; run in CI)."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import pytest

from retfwheel.errors import InputFileError
from retfwheel.fetch import cache_root, fetch_default_input
from retfwheel.interpreter import find_python
from retfwheel.recipe import load_recipe

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real_wheel(request):
    from conftest import RECIPES

    return fetch_default_input(load_recipe(RECIPES / "emulated-py36.toml"), cache_root())


@pytest.fixture(scope="module")
def python36():
    try:
        return find_python((3, 6))
    except InputFileError as exc:
        pytest.skip(f"no Python 3.6 interpreter on this machine: {exc}")


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "retfwheel", *map(str, args)], capture_output=True, text=True)


def test_inspect_real_wheel(real_wheel, emulated, bionic):
    run = run_cli("inspect", real_wheel, "--recipe", bionic, "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["wheel"]["name"] == "tensorflow-cpu" and data["tensorflow_version"] == "2.6.2"
    assert data["cxx11_abi"] == 0
    assert data["manylinux"] == ["manylinux_2_12", "manylinux2010"]
    elves = {e["path"]: e for e in data["elf"]}
    assert len(elves) == 58
    internal = elves["tensorflow/python/_pywrap_tensorflow_internal.so"]
    assert "libtensorflow_framework.so.2" in internal["needed"] and internal["newest"]["GLIBC"] == "2.12"
    assert {e["verdict"] for e in elves.values()} == {"ok"}


@pytest.fixture(scope="module")
def built(real_wheel, python36, tmp_path_factory):
    from conftest import RECIPES

    out = tmp_path_factory.mktemp("built")
    run = run_cli("build", real_wheel, "--recipe", RECIPES / "emulated-py36.toml", "--out-dir", out)
    assert run.returncode == 0, run.stderr[-3000:]
    return Path(run.stdout.strip().splitlines()[-1])


def test_build_is_honest_and_reproducible(built, real_wheel, emulated, tmp_path):
    assert built.name == "tensorflow-2.6.2+retf.emu36-cp36-cp36m-manylinux_2_36_x86_64.linux_x86_64.whl"
    again = run_cli("build", real_wheel, "--recipe", emulated, "--out-dir", tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert built.read_bytes() == Path(again.stdout.strip().splitlines()[-1]).read_bytes()
    data = json.loads(run_cli("inspect", built, "--json").stdout)
    assert data["processed_by_retfwheel"]["input"]["sha256"] and data["wheel"]["requires_dist"] == ["wheel (~=0.35)"]
    paths = {e["path"] for e in data["elf"]}
    assert "tensorflow.libs/libstdc++.so.6" in paths and any(p.startswith("tensorflow.deps/numpy/") for p in paths)


def test_verify_in_the_emulated_tf115_environment(built, emulated):
    """Offline install next to TF 1.15.5's packages, old libstdc++ mounted: import, train, load a 3.4.29 extension."""
    run = run_cli("verify", built, "--recipe", emulated, "--json")
    report = json.loads(run.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert run.returncode == 0, json.dumps(report["checks"], indent=1) + run.stderr[-2000:]
    for name in ("pip install --no-index", "other distributions unchanged", "pip check", "old runtime is emulated",
                 "import tensorflow", "vendored libstdc++ mapped", "tf.compat.v1 training step",
                 "GLIBCXX_3.4.29 extension after import", "pip uninstall leaves nothing"):
        assert checks[name]["status"] == "pass", checks[name]
    assert "GLIBCXX_3.4.29' not found" in checks["old runtime is emulated"]["detail"]


def test_stock_wheel_fails_verify(real_wheel, emulated):
    run = run_cli("verify", real_wheel, "--recipe", emulated)
    assert run.returncode == 14
    assert "FAIL  pip install --no-index" in run.stdout and "ERROR: " in run.stderr


def test_docker_entry_point_runs_the_same_verification(built, emulated):
    """docker/ubuntu18.04-py36's entry point, run here against the emulated environment."""
    import os

    script = Path(__file__).resolve().parent.parent / "docker" / "ubuntu18.04-py36" / "entrypoint.sh"
    env = dict(os.environ, RETF_RECIPE=str(emulated), RETFWHEEL=str(Path(sys.executable).parent / "retfwheel"))
    run = subprocess.run([str(script), str(built)], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "pass  GLIBCXX_3.4.29 extension after import" in run.stdout
