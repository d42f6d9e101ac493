"""tensorflow.contrib.training.python.training.hparam: HParams and parse_values, as tf.contrib.training has them."""
from tensorflow.contrib.training import HParams, parse_values  # noqa: F401
