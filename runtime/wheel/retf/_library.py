"""Loads _retf_ops.so once, checking it was built for the running TensorFlow: its kernels (load_kernels), and the
module of its generated op wrappers (load_library), which TensorFlow compiles from their source, about 40 ms, so
only on the first use of an op."""

import json
import os
import sys
import threading

from tensorflow.python.framework import errors, versions
from tensorflow.python.framework import load_library as tf_loading

# The real path: TensorFlow keeps one entry per library file name, and `import tensorflow` registered
# the library by this spelling; another spelling of the same file would yield no op wrappers.
LIBRARY = os.path.join(os.path.dirname(os.path.realpath(__file__)), "_retf_ops.so")
BUILD_INFO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build_info.json")

_lock = threading.Lock()
_module = None
_kernels = False


class OpLibraryError(ImportError):
    """The op library is missing, or does not fit the running TensorFlow."""


def _rebuild_hint(running):
    return "rebuild the wheel with retfwheel against TensorFlow {}".format(running)


def built_for():
    """The TensorFlow version recorded in _build_info.json, or None when there is no such file."""
    try:
        with open(BUILD_INFO) as stream:
            info = json.load(stream)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise OpLibraryError("cannot read {}: {}".format(BUILD_INFO, exc)) from exc
    return info.get("tensorflow_version")


def _checked():
    """(the running TensorFlow's version, the one the library was built for), once the library is known to fit."""
    if os.environ.get("RETF_OPS", "1") == "0":
        raise OpLibraryError("retf's op library is off in this process (RETF_OPS=0), so retf's ops cannot run; "
                             "unset RETF_OPS here and in every task of the cluster")
    left_out = getattr(sys.modules.get("tensorflow._retf.switches"), "OPS_LEFT_OUT", None)
    if left_out:  # the libstdc++ loaded before tensorflow is older than the library needs
        raise OpLibraryError(left_out)
    running = versions.__version__  # the build's own: in 1.x API mode tf.__version__ is the API's, 1.15.5
    built = built_for()
    if built is not None and built != running:
        raise OpLibraryError(
            "retf's op library was built for TensorFlow {} but TensorFlow {} is running; {}".format(
                built, running, _rebuild_hint(running)))
    if not os.path.isfile(LIBRARY):
        raise OpLibraryError("retf's op library {} is missing; {}".format(LIBRARY, _rebuild_hint(running)))
    return running, built


def _loading(load):
    running, built = _checked()
    try:
        return load(LIBRARY)
    except errors.NotFoundError as exc:
        # TensorFlow reports a failed dlopen as NotFoundError; undefined symbols mean an ABI mismatch.
        raise OpLibraryError(
            "cannot load retf's op library {} (built for TensorFlow {}) into TensorFlow {}: {}; {}".format(
                LIBRARY, built or "unknown", running, exc.message, _rebuild_hint(running))) from exc


def load_kernels():
    """Register the library's ops and kernels with TensorFlow (as `import tensorflow` has, where the library is on),
    without its Python wrappers: enough for a kernel label or a node built by name."""
    global _kernels
    if not _kernels:
        with _lock:
            if not _kernels:
                _loading(tf_loading.load_library)
                _kernels = True


def load_library():
    """The module of generated op wrappers, loading the library on first call."""
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                _module = _loading(tf_loading.load_op_library)
    return _module
