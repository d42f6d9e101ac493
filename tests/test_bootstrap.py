"""Each decision of the bootstrap, in a real Python 3.6 interpreter, on a small fake install."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from retfwheel.injection import bootstrap_block, inject

REPO = Path(__file__).resolve().parent.parent
SYSTEM_RUNTIME = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


@pytest.fixture
def install(tmp_path):
    """Make a site folder holding a bootstrapped 'tensorflow' package; returns a runner."""

    def make(**config):
        site = tmp_path / "site"
        (site / "tensorflow").mkdir(parents=True)
        settings = {"label": "tensorflow 9.9+retf.test", "conflicts": "error", **config}
        init = inject(b'"""TF."""\nfrom __future__ import absolute_import\nVALUE = 1\n',
                      bootstrap_block("tensorflow._retf_bootstrap", settings), "tensorflow/__init__.py")
        (site / "tensorflow" / "__init__.py").write_bytes(init)
        shutil.copy(REPO / "bootstrap" / "retf_bootstrap.py", site / "tensorflow" / "_retf_bootstrap.py")
        if settings.get("libstdcxx"):
            (site / "tensorflow.libs").mkdir()
            shutil.copy(SYSTEM_RUNTIME.resolve(), site / "tensorflow.libs" / "libstdc++.so.6")
        deps = site / "tensorflow.deps"
        (deps / "fakemod").mkdir(parents=True)
        (deps / "fakemod" / "__init__.py").write_text("__version__ = '2.0'\n")
        (deps / "google" / "fakeproto").mkdir(parents=True)
        (deps / "google" / "fakeproto" / "__init__.py").write_text("ORIGIN = 'vendored'\n")
        env = tmp_path / "env"
        (env / "fakemod").mkdir(parents=True, exist_ok=True)
        (env / "fakemod" / "__init__.py").write_text("__version__ = '1.0'\n")
        (env / "google").mkdir(exist_ok=True)
        return site, env

    return make


def run(python36, site, env, code, **environ):
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    variables.update(environ)
    variables["PYTHONPATH"] = f"{site}:{env}"
    return subprocess.run([str(python36), "-c", code], capture_output=True, text=True, env=variables)


MAPS = "import json; print(json.dumps(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l})))"
DEPS = {"deps": "tensorflow.deps", "modules": {"fakemod": "2.0"}, "namespaces": ["google"]}


def test_no_preload_when_the_system_runtime_suffices(python36, install):
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 20])
    result = run(python36, site, env, "import tensorflow; " + MAPS, RETF_BOOTSTRAP_DEBUG="1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [] and "system runtime suffices" in result.stderr


def test_preload_when_the_system_runtime_is_older_than_needed(python36, install):
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 99])
    result = run(python36, site, env, "import tensorflow; " + MAPS)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [str(site / "tensorflow.libs" / "libstdc++.so.6")]


def test_older_runtime_already_loaded_is_an_actionable_import_error(python36, install):
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 99])
    result = run(python36, site, env, "import ctypes; ctypes.CDLL('libstdc++.so.6'); import tensorflow")
    assert result.returncode != 0 and "ImportError" in result.stderr
    assert "was already loaded by an earlier import" in result.stderr and "import tensorflow before" in result.stderr
    assert f"LD_PRELOAD={site}/tensorflow.libs/libstdc++.so.6 python" in result.stderr


def test_vendored_folder_comes_first(python36, install):
    site, env = install(**DEPS)
    result = run(python36, site, env, "import tensorflow, fakemod, google.fakeproto as p; print(fakemod.__version__, p.ORIGIN)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2.0", "vendored"]


def test_conflicting_module_already_imported_is_an_error(python36, install):
    site, env = install(**DEPS)
    result = run(python36, site, env, "import fakemod; import tensorflow")
    assert result.returncode != 0 and "ImportError" in result.stderr
    assert f"fakemod 1.0 was already imported from {env}/fakemod" in result.stderr
    assert "needs its own fakemod 2.0" in result.stderr and "import tensorflow before fakemod" in result.stderr


def test_conflict_policy_warn_continues(python36, install):
    site, env = install(**{**DEPS, "conflicts": "warn"})
    result = run(python36, site, env, "import fakemod; import tensorflow; print(fakemod.__version__)")
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning" in result.stderr and result.stdout.split() == ["1.0"]


def test_namespace_made_at_startup_gets_the_vendored_portion_first(python36, install):
    site, env = install(**DEPS)
    code = ("import sys, types; g = types.ModuleType('google'); g.__path__ = [%r]; sys.modules['google'] = g; "
            "import tensorflow, google.fakeproto as p; print(p.ORIGIN, g.__path__[0])" % str(env / "google"))
    result = run(python36, site, env, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["vendored", str(site / "tensorflow.deps" / "google")]


def test_switch_off_does_nothing(python36, install):
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 99], **DEPS)
    result = run(python36, site, env, "import fakemod, tensorflow; " + MAPS, RETF_BOOTSTRAP="0")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_debug_logs_each_decision_with_its_time(python36, install):
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 99], **DEPS)
    result = run(python36, site, env, "import tensorflow", RETF_BOOTSTRAP_DEBUG="1")
    lines = [l for l in result.stderr.splitlines() if l.startswith("retf-bootstrap [")]
    assert any("preloaded" in l for l in lines) and any("first on sys.path" in l for l in lines)
    assert all(" ms] " in l for l in lines) and lines[-1].endswith("bootstrap done")


HINTS = """
import json, sys, types
sys.path.insert(0, sys.argv[1])
import retf_bootstrap as b

