"""tensorflow.contrib.layers.python.layers.initializers: tf_slim.layers.initializers, under TF 1.15's module path."""
import sys

from tf_slim.layers import initializers as _module

sys.modules[__name__] = _module
