"""Runs first in a retfwheel-built TensorFlow, before any TensorFlow native code loads.

It makes the wheel's vendored C++ runtime and Python dependencies the ones this process uses, or
explains exactly why it cannot. Python 3.6 syntax, standard library only: this file ships inside
the produced wheel as tensorflow/_retf_bootstrap.py and is called from tensorflow/__init__.py with
the build's settings.

Environment switches: RETF_BOOTSTRAP=0 does nothing; RETF_BOOTSTRAP_DEBUG=1 logs each decision and
its time to stderr; RETF_RUNTIME_DEFAULTS=0 keeps the build's runtime defaults (e.g.
TF_CPU_ALLOCATOR_USE_BFC) out of the environment (a variable the user set always wins); in a wheel
built with the 1.x API, RETF_API=2 keeps the 2.x API and RETF_SPARSE_ADAM=dense|fused|lazy picks
how tf.train.AdamOptimizer applies sparse gradients (the recipe's v1_sparse_adam otherwise); in a wheel
that ships the retf op library, RETF_OPS=0 leaves it unregistered (and sparse Adam on TensorFlow's ops).
"""

import os
import re
import struct
import sys
import time

_GLIBCXX = re.compile(rb"GLIBCXX_3\.4\.(\d+)\x00")
_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                 "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
SONAME = "libstdc++.so.6"


class _Log(object):
    def __init__(self, enabled):
        self.enabled = enabled
        self.start = time.perf_counter()

    def __call__(self, message):
        if self.enabled:
            sys.stderr.write("retf-bootstrap [%6.2f ms] %s\n" % ((time.perf_counter() - self.start) * 1e3, message))


