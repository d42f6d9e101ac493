"""Vendoring the C++ runtime and locked dependencies, offline: locked files are pre-seeded in the cache."""

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from factory import make_wheel, tensorflow_files
from retfwheel.errors import AuditError, FetchError, RecipeError
from retfwheel.stages.pipeline import build_wheel
from retfwheel.targets.lock import (
    Lock,
    LockedPackage,
    format_lock,
    lock_name,
    read_lock,
    requirements_digest,
    vendored_requirements,
    wheel_scripts,
)
from retfwheel.targets.recipe import load_recipe
from retfwheel.wheelfile.injection import injected_config
from retfwheel.wheelfile.record import file_sha256
from retfwheel.wheelfile.wheel import read_wheel

DEPS = """
[deps]
vendor = true
leave = ["six"]
scripts = {{ fakeboard = "retf-fakeboard" }}
environment_scripts = ["tensorboard"]
{runtime}
"""


@pytest.fixture
def dep_wheel(tmp_path):
    """A dependency wheel with a console script, a .pth file and a .data/purelib part."""
    folder = tmp_path / "deps"
    folder.mkdir()
    return make_wheel(
        folder,
        {
            "numpy/__init__.py": b"__version__ = '1.19.5'\n",
            "numpy-nspkg.pth": b"import sys\n",
            "numpy-1.19.5.data/purelib/numpy_extra.py": b"X = 1\n",
            "numpy-1.19.5.data/scripts/f2py": b"#!python\n",
        },
        name="numpy",
        version="1.19.5",
        tag="cp36-cp36m-manylinux2010_x86_64",
        requires=(),
        extra_dist_info={"entry_points.txt": b"[console_scripts]\nfakeboard = numpy.board:main\n"},
    )


def seed(cache, wheel):
    from retfwheel.cache import entry_path, publish_file

    publish_file(entry_path(cache, "files", file_sha256(wheel), wheel.name), "files", wheel.read_bytes())


def lock_of(recipe_path):
    """The lock the vendoring fixture made next to its recipe (one per recipe and input)."""
    return next(recipe_path.parent.glob(f"{recipe_path.stem}.*.lock"))


@pytest.fixture
def vendoring(tmp_path, libs, make_recipe, dep_wheel):
    """(input wheel, recipe path, cache) with a lock pinning ``dep_wheel``."""

    def make(runtime="", entry_points=b"[console_scripts]\ntensorboard = tensorboard.main:run_main\n"
             b"saved_model_cli = tensorflow.python.tools.saved_model_cli:main\nconverter = estimator.tools:main\n", extra=None):
        source = make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi, extra),
                            extra_dist_info={"entry_points.txt": entry_points})
        recipe_path = make_recipe(extra=DEPS.format(runtime=runtime))
        wheel = read_wheel(source)
        requirements = vendored_requirements(wheel, ("six",))
        package = LockedPackage("numpy", "1.19.5", dep_wheel.name, file_sha256(dep_wheel), "wheel", wheel_scripts(dep_wheel))
        lock = Lock(recipe_path.parent / lock_name(load_recipe(recipe_path), wheel), "test-py36", "tensorflow-cpu==2.6.2", requirements_digest(requirements), (package,))
        lock.path.write_text(format_lock(lock))
        cache = tmp_path / "cache"
        seed(cache, dep_wheel)
        return source, recipe_path, cache

    return make


def test_lock_round_trip_and_stale_lock(vendoring, tmp_path):
    source, recipe_path, cache = vendoring()
    lock = read_lock(lock_of(recipe_path))
    assert [p.name for p in lock.packages] == ["numpy"] and lock.packages[0].kind == "wheel"
    text = lock_of(recipe_path).read_text().replace(lock.requirements_sha256, "0" * 64)
    lock_of(recipe_path).write_text(text)
    with pytest.raises(RecipeError, match="requirements differ"):
        build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache)


def test_dependencies_are_vendored_privately(vendoring, tmp_path):
    source, recipe_path, cache = vendoring()
    out = build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache).output
    wheel = read_wheel(out)
    names = {m.name for m in wheel.archive.members}
    assert {"tensorflow.deps/numpy/__init__.py", "tensorflow.deps/numpy_extra.py",
            "tensorflow.deps/numpy-1.19.5.dist-info.vendored/METADATA",
            "tensorflow.deps/numpy-1.19.5.dist-info.vendored/RECORD"} <= names
    # pip before 20.0 takes every folder named *.dist-info, at any depth, for a candidate of the wheel's own
    folders = {"/".join(n.split("/")[:i]) for n in names for i in range(1, n.count("/") + 1)}
    assert sorted(f for f in folders if f.endswith(".dist-info")) == ["tensorflow-2.6.2+retf.test.dist-info"]
    assert not any(n.endswith(".pth") or "/scripts/" in n for n in names)
    assert b"Requires-Dist: numpy" not in wheel.metadata and b"Requires-Dist: six (~=1.15.0)" in wheel.metadata
    config = injected_config(zipfile.ZipFile(out).read("tensorflow/__init__.py"))
    assert config["deps"] == "tensorflow.deps"
    # the input asks numpy~=1.19.2, which retfwheel's sharing table takes as >=1.16,<1.20
    assert config["distributions"] == [{"name": "numpy", "version": "1.19.5", "range": "<1.20,>=1.16",
                                        "modules": ["numpy", "numpy_extra"],
                                        "metadata": "numpy-1.19.5.dist-info.vendored"}]
    assert "tensorflow/_retf/__init__.py" in names


