"""tensorflow.contrib.rnn.python (module path kept for TF 1.x imports)."""
