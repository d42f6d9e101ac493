"""LazyAdamOptimizer: TF 1.15's tf.contrib.opt.LazyAdamOptimizer on retf's fused lazy Adam kernel.

Its default name ("Adam"), slots ("m", "v") and results are TF 1.15's: only the rows in a sparse
gradient move.
"""
try:
    from retf.train import LazyAdamStandIn as LazyAdamOptimizer  # noqa: F401
except ImportError as error:  # a build without the op library
    raise ImportError("tf.contrib.opt.LazyAdamOptimizer runs on the retf op library, which this TensorFlow build "
                      "does not ship ([ops] build = false in its recipe): %s" % error) from error
