"""tensorflow.contrib.layers.python.layers.summaries: tf_slim.layers.summaries, under TF 1.15's module path."""
import sys

from tf_slim.layers import summaries as _module

sys.modules[__name__] = _module