class OpError(Exception):
    def __init__(self, node_def, op, message, *args):
        self.message = message

class NotFoundError(OpError):
    pass

class InvalidArgumentError(OpError):
    pass

b._explain_cluster_errors(types.SimpleNamespace(NotFoundError=NotFoundError, InvalidArgumentError=InvalidArgumentError),
                          "tensorflow 9.9+retf.test")
b._explain_cluster_errors(types.SimpleNamespace(NotFoundError=NotFoundError, InvalidArgumentError=InvalidArgumentError),
                          "tensorflow 9.9+retf.test")  # a second import of the bootstrap changes nothing
missing = NotFoundError(None, None, "Op type not registered 'Retf>SparseApplyAdamDenseRef' in binary running on ps0.")
again = NotFoundError(None, None, missing.message)  # what Session._do_call does with an error it re-raises
older = InvalidArgumentError(None, None, "NodeDef missing attrs 'shared_name' from Op<name=VariableV2>\\n"
                             "Additional GRPC error information from remote target /job:ps/replica:0/task:1:\\n:{}")
print(json.dumps({"missing": missing.message, "again": again.message, "older": older.message,
                  "other": NotFoundError(None, None, "Op type not registered 'Foo' in binary").message,
                  "local": InvalidArgumentError(None, None, "NodeDef missing attrs 'x'").message}))
"""


def test_cluster_errors_say_what_to_do(python36):
    result = subprocess.run([str(python36), "-c", HINTS, str(REPO / "bootstrap")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    messages = json.loads(result.stdout)
    assert "retf: Retf>SparseApplyAdamDenseRef is an op of the retf library that tensorflow 9.9+retf.test ships" in messages["missing"]
    assert "Fix: run every task of the cluster" in messages["missing"]
    assert messages["again"] == messages["missing"]
    assert "retf: /job:ps/replica:0/task:1 runs another TensorFlow than this process (tensorflow 9.9+retf.test)" in messages["older"]
    assert messages["other"] == "Op type not registered 'Foo' in binary"
    assert messages["local"] == "NodeDef missing attrs 'x'"


MODE = "import sys; sys.path.insert(0, sys.argv[1]); import retf_bootstrap as b; print(b.sparse_adam_mode({'v1_sparse_adam': 'fused'}))"


@pytest.mark.parametrize("environ, printed", [
    ({}, "fused"),
    ({"RETF_OPS": "0"}, "dense"),  # the op library is off: TensorFlow's own ops, not retf ops nobody can run
    ({"RETF_SPARSE_ADAM": "lazy"}, "lazy"),
    ({"RETF_OPS": "0", "RETF_SPARSE_ADAM": "dense"}, "dense"),
])
def test_sparse_adam_mode_follows_the_op_library_switch(python36, environ, printed):
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    result = subprocess.run([str(python36), "-c", MODE, str(REPO / "bootstrap")], capture_output=True, text=True,
                            env={**variables, **environ})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == printed


def test_sparse_adam_mode_refuses_retf_adam_without_the_library(python36):
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    result = subprocess.run([str(python36), "-c", MODE, str(REPO / "bootstrap")], capture_output=True, text=True,
                            env={**variables, "RETF_OPS": "0", "RETF_SPARSE_ADAM": "fused"})
    assert result.returncode != 0
    assert "RETF_SPARSE_ADAM=fused needs the retf op library, which RETF_OPS=0 leaves unregistered" in result.stderr
