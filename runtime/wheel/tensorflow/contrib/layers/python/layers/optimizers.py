"""tensorflow.contrib.layers.python.layers.optimizers: tf_slim.layers.optimizers, under TF 1.15's module path."""
import sys

from tf_slim.layers import optimizers as _module

sys.modules[__name__] = _module