def test_console_scripts_go_through_the_bootstrap(vendoring, tmp_path):
    source, recipe_path, cache = vendoring()
    out = build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache).output
    with zipfile.ZipFile(out) as zf:
        entry_points = zf.read("tensorflow-2.6.2+retf.test.dist-info/entry_points.txt").decode()
        shim = zf.read("tensorflow/_retf_scripts.py").decode()
    assert "saved_model_cli = tensorflow.python.tools.saved_model_cli:main" in entry_points
    # owned by the target environment too: kept as the input declares it, not routed through tensorflow
    assert "tensorboard = tensorboard.main:run_main" in entry_points and "script_tensorboard" not in shim
    assert "converter = tensorflow._retf_scripts:script_converter" in entry_points
    assert "retf-fakeboard = tensorflow._retf_scripts:script_retf_fakeboard" in entry_points
    assert "_run('numpy.board:main')" in shim and "import tensorflow" in shim
    compile(shim, "shim", "exec")


def test_unknown_vendored_script_is_a_recipe_error_before_anything_is_fetched(vendoring, tmp_path):
    source, recipe_path, cache = vendoring()
    assert read_lock(lock_of(recipe_path)).packages[0].scripts == ("fakeboard",)
    recipe_path.write_text(recipe_path.read_text().replace("fakeboard = ", "nosuch = "))
    with pytest.raises(RecipeError, match="no vendored distribution declares a console script 'nosuch'"):
        build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache, dry_run=True)


def test_a_damaged_cached_file_is_downloaded_again(vendoring, tmp_path, monkeypatch, dep_wheel):
    import retfwheel.targets.lock as lock_module

    source, recipe_path, cache = vendoring()
    expected = build_wheel(source, load_recipe(recipe_path), tmp_path / "first", cache=cache).output.read_bytes()
    stored = next((cache / "files").rglob("*.whl"))
    stored.write_bytes(stored.read_bytes()[:-1] + bytes([stored.read_bytes()[-1] ^ 1]))

    def fake_download(spec, recipe, folder, *, sdist):
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(dep_wheel, folder / dep_wheel.name))

    monkeypatch.setattr(lock_module, "download", fake_download)
    said = []
    out = build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache, progress=said.append).output
    assert f"the cached file {stored} is damaged: {stored.name} changed (its sha256 is not the recorded one); " \
           "downloading it again" in said
    assert out.read_bytes() == expected and file_sha256(stored) == file_sha256(dep_wheel)


def test_download_drift_is_refused(vendoring, tmp_path, monkeypatch, dep_wheel):
    import retfwheel.targets.lock as lock_module

    source, recipe_path, cache = vendoring()
    for stored in (cache / "files").rglob("*.whl"):
        stored.unlink()

    def fake_download(spec, recipe, folder, *, sdist):
        folder.mkdir(parents=True, exist_ok=True)
        changed = folder / dep_wheel.name
        changed.write_bytes(dep_wheel.read_bytes() + b"changed upstream")
        return changed

    monkeypatch.setattr(lock_module, "download", fake_download)
    with pytest.raises(FetchError, match="refusing the drift"):
        build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache)


def test_runtime_from_a_file_is_vendored_and_audited(vendoring, tmp_path, libs):
    runtime = '[libstdcxx]\nsource = "file"\npath = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"\nvendor = "auto"\n'
    source, recipe_path, cache = vendoring(runtime=runtime, extra={"tensorflow/python/tc.so": libs.to_chars})
    recipe_path.write_text(recipe_path.read_text().replace('glibcxx = "3.4.28"', 'glibcxx = "3.4.25"'))
    result = build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache)
    names = {m.name for m in read_wheel(result.output).archive.members}
    assert "tensorflow.libs/libstdc++.so.6" in names
    assert any("vendored libstdc++ provides GLIBCXX_3.4.30" in c for c in result.audit.checks)
    init = zipfile.ZipFile(result.output).read("tensorflow/__init__.py").decode()
    assert '"glibcxx_needed": [3, 4, 29]' in init


def fake_runtime(folder, source_code, versions):
    """A library named libstdc++.so.6 defining only the given GLIBCXX versions."""
    script = folder / "v.map"
    script.write_text(" ".join(f"{v} {{ global: f{i}; }};" for i, v in enumerate(versions)) + "\n")
    src = folder / "fake.c"
    src.write_text(source_code + "".join(f"\nint f{i}(void) {{ return {i}; }}" for i in range(len(versions))))
    out = folder / "libstdc++.so.6"
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,--version-script={script}", "-Wl,-soname,libstdc++.so.6",
                    "-o", str(out), str(src)], check=True)
    return out


