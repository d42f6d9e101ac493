"""tensorflow.contrib.rnn.python.ops (module path kept for TF 1.x imports)."""
