"""Fused CPU kernels for sparse training in TensorFlow 2.x.

- ``retf.train.LazyAdamOptimizer``: tf.compat.v1 Adam whose sparse updates touch only the rows
  in the gradient, in one fused kernel.
- ``retf.keras.optimizers.LazyAdam``: the same for Keras (OptimizerV2).
- ``retf.nn.embedding_lookup_sparse``: tf.compat.v1.nn.embedding_lookup_sparse, fused, with a
  gradient over the unique rows only.
- ``retf.ops``: the raw ops.

The op library is loaded the first time an op runs, not on import.
"""

from retf import keras, nn, ops, train
from retf._library import OpLibraryError, load_library

__all__ = ["OpLibraryError", "keras", "load_library", "nn", "ops", "train"]
