"""Runs first in a retfwheel-built TensorFlow, before any TensorFlow native code loads (Python 3.6 syntax,
standard library only; tensorflow/__init__.py calls it with the build's settings).

It makes the wheel's vendored C++ runtime and Python dependencies the ones this process uses, or
explains exactly why it cannot. One module per job:

- this package: the settings' schema, and `run`, the call tensorflow/__init__.py makes first
- collector: the garbage collector, paused while `import tensorflow` runs (run returns the call that resumes it)
- runtime: the C++ runtime (a libstdc++ TensorFlow's native code can run on)
- routing: the vendored Python dependencies (the environment's copy where it fits, else the private one)
- versions: PEP 440 versions and ranges, judged as pip judges them
- imports: running code right after a module loads, and API modules (tf.lite) whose code runs on first use
- heap: returning the free heap TensorFlow 2.x's checkpoint writes leave behind
- pages: giving back the pages of TensorFlow's native libraries that only their loading read
- tf1_libraries: explaining a library built for TensorFlow 1.x that fails to load
- tf115_names: TF 1.15's private names that TF 1.x-era libraries use (standalone Keras 2.3, TensorBoard 1.15)
- switches: the build's switches and the variables that override them; whether retf's ops run here
- ops: registering the retf op library while `import tensorflow` runs (its injected call: register_ops)
- v1_api: the TF 1.x API as `import tensorflow` (its injected call: expose_v1_api), with keras_bridge
  (one Keras) and tf115_export (exports in TF 1.15's form)

Environment variables: RETF_BOOTSTRAP=0 does nothing; RETF_BOOTSTRAP_DEBUG=1 logs each decision and
its time to stderr; RETF_RUNTIME_DEFAULTS=0 keeps the build's runtime defaults out of the environment;
RETF_API=2 keeps the 2.x API in a 1.x API build; RETF_OPS=0 leaves the retf op library unregistered;
RETF_HEAP_TRIM=0 leaves the heap as TensorFlow's checkpoint saves leave it; RETF_PAGE_TRIM=0 leaves resident the
pages of TensorFlow's native libraries that only their loading read; RETF_DEFER_GC=0 keeps the garbage collector
running while `import tensorflow` runs.
The switches and the variables that override them are not named here: the build declares them in
its settings (retfwheel's features table, docs/reference.md), and switches.switch() reads them by key.
"""


import os
import sys
import time

SCHEMA = 6  # the settings this bootstrap reads (retfwheel's stages/bootstrap_config.py writes them)
HINT_MARK = "\nretf: "  # between TensorFlow's message and what retf adds to it


class _Log(object):
    def __init__(self, enabled):
        self.enabled = enabled
        self.start = time.perf_counter()

    def __call__(self, message):
        if self.enabled:
            sys.stderr.write("retf-bootstrap [%6.2f ms] %s\n" % ((time.perf_counter() - self.start) * 1e3, message))


def check_schema(config):
    """ImportError unless ``config`` (the settings of one injected call) is of the schema this bootstrap reads."""
    if config.get("schema") != SCHEMA:
        raise ImportError("%s: its bootstrap settings are of schema %s, but its bootstrap reads schema %s; the "
                          "wheel was patched by hand or half-rebuilt. Fix: rebuild it with retfwheel."
                          % (config.get("label", "this TensorFlow"), config.get("schema"), SCHEMA))


# TensorFlow's API modules whose code runs when a program first reads one of their attributes, not during `import
# tensorflow`: tf.lite's (in the 2.x API, and under tf.compat.v1 and tf.compat.v2) import TensorFlow Lite's
# converter and load its audio front-end's op library, about 70 ms of a 2-second import that training and
# serving programs never use; TF 1.15's import loads neither. The package tensorflow.lite (an empty __init__.py)
# is imported first: imported by the converter's first use, it would be bound over tf.lite.
ON_FIRST_USE = ("tensorflow._api.v2.lite", "tensorflow._api.v2.compat.v1.lite", "tensorflow._api.v2.compat.v2.lite")
IMPORT_FIRST = ("tensorflow.lite",)


def run(package_dir, config):
    """Prepare this process for TensorFlow; raise ImportError when that cannot work.

    Returns what tensorflow/__init__.py calls once its own code has run, however that ends: None, or the call that
    resumes the garbage collector (collector.pause)."""
    if os.environ.get("RETF_BOOTSTRAP", "1") == "0":
        return None
    check_schema(config)
    from . import collector, heap, imports, routing, runtime, tf1_libraries, tf115_names
    log = _Log(os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"))
    site = os.path.dirname(os.path.abspath(package_dir))
    log("%s: bootstrap starts" % config["label"])
    if config.get("dist_info"):
        _refuse_an_interrupted_install(site, config)
    _apply_runtime_defaults(config.get("env", {}), log)
    if config.get("libstdcxx"):
        runtime.prepare(os.path.join(site, config["libstdcxx"]), tuple(config["glibcxx_needed"]),
                        tuple(config.get("glibcxx_wanted") or config["glibcxx_needed"]), config, log)
    if config.get("deps"):
        routing.prepare(os.path.realpath(os.path.join(site, config["deps"])), config, log)
    imports.after_import("tensorflow.python.framework.load_library", lambda module: tf1_libraries.explain(module, config))
    imports.after_import("tensorflow.python.framework.ops", tf115_names.tensor_like)
    imports.after_import("tensorflow.python.pywrap_tensorflow", lambda module: _native_library_loaded(module, package_dir))
    imports.after_import("tensorflow.python.training.saver", heap.trim_while_saving)
    imports.on_first_use(ON_FIRST_USE, IMPORT_FIRST)
    log("bootstrap done")
    return collector.pause()  # last: nothing above can raise with the collector off


def _native_library_loaded(pywrap_tensorflow, package_dir):
    """Right after TensorFlow's native library has loaded (tensorflow.python.pywrap_tensorflow imported)."""
    from . import pages, tf115_names
    tf115_names.record_reader(pywrap_tensorflow)
    pages.release_loaded_libraries(package_dir)


def _refuse_an_interrupted_install(site, config):
    """ImportError when an install of this wheel was killed part-way: pip writes INSTALLER last, and until then the
    metadata it has copied makes pip take the half-written package for installed ("Requirement already satisfied")."""
    info = os.path.join(site, config["dist_info"])
    if os.path.isfile(os.path.join(info, "INSTALLER")) or not os.path.isdir(info):
        return
    import csv
    try:
        with open(os.path.join(info, "RECORD"), newline="") as handle:
            paths = [row[0] for row in csv.reader(handle) if row]
    except OSError:
        return
    missing = [path for path in paths if not os.path.exists(os.path.join(site, path))]
    if missing:  # an installer that writes no INSTALLER, and wrote every file, is fine
        raise ImportError(
            "%s is half-installed: %d of its %d files are missing (%s, ...), as when a pip install is stopped "
            "part-way, and pip takes it for installed.\nFix: pip install --force-reinstall --no-deps <its .whl file>, "
            "or pip uninstall -y %s and install the TensorFlow you want."
            % (config["label"], len(missing), len(paths), missing[0], config["label"].split()[0]))


def _apply_runtime_defaults(defaults, log):
    if not defaults or os.environ.get("RETF_RUNTIME_DEFAULTS", "1") == "0":
        return
    for name, value in sorted(defaults.items()):
        if name in os.environ:
            log("runtime default %s: kept the user's %s" % (name, os.environ[name]))
        else:
            os.environ[name] = value
            log("runtime default %s=%s" % (name, value))
