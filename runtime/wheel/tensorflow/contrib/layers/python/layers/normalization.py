"""tensorflow.contrib.layers.python.layers.normalization: tf_slim.layers.normalization, under TF 1.15's module path."""
import sys

from tf_slim.layers import normalization as _module

sys.modules[__name__] = _module
