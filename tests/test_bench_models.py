"""bench/bench_models.py refuses a kept environment whose wheel another version of the recipe built."""

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_models.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_models", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kept_env(root: Path, recipe_name: str, sha256: str) -> Path:
    """A venv laid out as `retfwheel verify --keep-env` leaves one, holding only the build record."""
    info = root / "venv" / "lib" / "python3.6" / "site-packages" / "tensorflow-2.6.2+retf.emu36.v1.dist-info"
    info.mkdir(parents=True)
    (info / "retfwheel.json").write_text(json.dumps({"recipe": {"name": recipe_name, "sha256": sha256}}))
    return root / "venv"


def test_a_venv_built_from_the_recipe_as_it_is_serves(bench, tmp_path):
    recipe = tmp_path / "v1.toml"
    recipe.write_text('api = "v1"\n')
    venv = kept_env(tmp_path, "v1", hashlib.sha256(recipe.read_bytes()).hexdigest())
    assert bench.stale_env_problem(venv, recipe) is None


def test_a_venv_built_from_another_version_of_the_recipe_is_refused(bench, tmp_path):
    recipe = tmp_path / "v1.toml"
    recipe.write_text('api = "v1"\n')
    venv = kept_env(tmp_path, "v1", hashlib.sha256(b'api = "v1"\nv1_fused_embedding = true\n').hexdigest())
    problem = bench.stale_env_problem(venv, recipe)
    assert problem.startswith(f"--env {venv}: its wheel was built from recipe 'v1'")
    assert "v1.toml as it is now" in problem and "--keep-env DIR" in problem and "\n" not in problem


def test_a_venv_without_a_retfwheel_build_is_refused(bench, tmp_path):
    problem = bench.stale_env_problem(tmp_path, tmp_path / "v1.toml")
    assert problem.startswith(f"--env {tmp_path}: no retfwheel-built tensorflow in it")


def test_the_shipped_recipe_and_a_stale_record_disagree(bench, tmp_path):
    venv = kept_env(tmp_path, bench.V1_RECIPE.stem, "0" * 64)
    assert "as it is now" in bench.stale_env_problem(venv)


def test_a_record_that_is_not_a_build_record_is_refused_in_one_line(bench, tmp_path):
    venv = kept_env(tmp_path, "v1", "0" * 64)
    next(venv.glob("lib/*/site-packages/*.dist-info/retfwheel.json")).write_text("[1, 2]")
    recipe = tmp_path / "v1.toml"
    recipe.write_text('api = "v1"\n')
    problem = bench.stale_env_problem(venv, recipe)
    assert problem.startswith(f"--env {venv}: its wheel was built from recipe None") and "\n" not in problem
