"""tensorflow.contrib.layers.python.layers.utils: tf_slim.layers.utils, under TF 1.15's module path."""
import sys

from tf_slim.layers import utils as _module

sys.modules[__name__] = _module
