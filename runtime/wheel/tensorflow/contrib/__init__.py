"""tf.contrib in the 1.x API mode of a retfwheel-built TensorFlow.

TensorFlow 2.x has no tf.contrib. The parts that TF 1.x code uses most (recommendation models, BERT, NMT, NER;
docs/guide.md has the survey) are provided here, as attributes (tf.contrib.layers.batch_norm) and as module paths
(tensorflow.contrib.rnn.python.ops.core_rnn_cell); they load on first use. layers, framework and
slim are tf_slim, the maintained port of TF 1.15's contrib layers; the rest is TensorFlow 2.x's own
code under TF 1.15's names, or written here where TensorFlow 2.x has none. Every other part, and
every name a provided part lacks, says what replaced it. Shipped as tensorflow/contrib/ (Python 3.6,
standard library, TensorFlow and tf_slim only).
"""
import importlib
import sys
import types

from tensorflow._retf.v1_api import CONTRIB_MESSAGE

PROVIDED = ("cluster_resolver", "crf", "data", "distribute", "estimator", "feature_column", "framework", "layers", "learn",
            "legacy_seq2seq", "lookup", "metrics", "opt", "rnn", "seq2seq", "slim", "summary", "tpu", "training")


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


class _Part(types.ModuleType):
    """A provided part: a name TF 1.15 had there but this build does not provide says what replaced it."""

    _retf_instead = ""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError("%s.%s is not provided by this TensorFlow build; %s"
                             % (self.__name__.replace("tensorflow.", "tf.", 1), name, self._retf_instead))


def part(name, instead):
    """Make the module ``name`` a provided part whose missing names point at ``instead``."""
    module = sys.modules[name]
    module.__class__ = _Part
    module._retf_instead = instead


def require_tf_slim(part_name):
    """tf_slim, which tf.contrib.layers, .framework and .slim are, or an ImportError saying how to get it."""
    try:
        return importlib.import_module("tf_slim")
    except ImportError as error:
        raise ImportError("tf.contrib.%s is tf_slim in this TensorFlow build, and tf_slim is not installed "
                          "(pip install 'tf-slim~=1.1.0'): %s" % (part_name, error)) from error


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
