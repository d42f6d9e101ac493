"""The retf op library: registered while `import tensorflow` runs (register_ops, its injected call), and the
errors a cluster of mixed TensorFlows gives, explained where they are made."""

import os
import re
import sys
import time

from . import HINT_MARK, check_schema, runtime, switches

_UNREGISTERED = re.compile(r"Op type not registered '(Retf>[^']+)'")
_OLDER_REMOTE = re.compile(r"from remote target (/job:\S+?):?\s")


def _runtime_too_old_for(library, needed, config):
    """Why the libstdc++ this process holds cannot load ``library`` (which needs ``needed``), or None.

    Where the bootstrap has already made sure of a runtime that provides ``needed`` (the op library needs no newer
    one than TensorFlow's own code), the process's mappings (a thousand lines once TensorFlow is loaded) go unread.
    """
    if not needed or tuple(needed) <= runtime.PROVIDED:
        return None
    mapped = runtime.mapped_runtimes()
    if not mapped or runtime.provides(mapped[0], needed):
        return None
    version = runtime.glibcxx_version(mapped[0])
    if version is None or version >= tuple(needed):
        return None
    fix = ("; to keep it, start Python with LD_PRELOAD=%s" % os.path.join(os.path.dirname(os.path.dirname(library)),
                                                                        config["libstdcxx"])
           if config.get("libstdcxx") else "")
    return ("%s: left out its retf op library %s, which needs %s: %s (%s) was loaded before tensorflow, and a process "
            "can hold only one libstdc++. tf.train's optimizers use TensorFlow's own ops%s."
            % (config["label"], library, runtime.text(tuple(needed)), mapped[0], runtime.text(version), fix))


def register_ops(namespace, config):
    """Register the retf ops and kernels while `import tensorflow` runs (``namespace``: its globals).

    Every process that imports this TensorFlow can then run the ops its optimizers emit, even one
    that builds no graph itself: a parameter server runs the update ops of the variables it holds.
    Only the kernels load here; retf's Python wrappers are made on first use.
    """
    check_schema(config)
    from tensorflow.python.framework import errors_impl, load_library
    _explain_cluster_errors(errors_impl, config["label"])
    if not switches.ops_enabled():
        return
    start = time.perf_counter()
    site = os.path.dirname(os.path.dirname(os.path.abspath(namespace["__file__"])))
    path = os.path.realpath(os.path.join(site, config["library"]))  # the spelling retf loads it by, too
    reason = _runtime_too_old_for(path, config.get("glibcxx"), config)
    if reason is not None:
        switches.OPS_LEFT_OUT = reason
        import warnings
        warnings.warn(reason, RuntimeWarning, stacklevel=3)
        return
    try:
        load_library.load_library(path)
    except (errors_impl.OpError, OSError) as error:
        raise ImportError(
            "%s: cannot register its retf op library %s: %s\nFix: reinstall this wheel; or set RETF_OPS=0 to run "
            "without it (tf.train.AdamOptimizer then uses TensorFlow's own ops)."
            % (config["label"], path, getattr(error, "message", error))) from error
    if os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"):
        sys.stderr.write("retf-bootstrap [ops] registered %s in %.2f ms\n" % (path, (time.perf_counter() - start) * 1e3))
    if switches.switch(config, "large_block_allocator") == "1":
        _use_large_block_allocator(path)


def _use_large_block_allocator(path):
    """TensorFlow's CPU allocator becomes retf's large-block one, if TensorFlow has not chosen it yet."""
    import ctypes
    try:
        library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # the copy TensorFlow just loaded
        outcome = library.RetfInstallLargeBlockAllocator()
    except (OSError, AttributeError) as error:  # a library without it
        raise ImportError("the CPU allocator: cannot install retf's large-block allocator from %s: %s\nFix: reinstall "
                          "this wheel; or set RETF_LARGE_BLOCK_ALLOCATOR=0 to keep TensorFlow's allocator"
                          % (path, error)) from error
    if os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"):
        sys.stderr.write("retf-bootstrap [ops] CPU allocator: %s\n" % {
            1: "retf's large-block allocator", 0: "TensorFlow's (it had already chosen one)",
            -1: "this TensorFlow build's own"}.get(outcome, outcome))


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
                    "same wheel with RETF_OPS unset; or build the graph without retf ops (RETF_SPARSE_ADAM=dense, "
                    "RETF_FUSED_SPARSE=0, RETF_FUSED_EMBEDDING=0, RETF_FUSED_MATMUL_GRAD=0 and "
                    "RETF_FUSED_CONCAT_GRAD=0 on the workers, and no retf optimizers)."
                    % (found.group(1), label))
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
        if isinstance(message, str) and HINT_MARK not in message:
            hint = explain(message)
            if hint:
                message += HINT_MARK + hint
        original(self, node_def, op, message, *args, **kwargs)

    error_class.__init__ = __init__
    error_class._retf_explain = explain
