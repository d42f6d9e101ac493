"""tf.contrib.slim: tf_slim."""
import sys

from tensorflow.contrib import require_tf_slim

sys.modules[__name__] = require_tf_slim("slim")
