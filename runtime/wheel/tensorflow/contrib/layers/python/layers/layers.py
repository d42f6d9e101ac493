"""tensorflow.contrib.layers.python.layers.layers: tf_slim.layers.layers, under TF 1.15's module path."""
import sys

from tf_slim.layers import layers as _module

sys.modules[__name__] = _module
