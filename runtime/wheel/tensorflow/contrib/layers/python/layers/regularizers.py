"""tensorflow.contrib.layers.python.layers.regularizers: tf_slim.layers.regularizers, under TF 1.15's module path."""
import sys

from tf_slim.layers import regularizers as _module

sys.modules[__name__] = _module
