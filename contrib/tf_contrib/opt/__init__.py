"""tf.contrib.opt: LazyAdamOptimizer, on retf's fused lazy Adam kernel.

TF 1.15's tf.contrib.opt.LazyAdamOptimizer under its own default name ("Adam"), slots ("m", "v")
and results: only the rows in a sparse gradient move. The other contrib optimizers are not
provided; using one says what replaced it.
"""
import sys
import types

from tensorflow._retf_bootstrap import CONTRIB_MESSAGE

try:
    from retf.train import LazyAdamStandIn as LazyAdamOptimizer
except ImportError as error:  # a build without the op library
    raise ImportError("tf.contrib.opt.LazyAdamOptimizer runs on the retf op library, which this TensorFlow build "
                      "does not ship ([ops] build = false in its recipe): %s" % error) from error


class _Opt(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError("tf.contrib.opt.%s is not provided (only LazyAdamOptimizer is): %s"
                             % (name, CONTRIB_MESSAGE))


sys.modules[__name__].__class__ = _Opt
__all__ = ["LazyAdamOptimizer"]
