import subprocess

import pytest

from retfwheel.errors import InputFileError
from retfwheel.proof.verify import KEPT_MARKER, _kept_folder, _unchanged, first_imports


def snapshot(**dists):
    return {name: {"version": version, "files": files} for name, (version, files) in dists.items()}


BEFORE = snapshot(
    tensorflow=("1.15.5", {"bin/tensorboard": "a", "lib/tensorflow/x.py": "b"}),
    tensorboard=("1.15.0", {"bin/tensorboard": "a", "lib/tensorboard/main.py": "c"}),
    numpy=("1.18.5", {"lib/numpy/__init__.py": "d"}),
)


def runs(path):
    return None


def test_identical_environment_passes():
    after = {k: v for k, v in BEFORE.items() if k != "tensorflow"}
    check = _unchanged(BEFORE, after, "tensorflow", runs)
    assert check.status == "pass" and "shared with" not in check.detail


def test_file_co_owned_by_the_replaced_distribution_may_change_if_its_command_still_runs():
    after = snapshot(tensorboard=("1.15.0", {"bin/tensorboard": "rewritten", "lib/tensorboard/main.py": "c"}),
                     numpy=("1.18.5", {"lib/numpy/__init__.py": "d"}))
    asked = []
    check = _unchanged(BEFORE, after, "tensorflow", lambda path: asked.append(path))
    assert check.status == "pass" and "bin/tensorboard, shared with the replaced tensorflow" in check.detail
    assert asked == ["bin/tensorboard"]


def test_a_command_of_the_environment_that_stops_running_fails():
    after = snapshot(tensorboard=("1.15.0", {"bin/tensorboard": None, "lib/tensorboard/main.py": "c"}),
                     numpy=("1.18.5", {"lib/numpy/__init__.py": "d"}))
    check = _unchanged(BEFORE, after, "tensorflow", lambda path: "gone")
    assert check.status == "FAIL" and "command bin/tensorboard no longer runs (gone)" in check.detail


def test_changed_version_or_file_fails():
    after = snapshot(tensorboard=("1.15.0", {"bin/tensorboard": "a", "lib/tensorboard/main.py": "c"}),
                     numpy=("1.19.5", {"lib/numpy/__init__.py": "e"}))
    assert _unchanged(BEFORE, after, "tensorflow", runs).status == "FAIL"
    after = snapshot(tensorboard=("1.15.0", {"bin/tensorboard": "a", "lib/tensorboard/main.py": "changed"}),
                     numpy=("1.18.5", {"lib/numpy/__init__.py": "d"}))
    check = _unchanged(BEFORE, after, "tensorflow", runs)
    assert check.status == "FAIL" and "lib/tensorboard/main.py" in check.detail


def test_empty_listing_fails():
    assert _unchanged({}, {}, "tensorflow", runs).status == "FAIL"


def test_keep_env_refuses_a_folder_it_did_not_make_and_touches_nothing(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('mine')\n")
    with pytest.raises(InputFileError, match="not empty, and not an environment `retfwheel verify --keep-env` made"):
        _kept_folder(project)
    assert [p.name for p in project.iterdir()] == ["train.py"]
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(InputFileError, match="needs a folder"):
        _kept_folder(tmp_path / "a-file")


def test_keep_env_replaces_only_a_folder_it_made(tmp_path):
    kept = _kept_folder(tmp_path / "new" / "env")
    assert (kept / KEPT_MARKER).is_file()
    (kept / "venv").mkdir()
    again = _kept_folder(kept)
    assert sorted(p.name for p in again.iterdir()) == [KEPT_MARKER]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (_kept_folder(empty) / KEPT_MARKER).is_file()


def test_a_package_with_a_cxx_extension_is_imported_first_by_that_extension():
    modules = {"pandas": "pandas", "six": "six", "matplotlib": "matplotlib", "pylab": "matplotlib"}
    extensions = {"pandas._libs.window.aggregations": "pandas", "matplotlib._contour": "matplotlib"}
    assert first_imports(modules, extensions) == {"matplotlib._contour": "matplotlib", "pandas._libs.window.aggregations":
                                                  "pandas", "pylab": "matplotlib", "six": "six"}


@pytest.mark.parametrize(("stderr", "status"), [
    ("NotFoundError: libtensorflow_framework.so.1: cannot open shared object file\nretf: /e/lib/x.so (Py_Op 0.1) was "
     "built for TensorFlow 1.x: ...", "pass"),
    ("NotFoundError: libtensorflow_framework.so.1: cannot open shared object file", "FAIL"),
])
def test_a_library_built_for_tf_1_is_listed_and_passes_only_when_loading_it_names_it(monkeypatch, stderr, status):
    from pathlib import Path

    from retfwheel.proof import verify

    monkeypatch.setattr(verify, "_python", lambda env, arguments, emulate=False: subprocess.CompletedProcess(
        arguments, 1, "", stderr))
    env = type("Env", (), {"venv": Path("/e")})()
    check = verify._tf1_extensions_check(env, {"py-op 0.1": ("lib/x.so",)}, lambda message: None)
    assert check.status == status and "1 cannot load into TF 2.x: py-op 0.1 (lib/x.so)" in check.detail


def test_no_library_built_for_tf_1_passes_saying_so():
    from retfwheel.proof.verify import _tf1_extensions_check

    check = _tf1_extensions_check(None, {}, lambda message: None)
    assert check.status == "pass" and "none of the environment's distributions" in check.detail


def test_a_kept_environment_is_put_back_even_when_pip_uninstall_stops_with_an_error(tmp_path, monkeypatch):
    """verify --keep-env keeps the environment as it was with the wheel installed: a pip uninstall that stops
    partway with an error (here: one file removed, then OSError) leaves neither a half-uninstalled environment nor
    the copy beside it."""
    from retfwheel.proof import verify
    from retfwheel.targets.environment import Environment

    venv = tmp_path / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "tensorflow.py").write_text("installed\n")
    (venv / "lib" / "site.pth").write_text("path\n")

    def pip_removes_then_fails(env, arguments, **kwargs):
        (env.venv / "lib" / "tensorflow.py").unlink()  # pip had begun
        raise OSError("pip cannot run")

    monkeypatch.setattr(verify, "_python", pip_removes_then_fails)
    with pytest.raises(OSError, match="pip cannot run"):
        verify._uninstall_check(Environment(venv, venv / "bin" / "python", None), None, "tensorflow", keep=True)
    assert (venv / "lib" / "tensorflow.py").read_text() == "installed\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv"]
