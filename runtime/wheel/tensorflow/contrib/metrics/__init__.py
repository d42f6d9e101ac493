"""tf.contrib.metrics: the streaming metrics (streaming_auc, streaming_accuracy, ...), aggregate_metrics and the
rest of TF 1.15's contrib metrics, from tf_slim, their maintained port."""
from tensorflow.contrib import part, require_tf_slim

require_tf_slim("metrics")
from tf_slim.metrics import *  # noqa: E402,F401,F403

part(__name__, "see tf.compat.v1.metrics (tf.metrics in TF 1.x), whose functions take (labels, predictions)")
