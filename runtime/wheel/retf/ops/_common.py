"""What the op families share: variables as the ops take them, the marks on routed gradient functions, the kernel
label of retf's kernels for TensorFlow's own ops and whether oneDNN's graph rewrite would stop at it, and a handle on
the op library TensorFlow loaded."""

import os

import tensorflow as tf

from retf._library import load_library


def _is_resource(value):
    return getattr(value, "dtype", None) == tf.resource or hasattr(value, "handle")


def _handle(value):
    return value.handle if hasattr(value, "handle") else value


def _run(op_name, variables, inputs, name, **attrs):
    """op_name on resource variables (their handles) or its _ref form on reference variables, then inputs."""
    library = load_library()
    if _is_resource(variables[0]):
        return getattr(library, op_name)(*([_handle(v) for v in variables] + list(inputs)), name=name, **attrs)
    return getattr(library, op_name + "_ref")(*(list(variables) + list(inputs)), name=name, **attrs)


def _route(gradient, original, route):
    """gradient, marked as the routing named route around original (which it falls back to)."""
    gradient.original = original
    gradient.route = route
    return gradient


def _label_for_retf(op, label, takes):
    """Give op, a node of TensorFlow's own op, the kernel label that selects retf's kernel for it if takes(op) and it
    has no label yet; whether it did. A label the graph set itself (graph._kernel_label_map) stays."""
    from tensorflow.core.framework import attr_value_pb2

    try:
        op.get_attr("_kernel")
        return False
    except ValueError:
        pass
    if not takes(op):
        return False
    op._set_attr("_kernel", attr_value_pb2.AttrValue(s=label.encode()))
    return True


def onednn_rewrites_graphs():
    """Whether TensorFlow's oneDNN graph rewrite runs in this process: it replaces BatchMatMulV2 with oneDNN's op and
    stops the process at a node that carries another kernel label. TF_ENABLE_ONEDNN_OPTS=1 turns it on; TensorFlow
    2.9 and later turn it on by default on CPUs with AVX-512 VNNI or BF16, which IsMklEnabled reports."""
    value = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower()
    if value in ("1", "true"):
        return True
    if value in ("0", "false"):
        return False
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return False


def _routed(function, route):
    """Whether function, a registered gradient function, is or wraps the routing named route."""
    while function is not None:
        if getattr(function, "route", None) == route:
            return True
        function = getattr(function, "original", None)
    return False


def _loaded_library():
    """A ctypes handle on the op library TensorFlow loaded (RTLD_NOLOAD: never a second copy), loading it
    into TensorFlow first where `import tensorflow` did not (retf beside a stock TensorFlow)."""
    import ctypes
    import os

    from retf import _library

    def loaded():
        return ctypes.CDLL(_library.LIBRARY, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)

    try:
        return loaded()  # what `import tensorflow` registered: no op wrappers to build at import
    except OSError:
        load_library()
        return loaded()
