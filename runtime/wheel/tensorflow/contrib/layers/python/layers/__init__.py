"""tensorflow.contrib.layers.python.layers: tf_slim.layers."""
from tf_slim.layers import *  # noqa: F401,F403
