"""tf.contrib in the 1.x API mode of a retfwheel-built TensorFlow.

TensorFlow 2.x has no tf.contrib. The parts that TF 1.x recommendation code uses are provided
here, as attributes (tf.contrib.rnn, tf.contrib.opt.LazyAdamOptimizer) and as module paths
(tensorflow.contrib.rnn.python.ops.core_rnn_cell); they load on first use. Every other part says
what replaced it, on attribute access and on import. Shipped as tensorflow/contrib/ (Python 3.6,
standard library and TensorFlow only).
"""
import importlib
import sys
import types

from tensorflow._retf_bootstrap import CONTRIB_MESSAGE

PROVIDED = ("opt", "rnn")


class _Contrib(types.ModuleType):
    """This package, importing its provided parts on first use (Python 3.6 has no module __getattr__)."""

    def __getattr__(self, name):
        if name in PROVIDED:
            return importlib.import_module(__name__ + "." + name)
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError("tf.contrib.%s: %s" % (name, CONTRIB_MESSAGE))

    def __repr__(self):
        return "<tf.contrib: %s from retfwheel; the rest removed in TensorFlow 2.x>" % ", ".join(PROVIDED)


class _RemovedParts(object):
    """Makes `import tensorflow.contrib.<part>` of a part not provided say what replaced it."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("tensorflow.contrib.") and fullname.split(".")[2] not in PROVIDED:
            raise ImportError("%s: %s" % (fullname, CONTRIB_MESSAGE), name=fullname)
        return None  # asked of every import in the process: the common case costs one prefix test


sys.modules[__name__].__class__ = _Contrib
if not any(type(finder).__name__ == "_RemovedParts" for finder in sys.meta_path):
    sys.meta_path.insert(0, _RemovedParts())

__all__ = list(PROVIDED)
