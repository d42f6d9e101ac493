"""What the op families share: variables as the ops take them, the marks on routed gradient functions, and a
handle on the op library TensorFlow loaded."""

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
