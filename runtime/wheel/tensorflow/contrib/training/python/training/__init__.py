"""tensorflow.contrib.training.python.training: the module path of TF 1.15's HParams (hparam)."""
