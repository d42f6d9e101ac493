"""tf.contrib.layers: tf_slim's layers, regularizers, initializers and optimize_loss (TF 1.15's contrib layers,
maintained as tf_slim: same variable names, collections and semantics), and safe_embedding_lookup_sparse."""
from tensorflow.contrib import part, require_tf_slim

require_tf_slim("layers")
from tensorflow.contrib.layers.python.layers import *  # noqa: E402,F401,F403
from tensorflow.python.ops.embedding_ops import safe_embedding_lookup_sparse  # noqa: E402,F401

part(__name__, "TF 1.15's contrib feature columns were replaced by tf.feature_column (categorical_column_with_hash_bucket, "
               "embedding_column, input_layer), embed_sequence by tf.nn.embedding_lookup")
