"""tensorflow.contrib.legacy_seq2seq.python (module path kept for TF 1.x imports)."""
