"""Each decision of the bootstrap, in a real Python 3.6 interpreter, on a small fake install."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retfwheel.stages.bootstrap_config import SCHEMA
from retfwheel.stages.sharing import metadata_folder
from retfwheel.wheelfile.injection import bootstrap_block, inject

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "runtime" / "wheel"  # laid out as the wheel: tensorflow._retf imports from here
SYSTEM_RUNTIME = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


@pytest.fixture
def install(tmp_path):
    """Make a site folder holding a bootstrapped 'tensorflow' package; returns a runner."""

    def make(env_version="1.0", env_namespace=True, body="VALUE = 1\n", **config):
        site = tmp_path / "site"
        (site / "tensorflow").mkdir(parents=True)
        settings = {"schema": SCHEMA, "label": "tensorflow 9.9+retf.test", "conflicts": "error", **config}
        init = inject(b'"""TF."""\nfrom __future__ import absolute_import\n' + body.encode(),
                      bootstrap_block("tensorflow._retf", settings), "tensorflow/__init__.py")
        (site / "tensorflow" / "__init__.py").write_bytes(init)
        shutil.copytree(SHIPPED / "tensorflow" / "_retf", site / "tensorflow" / "_retf")
        if settings.get("libstdcxx"):
            (site / "tensorflow.libs").mkdir()
            shutil.copy(SYSTEM_RUNTIME.resolve(), site / "tensorflow.libs" / "libstdc++.so.6")
        deps = site / "tensorflow.deps"
        distribution(deps, "fakemod", "2.0", {"fakemod/__init__.py": "__version__ = '2.0'\n"}, private=True)
        distribution(deps, "fakeproto", "1.0", {"google/fakeproto/__init__.py": "ORIGIN = 'vendored'\n"}, private=True)
        env = tmp_path / "env"
        distribution(env, "fakemod", env_version, {"fakemod/__init__.py": f"__version__ = {env_version!r}\n"})
        if env_namespace:
            distribution(env, "otherproto", "1.0", {"google/otherproto/__init__.py": "ORIGIN = 'environment'\n"})
        else:
            distribution(env, "other", "1.0", {"other/__init__.py": ""})
        return site, env

    return make


def distribution(folder: Path, name: str, version: str, files: dict, private: bool = False) -> None:
    """An installed distribution: its files and a dist-info folder (named as the wheel's private folder names it)."""
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    info = folder / (metadata_folder(name, version) if private else f"{name}-{version}.dist-info")
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def run(python36, site, env, code, **environ):
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    variables.update(environ)
    variables["PYTHONPATH"] = f"{site}:{env}"
    return subprocess.run([str(python36), "-c", code], capture_output=True, text=True, env=variables)


MAPS = "import json; print(json.dumps(sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libstdc++' in line})))"
DEPS = {"deps": "tensorflow.deps", "distributions": [
    {"name": "fakemod", "version": "2.0", "range": ">=2.0,<3", "modules": ["fakemod"],
     "metadata": metadata_folder("fakemod", "2.0")},
    {"name": "fakeproto", "version": "1.0", "range": "", "modules": ["google.fakeproto"],
     "metadata": metadata_folder("fakeproto", "1.0")}]}


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


def test_an_older_runtime_loaded_first_that_tensorflow_can_run_on_is_kept(python36, install):
    """The wheel would like a newer runtime (its op library, or extensions built with a newer GCC) but TensorFlow
    itself runs on the one an earlier import loaded: nothing is refused, nothing preloaded over it."""
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 20],
                        glibcxx_wanted=[3, 4, 99])
    result = run(python36, site, env, "import ctypes; ctypes.CDLL('libstdc++.so.6'); import tensorflow; " + MAPS,
                 RETF_BOOTSTRAP_DEBUG="1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [str(SYSTEM_RUNTIME.resolve())] and "nothing to preload" in result.stderr
    # imported first, the wheel's wish is met: the vendored runtime is preloaded
    result = run(python36, site, env, "import tensorflow; " + MAPS)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [str(site / "tensorflow.libs" / "libstdc++.so.6")]


VERSIONS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tensorflow._retf import runtime
report = []
for path in sys.argv[2:]:
    scanned = sorted({int(m.group(1)) for m in runtime._GLIBCXX.finditer(open(path, "rb").read())})
    report.append({"defined": runtime.defined_versions(path), "version": runtime.glibcxx_version(path),
                   "scanned": scanned, "provides": [n for n in range(10, 40) if runtime.provides(path, (3, 4, n))]})
print(json.dumps(report))
"""


def test_a_runtimes_versions_are_read_from_its_version_definitions_and_agree_with_a_scan(python36, tmp_path):
    """The bootstrap reads a libstdc++'s GLIBCXX versions from its ELF version definitions (a few hundred bytes, not
    a scan of the whole library); a file without them is scanned."""
    other = tmp_path / "libstdc++.so.6"
    other.write_bytes(b"no ELF header\x00GLIBCXX_3.4.21\x00GLIBCXX_3.4.22\x00")
    result = subprocess.run([str(python36), "-c", VERSIONS, str(SHIPPED), str(SYSTEM_RUNTIME.resolve()), str(other)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    system, scanned_only = json.loads(result.stdout)
    assert "GLIBCXX_3.4" in system["defined"] and "CXXABI_1.3" in system["defined"], system["defined"]
    assert system["version"] == [3, 4, max(system["scanned"])] and max(system["scanned"]) >= 25
    assert system["provides"] == [n for n in range(10, 40) if n in system["scanned"]]
    assert scanned_only["defined"] is None and scanned_only["version"] == [3, 4, 22]
    assert scanned_only["provides"] == [21, 22]


def test_an_op_library_the_loaded_runtime_cannot_load_is_left_out_with_the_fix(python36, tmp_path):
    code = ("import ctypes, sys; ctypes.CDLL('libstdc++.so.6'); sys.path.insert(0, sys.argv[1]); import tensorflow._retf.ops as b\n"
            "config = {'label': 'tensorflow 9.9', 'libstdcxx': 'tensorflow.libs/libstdc++.so.6'}\n"
            "print(b._runtime_too_old_for('/site/retf/_retf_ops.so', [3, 4, 20], config))\n"
            "print(b._runtime_too_old_for('/site/retf/_retf_ops.so', [3, 4, 99], config))")
    result = subprocess.run([str(python36), "-c", code, str(SHIPPED)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    fits, left_out = result.stdout.splitlines()
    assert fits == "None"
    assert left_out.startswith("tensorflow 9.9: left out its retf op library /site/retf/_retf_ops.so, which needs "
                               "GLIBCXX_3.4.99: ")
    assert "tf.train's optimizers use TensorFlow's own ops" in left_out
    assert left_out.endswith("start Python with LD_PRELOAD=/site/tensorflow.libs/libstdc++.so.6.")


def test_the_op_librarys_runtime_check_reads_no_mappings_where_the_bootstrap_made_sure_of_its_need(python36):
    """The bootstrap found the system's runtime mapped and read its version: an op library that needs no newer one is
    registered without reading /proc/self/maps again (a thousand lines once TensorFlow is loaded); one that needs
    a newer one is still checked, and left out."""
    code = ("import ctypes, sys; ctypes.CDLL('libstdc++.so.6'); sys.path.insert(0, sys.argv[1])\n"
            "import tensorflow._retf.ops as b; from tensorflow._retf import runtime\n"
            "config = {'label': 'tensorflow 9.9'}\n"
            "print(runtime.PROVIDED)\n"
            "runtime.prepare('/site/tensorflow.libs/libstdc++.so.6', (3, 4, 20), (3, 4, 99), config, lambda m: None)\n"
            "reads = []\n"
            "def counted(read=runtime.mapped_runtimes):\n"
            "    reads.append(1)\n"
            "    return read()\n"
            "runtime.mapped_runtimes = counted\n"
            "print(runtime.PROVIDED, b._runtime_too_old_for('/site/retf/_retf_ops.so', [3, 4, 20], config), len(reads))\n"
            "print(b._runtime_too_old_for('/site/retf/_retf_ops.so', [3, 4, 99], config) is not None, len(reads))")
    result = subprocess.run([str(python36), "-c", code, str(SHIPPED)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    before, fits, newer = result.stdout.splitlines()
    system = subprocess.run([str(python36), "-c", VERSIONS, str(SHIPPED), str(SYSTEM_RUNTIME.resolve())],
                            capture_output=True, text=True)
    version = json.loads(system.stdout)[0]["version"]
    assert before == "()"
    assert fits == f"{tuple(version)} None 0"
    assert newer == "True 1"


def test_a_half_installed_wheel_is_refused_with_the_fix(python36, install):
    """pip writes INSTALLER last: metadata without it, and files RECORD lists missing, is an install killed part-way."""
    site, env = install(dist_info="tensorflow-9.9.dist-info")
    info = site / "tensorflow-9.9.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("tensorflow/__init__.py,,\ntensorflow/python/eager/context.py,sha256=x,1\n"
                                 "tensorflow-9.9.dist-info/RECORD,,\n")
    result = run(python36, site, env, "import tensorflow")
    assert result.returncode != 0
    assert ("tensorflow 9.9+retf.test is half-installed: 1 of its 3 files are missing "
            "(tensorflow/python/eager/context.py, ...)") in result.stderr
    assert "Fix: pip install --force-reinstall --no-deps <its .whl file>, or pip uninstall -y tensorflow" in result.stderr
    (site / "tensorflow" / "python" / "eager").mkdir(parents=True)
    (site / "tensorflow" / "python" / "eager" / "context.py").write_text("")
    assert run(python36, site, env, "import tensorflow").returncode == 0  # every file there: no INSTALLER is fine
    (site / "tensorflow" / "python" / "eager" / "context.py").unlink()
    (info / "INSTALLER").write_text("pip\n")
    assert run(python36, site, env, "import tensorflow").returncode == 0  # installed: never checked file by file


def test_the_bootstrap_leaves_what_only_a_checkpoint_save_needs_to_tensorflow(python36, install):
    """The heap trim's threading is imported when TensorFlow imports the saver (which TensorFlow's own start-up
    does after importing threading), not in the bootstrap every process runs before TensorFlow."""
    site, env = install()
    result = run(python36, site, env, "import sys, tensorflow; print(sorted({'threading', 'ctypes'} & set(sys.modules)))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]"]


@pytest.mark.parametrize("before, environ, expected", [
    ("", {}, ["False", "True", "True"]),  # paused for the package's code, then on and collected
    ("gc.disable(); ", {}, ["False", "False", "False"]),  # the process's own choice is kept, and nothing collected
    ("", {"RETF_DEFER_GC": "0"}, ["True", "True", None]),  # collected or not, as the collector's counts fall
    ("", {"RETF_BOOTSTRAP": "0"}, ["True", "True", None]),
])
def test_the_garbage_collector_is_paused_for_the_import_only(python36, install, before, environ, expected):
    site, env = install(body="import builtins, gc\nbuiltins.DURING = gc.isenabled()\n"
                             "class Cycle(object):\n    pass\nCYCLE = Cycle()\nCYCLE.me = CYCLE\n"
                             "import weakref\nREF = weakref.ref(CYCLE)\ndel CYCLE\n")
    code = ("import gc; " + before + "import builtins, tensorflow\n"
            "print(builtins.DURING, gc.isenabled(), tensorflow.REF() is None)")
    result = run(python36, site, env, code, **environ)
    assert result.returncode == 0, result.stderr
    assert [seen if want is not None else None for seen, want in zip(result.stdout.split(), expected)] == expected


@pytest.mark.parametrize("error", ["ImportError('broken')", "KeyboardInterrupt"])
def test_the_garbage_collector_is_back_on_however_the_import_ends(python36, install, error):
    site, env = install(body=f"import builtins, gc\nbuiltins.DURING = gc.isenabled()\nraise {error}\n")
    code = ("import builtins, gc\ntry:\n    import tensorflow\nexcept BaseException as exc:\n"
            "    print(type(exc).__name__, builtins.DURING, gc.isenabled())")
    result = run(python36, site, env, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [error.split("(")[0], "False", "True"]


def test_tf_lite_runs_its_code_on_first_use_and_stays_bound_as_tf_lite(python36, install):
    """The API module binds on import (as TensorFlow's __init__ binds tf.lite) and runs on its first attribute; the
    converter it imports then does not bind the package tensorflow.lite over tf.lite."""
    site, env = install()
    files = {"_api/__init__.py": "", "_api/v2/__init__.py": "",
             "_api/v2/lite/__init__.py": "import builtins\nbuiltins.LITE_RAN = True\n"
                                         "from tensorflow.lite.python.lite import Converter\n",
             "lite/__init__.py": "", "lite/python/__init__.py": "", "lite/python/lite.py": "Converter = 'converter'\n"}
    for name, text in files.items():
        (site / "tensorflow" / name).parent.mkdir(parents=True, exist_ok=True)
        (site / "tensorflow" / name).write_text(text)
    code = ("import builtins, tensorflow\nfrom tensorflow._api.v2 import lite\ntensorflow.lite = lite\n"
            "ran = hasattr(builtins, 'LITE_RAN')\nprint(ran, tensorflow.lite.Converter, builtins.LITE_RAN, "
            "tensorflow.lite is lite)")
    result = run(python36, site, env, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "converter", "True", "True"]
    result = run(python36, site, env, code, RETF_BOOTSTRAP="0")  # TensorFlow's own: its code runs on import
    assert result.stdout.split() == ["True", "converter", "True", "True"]


WHERE = "import json, sys; print(json.dumps({m: sys.modules[m].__file__ for m in sys.argv[1:]}))"


def test_a_distribution_the_environment_lacks_or_has_out_of_range_is_served_privately(python36, install):
    site, env = install(**DEPS)  # the environment's fakemod 1.0 is outside >=2.0,<3; it has no fakeproto
    result = run(python36, site, env, "import tensorflow, fakemod, google.fakeproto, google.otherproto\n" + WHERE)
    assert result.returncode == 0, result.stderr
    assert "fakemod 1.0" not in result.stderr
    code = ("import tensorflow, fakemod, google.fakeproto, google.otherproto; "
            "print(fakemod.__version__, google.fakeproto.ORIGIN, google.otherproto.ORIGIN)")
    assert run(python36, site, env, code).stdout.split() == ["2.0", "vendored", "environment"]


def test_a_lazy_private_distribution_runs_its_code_on_first_use(python36, install):
    """A served module named in the settings' lazy list (requests, in a real build) binds on import and runs later."""
    site, env = install(lazy=["fakemod"], **DEPS)  # served privately: the environment's 1.0 is out of range
    code = "import tensorflow, fakemod; kind = type(fakemod).__name__; print(kind, fakemod.__version__)"
    result = run(python36, site, env, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["_LazyModule", "2.0"]


def test_a_namespace_package_the_environment_lacks_comes_with_its_private_modules(python36, install):
    """A plain environment without any google/ (protobuf 4 and google-auth are namespace packages): google.fakeproto
    is still served, and the environment's own top-level modules are unaffected."""
    site, env = install(env_namespace=False, **DEPS)
    code = "import tensorflow, google.fakeproto, other; print(google.fakeproto.ORIGIN, other.__file__.startswith(%r))"
    result = run(python36, site, env, code % str(env))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["vendored", "True"]
    assert "google" not in run(python36, site, env, "import sys, tensorflow; print(sorted(sys.modules))").stdout


def test_the_environments_copy_in_range_serves_tensorflow_and_the_user(python36, install):
    site, env = install(env_version="2.5", **DEPS)
    code = "import tensorflow, fakemod; print(fakemod.__version__, fakemod.__file__)"
    result = run(python36, site, env, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2.5", str(env / "fakemod" / "__init__.py")]
    # and imported before tensorflow, it is accepted as it is
    assert run(python36, site, env, "import fakemod, tensorflow; print(fakemod.__version__)").stdout.split() == ["2.5"]


def test_equal_versions_are_equal_as_pep_440_says(python36, install):
    deps = {**DEPS, "distributions": [{"name": "fakemod", "version": "2025.4.26", "range": "==2025.4.26",
                                       "modules": ["fakemod"], "metadata": metadata_folder("fakemod", "2025.4.26")}]}
    site, env = install(env_version="2025.04.26", **deps)
    result = run(python36, site, env, "import fakemod, tensorflow; print(fakemod.__version__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2025.04.26"]


def test_pkg_resources_answers_with_what_is_imported(python36, install):
    site, env = install(**DEPS)
    code = ("import pkg_resources, tensorflow, pkg_resources as p, sys; print(p.get_distribution('fakemod').version, "
            "p.get_distribution('otherproto').version, any('tensorflow.deps' in entry for entry in sys.path))")
    before = run(python36, site, env, code)
    assert before.returncode == 0, before.stderr
    after = run(python36, site, env, code.replace("import pkg_resources, tensorflow,", "import tensorflow,"))
    assert after.returncode == 0, after.stderr
    assert before.stdout.split() == after.stdout.split() == ["2.0", "1.0", "False"]


def test_conflicting_module_already_imported_is_an_error(python36, install):
    site, env = install(**DEPS)
    result = run(python36, site, env, "import fakemod; import tensorflow")
    assert result.returncode != 0 and "ImportError" in result.stderr
    assert (f"fakemod 1.0 was already imported from {env}/fakemod, but this TensorFlow needs fakemod >=2.0,<3 "
            "(it ships fakemod 2.0)") in result.stderr
    assert "Fix: import tensorflow before fakemod, or install a version in the range" in result.stderr
    assert "pip install 'fakemod>=2.0,<3'" in result.stderr


def test_conflict_policy_warn_continues(python36, install):
    site, env = install(**{**DEPS, "conflicts": "warn"})
    result = run(python36, site, env, "import fakemod; import tensorflow; print(fakemod.__version__)")
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning" in result.stderr and result.stdout.split() == ["1.0"]


def test_settings_of_another_schema_are_refused(python36, install):
    site, env = install(schema=1, **DEPS)
    result = run(python36, site, env, "import tensorflow")
    assert result.returncode != 0
    assert f"its bootstrap settings are of schema 1, but its bootstrap reads schema {SCHEMA}" in result.stderr
    assert "Fix: rebuild it with retfwheel" in result.stderr


def test_the_tool_and_the_bootstrap_agree_on_the_schema():
    from retfwheel.errors import AuditError
    from retfwheel.stages.bootstrap_config import SCHEMA, check_bootstrap_schema

    source = (SHIPPED / "tensorflow" / "_retf" / "__init__.py").read_bytes()
    check_bootstrap_schema(source, "runtime/wheel/tensorflow/_retf/__init__.py")
    with pytest.raises(AuditError, match=f"schema {SCHEMA + 1}, but this retfwheel writes schema {SCHEMA}"):
        check_bootstrap_schema(source.replace(f"SCHEMA = {SCHEMA}".encode(), f"SCHEMA = {SCHEMA + 1}".encode()), "x")


def test_switch_off_does_nothing(python36, install):
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 99], **DEPS)
    result = run(python36, site, env, "import fakemod, tensorflow; " + MAPS, RETF_BOOTSTRAP="0")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


SAVER = '''class Saver(object):
    def save(self, sess, save_path):
        """Saves variables."""
        return save_path
'''


@pytest.mark.parametrize("environ, wrapped", [({}, True), ({"RETF_HEAP_TRIM": "0"}, False)])
def test_saver_save_returns_the_free_heap_while_and_after_it_saves(python36, install, environ, wrapped):
    site, env = install()
    training = site / "tensorflow" / "python" / "training"
    training.mkdir(parents=True)
    for package in (site / "tensorflow" / "python", training):
        (package / "__init__.py").write_text("")
    (training / "saver.py").write_text(SAVER)
    code = ("import json, tensorflow; from tensorflow.python.training import saver; save = saver.Saver.save; "
            "print(json.dumps([saver.Saver().save(None, 'ckpt'), save.__name__, save.__doc__, "
            "hasattr(save, '__wrapped__')]))")
    result = run(python36, site, env, code, **environ)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["ckpt", "save", "Saves variables.", wrapped]


# A native library inside the package, loaded as TensorFlow's pywrap_tensorflow loads its own: its resident
# kilobytes at load, read from /proc/self/smaps.
PYWRAP = '''import ctypes, os
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native.so")


def resident():
    kilobytes, ours = 0, False
    for line in open("/proc/self/smaps"):
        fields = line.split()
        if "-" in fields[0] and not fields[0].endswith(":"):
            ours = fields[-1] == os.path.realpath(PATH)
        elif ours and fields[0] == "Rss:":
            kilobytes += int(fields[1])
    return kilobytes


LIB = ctypes.CDLL(PATH)
AT_LOAD = resident()
'''


@pytest.mark.parametrize("environ, released", [({}, True), ({"RETF_PAGE_TRIM": "0"}, False)])
def test_a_native_librarys_clean_pages_are_given_back_once_it_has_loaded(python36, install, environ, released):
    site, env = install()
    python = site / "tensorflow" / "python"
    python.mkdir()
    (python / "__init__.py").write_text("")
    (python / "pywrap_tensorflow.py").write_text(PYWRAP)
    shutil.copy(Path("/lib/x86_64-linux-gnu/libz.so.1").resolve(), python / "_native.so")
    code = ("import ctypes, json, tensorflow; from tensorflow.python import pywrap_tensorflow as p; "
            "after = p.resident(); p.LIB.zlibVersion.restype = ctypes.c_char_p; "
            "print(json.dumps([p.AT_LOAD, after, p.LIB.zlibVersion().decode(), p.resident()]))")
    result = run(python36, site, env, code, **environ)
    assert result.returncode == 0, result.stderr
    at_load, after_import, version, after_a_call = json.loads(result.stdout)
    assert at_load > 0 and version.startswith("1.")
    if released:  # what the relocations wrote stays; the file's own pages come back as they are used
        assert after_import < at_load and after_import <= after_a_call, (at_load, after_import, after_a_call)
    else:
        assert after_import == at_load


def test_only_read_only_mappings_holding_no_page_of_their_own_are_given_back(python36, tmp_path):
    smaps = tmp_path / "smaps"
    mapping = "{} {} 00000000 08:01 1 {}\nRss: 64 kB\nAnonymous: {} kB\n"
    smaps.write_text("".join([
        mapping.format("1000-2000", "r-xp", "/site/tensorflow/python/_lib.so", 0),  # given back
        mapping.format("2000-3000", "r--p", "/site/tensorflow/python/_lib.so", 4),  # relocated data
        mapping.format("3000-4000", "rw-p", "/site/tensorflow/python/_lib.so", 0),  # writable
        mapping.format("4000-5000", "r--p", "/site/tensorflow/libtensorflow_framework.so.2", 0),  # given back
        mapping.format("5000-6000", "r-xs", "/site/tensorflow/python/_shared.so", 0),  # shared
        mapping.format("6000-7000", "r-xp", "/site/numpy/core/_multiarray.so", 0),  # not TensorFlow's
        mapping.format("7000-8000", "r--p", "/site/tensorflow/python/data.bin", 0),  # not a library
        "8000-9000 rw-p 00000000 00:00 0\nRss: 4 kB\nAnonymous: 4 kB\n"]))
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from tensorflow._retf import pages; "
            "print(json.dumps(pages.clean_library_mappings('/site/tensorflow/', sys.argv[2])))")
    result = subprocess.run([str(python36), "-c", code, str(SHIPPED), str(smaps)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [[0x1000, 0x2000], [0x4000, 0x5000]]


def test_debug_logs_each_decision_with_its_time(python36, install):
    site, env = install(libstdcxx="tensorflow.libs/libstdc++.so.6", glibcxx_needed=[3, 4, 99], **DEPS)
    result = run(python36, site, env, "import tensorflow", RETF_BOOTSTRAP_DEBUG="1")
    lines = [line for line in result.stderr.splitlines() if line.startswith("retf-bootstrap [")]
    assert any("preloaded" in line for line in lines) and any("fakemod: private 2.0 (needs >=2.0,<3" in line for line in lines)
    assert all(" ms] " in line for line in lines) and lines[-1].endswith("bootstrap done")


HINTS = """
import json, sys, types
sys.path.insert(0, sys.argv[1])
import tensorflow._retf.ops as b

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
    result = subprocess.run([str(python36), "-c", HINTS, str(SHIPPED)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    messages = json.loads(result.stdout)
    assert "retf: Retf>SparseApplyAdamDenseRef is an op of the retf library that tensorflow 9.9+retf.test ships" in messages["missing"]
    assert "Fix: run every task of the cluster" in messages["missing"]
    assert messages["again"] == messages["missing"]
    assert "retf: /job:ps/replica:0/task:1 runs another TensorFlow than this process (tensorflow 9.9+retf.test)" in messages["older"]
    assert messages["other"] == "Op type not registered 'Foo' in binary"
    assert messages["local"] == "NodeDef missing attrs 'x'"


# The bootstrap reads a switch from the settings the build writes: made here by the tool's own table.
SWITCH = ("import json, sys; sys.path.insert(0, sys.argv[1]); import tensorflow._retf.switches as b; "
          "print(b.switch({'features': json.loads(sys.argv[2])}, sys.argv[3]))")


def run_switch(python36, key: str, value: str, environ: dict[str, str]) -> subprocess.CompletedProcess:
    from retfwheel.features import BY_KEY, DEFAULTS, block_settings

    settings = block_settings(tuple((k, value if k == key else v) for k, v in DEFAULTS), BY_KEY[key].block)
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    return subprocess.run([str(python36), "-c", SWITCH, str(SHIPPED), json.dumps(settings), key],
                          capture_output=True, text=True, env={**variables, **environ})


@pytest.mark.parametrize("environ, printed", [
    ({}, "fused"),
    ({"RETF_OPS": "0"}, "dense"),  # the op library is off: TensorFlow's own ops, not retf ops nobody can run
    ({"RETF_SPARSE_ADAM": "lazy"}, "lazy"),
    ({"RETF_OPS": "0", "RETF_SPARSE_ADAM": "dense"}, "dense"),
])
def test_sparse_adam_follows_the_op_library_switch(python36, environ, printed):
    result = run_switch(python36, "sparse_adam", "fused", environ)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == printed


@pytest.mark.parametrize("environ, message", [
    ({"RETF_OPS": "0", "RETF_SPARSE_ADAM": "fused"},
     "RETF_SPARSE_ADAM=fused needs the retf op library, which RETF_OPS=0 leaves unregistered"),
    ({"RETF_SPARSE_ADAM": "eager"}, "RETF_SPARSE_ADAM=eager is not one of dense, fused, lazy (how tf.train.AdamOptimizer"),
])
def test_sparse_adam_refuses_what_cannot_work(python36, environ, message):
    result = run_switch(python36, "sparse_adam", "fused", environ)
    assert result.returncode != 0
    assert message in result.stderr


# Each fused path's switch: its key in the features table, and its environment variable.
SWITCHES = [("fused_sparse", "RETF_FUSED_SPARSE"), ("fused_embedding", "RETF_FUSED_EMBEDDING"),
            ("fused_matmul_grad", "RETF_FUSED_MATMUL_GRAD"), ("fast_decode_csv", "RETF_FAST_DECODE_CSV"),
            ("large_block_allocator", "RETF_LARGE_BLOCK_ALLOCATOR"), ("fused_concat_grad", "RETF_FUSED_CONCAT_GRAD"),
            ("fused_gru", "RETF_FUSED_GRU"), ("small_batch_matmul", "RETF_SMALL_BATCH_MATMUL"),
            ("pair_dense_linear", "RETF_PAIR_DENSE_LINEAR"), ("batch_moments", "RETF_BATCH_MOMENTS"),
            ("layer_norm_kernels", "RETF_LAYER_NORM_KERNELS"), ("fast_bias_grad", "RETF_FAST_BIAS_GRAD")]
# The switches whose values keep to TensorFlow's own ops: the op library being off changes nothing.
OPS_FREE_SWITCHES = [("layer_norm_moments", "RETF_LAYER_NORM_MOMENTS")]


def test_every_switch_with_a_variable_is_tested_here():
    from retfwheel.features import FEATURES

    assert {(f.key, f.env) for f in FEATURES if f.env and f.on_off and f.needs_ops} == set(SWITCHES)
    assert {(f.key, f.env) for f in FEATURES if f.env and f.on_off and not f.needs_ops} == set(OPS_FREE_SWITCHES)


@pytest.mark.parametrize("switch, variable", SWITCHES)
@pytest.mark.parametrize("recipe, environ, printed", [
    ("1", {}, "1"),
    ("0", {}, "0"),
    ("1", {"RETF_OPS": "0"}, "0"),  # the op library is off: TensorFlow's own ops
    ("1", {"VARIABLE": "0"}, "0"),
    ("0", {"VARIABLE": "1"}, "1"),
])
def test_fused_switches_follow_their_variables(python36, switch, variable, recipe, environ, printed):
    environ = {variable if k == "VARIABLE" else k: v for k, v in environ.items()}
    result = run_switch(python36, switch, recipe, environ)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == printed


@pytest.mark.parametrize("switch, variable", OPS_FREE_SWITCHES)
@pytest.mark.parametrize("recipe, environ, printed", [
    ("1", {}, "1"),
    ("0", {}, "0"),
    ("1", {"RETF_OPS": "0"}, "1"),  # TensorFlow's own ops either way: the op library does not matter
    ("0", {"RETF_OPS": "0", "VARIABLE": "1"}, "1"),
    ("1", {"VARIABLE": "0"}, "0"),
    ("0", {"VARIABLE": "1"}, "1"),
])
def test_ops_free_switches_follow_their_variables_with_or_without_the_op_library(python36, switch, variable, recipe,
                                                                                 environ, printed):
    environ = {variable if k == "VARIABLE" else k: v for k, v in environ.items()}
    result = run_switch(python36, switch, recipe, environ)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == printed


@pytest.mark.parametrize("switch, variable", SWITCHES + OPS_FREE_SWITCHES)
def test_switches_refuse_a_value_they_do_not_take(python36, switch, variable):
    result = run_switch(python36, switch, "0", {variable: "yes"})
    assert result.returncode != 0
    assert f"{variable}=yes is not 0 or 1" in result.stderr


@pytest.mark.parametrize("switch, variable", SWITCHES)
def test_fused_switches_refuse_to_run_without_the_op_library(python36, switch, variable):
    result = run_switch(python36, switch, "0", {variable: "1", "RETF_OPS": "0"})
    assert result.returncode != 0
    assert f"{variable}=1 needs the retf op library" in result.stderr


DEEPREC = """
import sys, types
sys.path.insert(0, sys.argv[1])
import tensorflow._retf.v1_api as b
module = types.ModuleType("train")
module.AdamOptimizer = object
b._deeprec_optimizers(module, False, "tensorflow 9.9")
try:
    module.AdamAsyncOptimizer
except AttributeError as error:
    print(error)
try:
    module.Nothing
except AttributeError as error:
    print(error)
print(module.AdamOptimizer is object)
"""


def test_deeprec_names_without_their_switch_name_it(python36):
    result = subprocess.run([str(python36), "-c", DEEPREC, str(SHIPPED)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tf.train.AdamAsyncOptimizer is one of DeepRec's optimizers, which this TensorFlow "
                               "(tensorflow 9.9) provides only when built with deeprec_api = true (or "
                               "deeprec_optimizers = true)")
    assert lines[1] == "module 'train' has no attribute 'Nothing'"
    assert lines[2] == "True"


DEFAULTS = ("import os, sys; sys.path.insert(0, sys.argv[1]); import tensorflow._retf as b; "
            "b._apply_runtime_defaults({'TF_CPU_ALLOCATOR_USE_BFC': 'true'}, b._Log(False)); "
            "print(os.environ.get('TF_CPU_ALLOCATOR_USE_BFC'))")


@pytest.mark.parametrize("environ, printed", [
    ({}, "true"),  # the recipe's [runtime_env] default
    ({"TF_CPU_ALLOCATOR_USE_BFC": "false"}, "false"),  # the user's own setting wins
    ({"RETF_RUNTIME_DEFAULTS": "0"}, "None"),  # no defaults at all
])
def test_runtime_defaults_are_set_unless_the_user_chose(python36, environ, printed):
    variables = {k: v for k, v in os.environ.items() if not k.startswith(("RETF_", "TF_CPU"))}
    result = subprocess.run([str(python36), "-c", DEFAULTS, str(SHIPPED)], capture_output=True, text=True,
                            env={**variables, **environ})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == printed


@pytest.mark.parametrize("module, call", [("ops", "register_ops"), ("v1_api", "expose_v1_api")])
def test_each_injected_call_refuses_settings_of_another_schema(python36, module, call):
    code = (f"import sys; sys.path.insert(0, sys.argv[1]); import tensorflow._retf.{module} as b; "
            f"b.{call}({{'__file__': 'x'}}, {{'schema': {SCHEMA - 1}, 'label': 'tensorflow 9.9'}})")
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RETF_")}
    result = subprocess.run([str(python36), "-c", code, str(SHIPPED)], capture_output=True, text=True,
                            env=variables)
    assert result.returncode != 0
    assert (f"ImportError: tensorflow 9.9: its bootstrap settings are of schema {SCHEMA - 1}, but its bootstrap reads "
            f"schema {SCHEMA}") in result.stderr


def test_the_keras_bridge_patches_the_keras_tf_keras_comes_from_and_never_a_users_own():
    code = ("import sys, types; sys.path.insert(0, sys.argv[1])\n"
            "from tensorflow._retf.keras_bridge import keras_package\n"
            "print([keras_package(types.ModuleType(name)) for name in sys.argv[2:]])")
    names = ["keras.api._v1.keras", "tensorflow._vendor.keras.api._v1.keras", "tensorflow._api.v2.compat.v1.keras",
             "tensorflow.python.keras.api._v1.keras"]
    run = subprocess.run([sys.executable, "-c", code, str(SHIPPED), *names],
                         capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "['keras', 'tensorflow._vendor.keras', None, None]"