@pytest.mark.parametrize(
    "code, versions, glibc, message",
    [
        ("", ["GLIBCXX_3.4", "GLIBCXX_3.4.20"], "host", "needs GLIBCXX_3.4.29, the vendored libstdc++ provides only GLIBCXX_3.4.20"),
        ("#include <stdlib.h>\nunsigned int r(void) { return arc4random(); }", ["GLIBCXX_3.4", "GLIBCXX_3.4.30"], "2.27",
         "tensorflow.libs/libstdc++.so.6 needs GLIBC_2.36, the target has glibc 2.27"),
    ],
)
def test_audit_refuses_a_runtime_that_cannot_serve(vendoring, tmp_path, libs, code, versions, glibc, message):
    runtime_file = fake_runtime(tmp_path, code, versions)
    runtime = f'[libstdcxx]\nsource = "file"\npath = "{runtime_file}"\nvendor = "auto"\n'
    source, recipe_path, cache = vendoring(runtime=runtime, extra={"tensorflow/python/tc.so": libs.to_chars})
    text = recipe_path.read_text().replace('glibcxx = "3.4.28"', 'glibcxx = "3.4.25"').replace('glibc = "host"', f'glibc = "{glibc}"')
    recipe_path.write_text(text)
    with pytest.raises(AuditError, match=re.escape(message)):
        build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_damaged_lock_in_the_cache_is_removed_and_the_build_asks_for_a_new_one(vendoring, tmp_path):
    from retfwheel.cache import check, entry_path, publish_file

    source, recipe_path, cache = vendoring()
    beside = lock_of(recipe_path)
    text = beside.read_bytes()
    stored = entry_path(cache, "locks", beside.name)  # where `retfwheel lock` keeps a built-in recipe's
    publish_file(stored, "locks", text)
    beside.unlink()
    expected = build_wheel(source, load_recipe(recipe_path), tmp_path / "first", cache=cache).output.read_bytes()
    assert check(stored, "locks") is None
    stored.write_bytes(stored.read_bytes().replace(b"numpy", b"nunpy"))
    said = []
    with pytest.raises(RecipeError, match="no lock for tensorflow-cpu 2.6.2"):
        build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache, progress=said.append)
    assert any(line.startswith(f"the cached lock {stored} is damaged") and "retfwheel lock --recipe" in line for line in said)
    assert not stored.exists() and not (tmp_path / "out").exists()
    publish_file(stored, "locks", text)  # what `retfwheel lock` does
    assert build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache).output.read_bytes() == expected


def test_private_names_ship_under_tensorflow_vendor_and_every_import_follows(vendoring, tmp_path):
    user = b"import numpy as np\nfrom numpy import array\n\n\ndef f():\n    import numpy\n    return numpy, np, array\n"
    source, recipe_path, cache = vendoring(runtime='private_names = ["numpy"]',
                                           extra={"tensorflow/python/util/uses.py": user})
    out = build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache).output
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        rewritten = archive.read("tensorflow/python/util/uses.py")
        untouched = archive.read("tensorflow/python/ops/array_ops.py")
        config = injected_config(archive.read("tensorflow/__init__.py"))
    assert {"tensorflow/_vendor/__init__.py", "tensorflow/_vendor/numpy/__init__.py", "tensorflow/_vendor/numpy_extra.py",
            "tensorflow/_vendor/numpy-1.19.5.dist-info.vendored/METADATA"} <= names
    assert not any(n.startswith("tensorflow.deps/numpy") for n in names)
    assert rewritten == (b"from tensorflow._vendor import numpy as np\nfrom tensorflow._vendor.numpy import array\n\n\n"
                         b"def f():\n    from tensorflow._vendor import numpy\n    return numpy, np, array\n")
    assert untouched == b"def identity(x):\n    return x\n"
    assert config["distributions"] == []  # TensorFlow's own: never routed to the environment's numpy


def test_a_private_name_the_rewrite_cannot_follow_is_refused_naming_the_file_and_line(vendoring, tmp_path):
    from retfwheel.errors import TargetMismatchError

    source, recipe_path, cache = vendoring(runtime='private_names = ["numpy"]',
                                           extra={"tensorflow/python/util/odd.py": b"x = 1\nname = 'numpy'\n"})
    with pytest.raises(TargetMismatchError, match=r"tensorflow/python/util/odd.py:2: the string 'numpy' names a renamed"):
        build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_package_init_that_imports_a_private_name_is_rewritten_then_bootstrapped_once(vendoring, tmp_path):
    init = b'"""TensorFlow."""\nfrom __future__ import absolute_import\nimport numpy\n__version__ = "2.6.2"\n'
    source, recipe_path, cache = vendoring(runtime='private_names = ["numpy"]', extra={"tensorflow/__init__.py": init})
    out = build_wheel(source, load_recipe(recipe_path), tmp_path / "out", cache=cache).output
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        patched = archive.read("tensorflow/__init__.py").decode()
    assert names.count("tensorflow/__init__.py") == 1
    assert "from tensorflow._vendor import numpy\n" in patched and "\nimport numpy\n" not in patched
    assert patched.count("retfwheel bootstrap: begin") == 1