def run(package_dir, config):
    """Prepare this process for TensorFlow; raise ImportError when that cannot work."""
    if os.environ.get("RETF_BOOTSTRAP", "1") == "0":
        return
    log = _Log(os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"))
    site = os.path.dirname(os.path.abspath(package_dir))
    log("%s: bootstrap starts" % config["label"])
    _apply_runtime_defaults(config.get("env", {}), log)
    if config.get("libstdcxx"):
        _prepare_runtime(os.path.join(site, config["libstdcxx"]), tuple(config["glibcxx_needed"]), config, log)
    if config.get("deps"):
        _prepare_dependencies(os.path.join(site, config["deps"]), config, log)
    log("bootstrap done")


def _apply_runtime_defaults(defaults, log):
    if not defaults or os.environ.get("RETF_RUNTIME_DEFAULTS", "1") == "0":
        return
    for name, value in sorted(defaults.items()):
        if name in os.environ:
            log("runtime default %s: kept the user's %s" % (name, os.environ[name]))
        else:
            os.environ[name] = value
            log("runtime default %s=%s" % (name, value))


# --- the C++ runtime ---------------------------------------------------------------------------

def glibcxx_version(path):
    """Newest GLIBCXX_3.4.N the library at ``path`` mentions, as a tuple, or None."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    found = [int(m.group(1)) for m in _GLIBCXX.finditer(data)]
    return (3, 4, max(found)) if found else None


def mapped_runtimes():
    """Paths of every libstdc++ already mapped into this process."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if "/libstdc++.so" in path and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


def system_runtime():
    """The libstdc++.so.6 the dynamic loader would pick: LD_LIBRARY_PATH, ld.so.cache, default dirs."""
    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if folder and os.path.isfile(os.path.join(folder, SONAME)):
            return os.path.join(folder, SONAME)
    for path in _cache_entries(SONAME):
        if _is_native_elf(path):
            return path
    for folder in _DEFAULT_DIRS:
        path = os.path.join(folder, SONAME)
        if _is_native_elf(path):
            return path
    return None


def _cache_entries(soname):
    try:
        with open("/etc/ld.so.cache", "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    base = data.find(_CACHE_MAGIC)
    if base < 0:
        return []
    count = struct.unpack_from("<I", data, base + 20)[0]
    entries = []
    key = soname.encode()
    for index in range(count):
        _flags, name_at, path_at = struct.unpack_from("<iII", data, base + 48 + 24 * index)
        if data[base + name_at:base + name_at + len(key) + 1] == key + b"\x00":
            end = data.index(b"\x00", base + path_at)
            entries.append(data[base + path_at:end].decode("utf-8", "replace"))
    return entries


def _is_native_elf(path):
    try:
        with open(path, "rb") as handle:
            head = handle.read(5)
    except OSError:
        return False
    return head[:4] == b"\x7fELF" and head[4] == (2 if sys.maxsize > 2 ** 32 else 1)


def _text(version):
    return "GLIBCXX_" + ".".join(str(p) for p in version) if version else "unknown version"


def _prepare_runtime(vendored, needed, config, log):
    vendored_real = os.path.realpath(vendored)
    mapped = mapped_runtimes()
    log("mapped libstdc++: %s" % (", ".join(mapped) or "none"))
    for path in mapped:
        if os.path.realpath(path) == vendored_real:
            log("the vendored libstdc++ is already loaded")
            return
    if mapped:
        version = glibcxx_version(mapped[0])
        if version is not None and version >= needed:
            log("loaded %s (%s) suffices; nothing to preload" % (mapped[0], _text(version)))
            return
        raise ImportError(
            "%s needs a libstdc++ with %s, but %s (%s) was already loaded by an earlier import, and a process "
            "can hold only one libstdc++.\n"
            "Fix: import tensorflow before modules that load C++ extensions, or start Python with the "
            "vendored runtime preloaded:\n    LD_PRELOAD=%s python ...\n"
            "(RETF_BOOTSTRAP_DEBUG=1 shows what was found.)"
            % (config["label"], _text(needed), mapped[0], _text(version), vendored))
    system = system_runtime()
    version = glibcxx_version(system) if system else None
    log("system libstdc++: %s (%s)" % (system or "not found", _text(version)))
    if version is not None and version >= needed:
        log("system runtime suffices; the vendored one stays unused")
        return
    import ctypes
    ctypes.CDLL(vendored, mode=ctypes.RTLD_GLOBAL)
    log("preloaded %s (system has %s, needed %s)" % (vendored, _text(version), _text(needed)))


# --- the vendored Python dependencies ----------------------------------------------------------

def _prepare_dependencies(folder, config, log):
    if folder not in sys.path:
        sys.path.insert(0, folder)
    for namespace in config.get("namespaces", ()):
        module = sys.modules.get(namespace)
        portion = os.path.join(folder, namespace)
        path = getattr(module, "__path__", None)
        if isinstance(path, list) and portion not in path:
            path.insert(0, portion)  # a -nspkg.pth namespace made at start-up: our portion wins
            log("namespace %s: vendored portion first" % namespace)
    log("vendored packages first on sys.path: %s" % folder)
    conflicts = []
    accept = config.get("accept", {})
    for name, version in sorted(config.get("modules", {}).items()):
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if origin and not os.path.abspath(origin).startswith(folder + os.sep):
            theirs = getattr(module, "__version__", "unknown version")
            if name in accept and satisfies(theirs, accept[name]):
                log("%s %s already imported from %s: accepted (%s)" % (name, theirs, os.path.dirname(origin), accept[name]))
                continue
            conflicts.append((name, version, theirs, origin))
    if not conflicts:
        return
    lines = ["%s %s was already imported from %s, but %s needs its own %s %s"
             % (name, theirs, os.path.dirname(origin), config["label"], name, ours)
             for name, ours, theirs, origin in conflicts]
    names = ", ".join(c[0] for c in conflicts)
    fix = "Fix: import tensorflow before %s (make `import tensorflow` the first import)." % names
    if config.get("conflicts", "error") == "warn":
        import warnings
        warnings.warn("; ".join(lines) + ". Mixing them may crash. " + fix, RuntimeWarning, stacklevel=4)
        log("conflicts (warned): %s" % names)
        return
    raise ImportError("\n".join(lines) + "\n" + fix)


def _release(text):
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def satisfies(version, specifier):
    """Whether ``version`` meets a comma-separated specifier of >=, >, <=, <, == clauses."""
    have = _release(version)
    if not have:
        return False
    tests = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b,
             "<": lambda a, b: a < b, "==": lambda a, b: a == b}
    for clause in specifier.split(","):
        match = re.match(r"\s*(>=|<=|==|>|<)\s*([0-9.]+)\s*$", clause)
        if not match or not tests[match.group(1)](have, _release(match.group(2))):
            return False
    return True


# --- the retf op library ----------------------------------------------------------------------

_UNREGISTERED = re.compile(r"Op type not registered '(Retf>[^']+)'")
_OLDER_REMOTE = re.compile(r"from remote target (/job:\S+?):?\s")
_HINT_MARK = "\nretf: "


def ops_enabled():
    """Whether this process registers the retf op library (RETF_OPS=0 keeps it out)."""
    return os.environ.get("RETF_OPS", "1") != "0"


def register_ops(namespace, config):
    """Register the retf ops and kernels while `import tensorflow` runs (``namespace``: its globals).

    Every process that imports this TensorFlow can then run the ops its optimizers emit, even one
    that builds no graph itself: a parameter server runs the update ops of the variables it holds.
    Only the kernels load here; retf's Python wrappers are made on first use.
    """
    from tensorflow.python.framework import errors_impl, load_library
    _explain_cluster_errors(errors_impl, config["label"])
    if not ops_enabled():
        return
    start = time.perf_counter()
    site = os.path.dirname(os.path.dirname(os.path.abspath(namespace["__file__"])))
    path = os.path.realpath(os.path.join(site, config["library"]))  # the spelling retf loads it by, too
    try:
        load_library.load_library(path)
    except (errors_impl.OpError, OSError) as error:
        raise ImportError(
            "%s: cannot register its retf op library %s: %s\nFix: reinstall this wheel; or set RETF_OPS=0 to run "
            "without it (tf.train.AdamOptimizer then uses TensorFlow's own ops)."
            % (config["label"], path, getattr(error, "message", error)))
    if os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"):
        sys.stderr.write("retf-bootstrap [ops] registered %s in %.2f ms\n" % (path, (time.perf_counter() - start) * 1e3))


def _explain_cluster_errors(errors_impl, label):
    """Add what to do to the errors a cluster of mixed TensorFlows gives, where they are made.

    TensorFlow raises them in the process that sent the graph, with the message of the task that
    could not run it: "Op type not registered 'Retf>...'" (a task without the library) or "NodeDef
    missing attrs" from a remote target (a task on an older TensorFlow, e.g. a stock 1.15 ps).
    """
    def unregistered(message):
        found = _UNREGISTERED.search(message)
        if found:
            return ("%s is an op of the retf library that %s ships and registers in every process that imports it. "
                    "The task that reported this error runs without it: on another TensorFlow (e.g. a stock 1.15 ps) "
                    "or with RETF_OPS=0. Fix: run every task of the cluster (ps, chief, workers, evaluator) on this "
                    "same wheel with RETF_OPS unset; or build the graph without retf ops (RETF_SPARSE_ADAM=dense on "
                    "the workers and no retf optimizers)." % (found.group(1), label))
        return None

    def older_remote(message):
        remote = _OLDER_REMOTE.search(message)
        if remote and "NodeDef missing attrs" in message:
            return ("%s runs another TensorFlow than this process (%s), one that cannot read the graphs this "
                    "TensorFlow sends. Fix: run every task of the cluster (ps, chief, workers, evaluator) on this "
                    "same wheel." % (remote.group(1), label))
        return None

    _add_hint(errors_impl.NotFoundError, unregistered)
    _add_hint(errors_impl.InvalidArgumentError, older_remote)


def _add_hint(error_class, explain):
    if "_retf_explain" in vars(error_class):
        return
    original = error_class.__init__

    def __init__(self, node_def, op, message, *args, **kwargs):
        if isinstance(message, str) and _HINT_MARK not in message:
            hint = explain(message)
            if hint:
                message += _HINT_MARK + hint
        original(self, node_def, op, message, *args, **kwargs)

    error_class.__init__ = __init__
    error_class._retf_explain = explain


# --- the TensorFlow 1.x API -------------------------------------------------------------------

CONTRIB_MESSAGE = (
    "tf.contrib is not part of TensorFlow 2.x, which this build is. Replacements: "
    "tf.contrib.layers -> tf.layers / tf.keras.layers; tf.contrib.framework -> tf.train, tf.get_variable; "
    "tf.contrib.opt.LazyAdamOptimizer -> retf.train.LazyAdamOptimizer; tf.contrib.rnn -> tf.nn.rnn_cell; "
    "tf.contrib.data -> tf.data.experimental; tf.contrib.lookup -> tf.lookup; "
    "tf.contrib.summary -> tf.summary (tf.compat.v2.summary). See TensorFlow's guide on migrating from 1.x.")


class RemovedContrib(object):
    """Stands in for tf.contrib: any use says what replaced it."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError("tf.contrib.%s: %s" % (name, CONTRIB_MESSAGE))

    def __repr__(self):
        return "<tf.contrib: removed in TensorFlow 2.x>"


SPARSE_ADAM_MODES = ("dense", "fused", "lazy")


def sparse_adam_mode(config):
    """How tf.train.AdamOptimizer applies sparse gradients here: RETF_SPARSE_ADAM, else the recipe's choice.

    With RETF_OPS=0 the recipe's choice falls back to "dense" (TensorFlow's own ops), so no process
    emits retf ops that it, or a parameter server started the same way, could not run.
    """
    chosen = os.environ.get("RETF_SPARSE_ADAM", "")
    mode = chosen or config.get("v1_sparse_adam", "dense")
    if mode not in SPARSE_ADAM_MODES:
        raise ImportError("RETF_SPARSE_ADAM=%s is not one of %s (how tf.train.AdamOptimizer applies sparse "
                          "gradients); unset it to use the build's choice, %s"
                          % (mode, ", ".join(SPARSE_ADAM_MODES), config.get("v1_sparse_adam", "dense")))
    if mode != "dense" and not ops_enabled():
        if chosen:
            raise ImportError("RETF_SPARSE_ADAM=%s needs the retf op library, which RETF_OPS=0 leaves unregistered; "
                              "unset one of them" % mode)
        return "dense"
    return mode


def expose_v1_api(namespace, config):
    """Make the `tensorflow` module (its globals, ``namespace``) the TF 1.x API with 1.x behaviour."""
    if os.environ.get("RETF_API", "") == "2":
        return
    from tensorflow._api.v2.compat import v1
    from tensorflow.python.util import deprecation
    with deprecation.silence():  # TF 1.15 printed no deprecation notices at import; neither do we
        v1.disable_v2_behavior()
    for name in dir(v1):
        if not name.startswith("__"):
            namespace[name] = getattr(v1, name)
    namespace["contrib"] = RemovedContrib()
    sparse_adam = sparse_adam_mode(config)
    if sparse_adam != "dense":
        try:
            from retf import train
        except ImportError as error:
            raise ImportError("tf.train.AdamOptimizer: %s sparse Adam needs the retf op library, which this "
                              "build does not ship ([ops] build = false in its recipe): %s; unset "
                              "RETF_SPARSE_ADAM" % (sparse_adam, error))
        v1.train.AdamOptimizer = train.AdamOptimizer if sparse_adam == "fused" else train.LazyAdamStandIn
    namespace["__all__"] = [n for n in dir(v1) if not n.startswith("_")] + ["contrib"]
