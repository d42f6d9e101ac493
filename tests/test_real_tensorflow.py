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


def test_build_installs_and_imports_on_python36(real_wheel, emulated, tmp_path, python36):
    out = tmp_path / "out"
    run = run_cli("build", real_wheel, "--recipe", emulated, "--out-dir", out)
    assert run.returncode == 0, run.stderr
    built = run.stdout.strip().splitlines()[-1]
    assert built.endswith("tensorflow-2.6.2+retf.emu36-cp36-cp36m-manylinux_2_12_x86_64.manylinux2010_x86_64.linux_x86_64.whl")

    again = run_cli("build", real_wheel, "--recipe", emulated, "--out-dir", tmp_path / "again")
    assert open(built, "rb").read() == open(again.stdout.strip().splitlines()[-1], "rb").read()

    venv = tmp_path / "venv"
    subprocess.run([str(python36), "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "-U", "pip<22"], check=True)
    subprocess.run([*pip, "install", built], check=True)
    show = subprocess.run([py, "-m", "pip", "show", "tensorflow"], capture_output=True, text=True, check=True).stdout
    assert "Version: 2.6.2+retf.emu36" in show
    probe = "import tensorflow as tf; print(tf.__version__, int(tf.add(tf.constant(2), 3)))"
    result = subprocess.run([py, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["2.6.2", "5"]
    subprocess.run([*pip, "uninstall", "-y", "tensorflow"], check=True)
    site = subprocess.run([py, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True).stdout.strip()
    assert not (Path(site) / "tensorflow").exists()
