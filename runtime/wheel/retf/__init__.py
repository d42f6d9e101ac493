"""Fused CPU kernels for sparse training in TensorFlow 2.x.

- ``retf.train.LazyAdamOptimizer``: tf.compat.v1 Adam whose sparse updates touch only the rows
  in the gradient, in one fused kernel.
- ``retf.train.AdamOptimizer``, ``AdagradOptimizer``, ``FtrlOptimizer``: tf.compat.v1's, same results,
  with a sparse gradient's duplicate summing and update in one fused kernel.
- ``retf.train.AdamAsyncOptimizer``, ``AdagradDecayOptimizer``: DeepRec's optimizers, fused where sparse.
- ``retf.keras.optimizers.LazyAdam``: lazy Adam for Keras (OptimizerV2).
- ``retf.nn.embedding_lookup_sparse``: tf.compat.v1.nn.embedding_lookup_sparse, fused, with a
  gradient over the unique rows only.
- ``retf.ops``: the raw ops.

The op library's kernels are registered while ``import tensorflow`` runs (so a parameter server,
which builds no ops, can run the updates workers send it; RETF_OPS=0 leaves them out); its Python
wrappers are made the first time an op is built. ``retf.keras`` is imported the first time it is
used: it loads Keras, a few hundred milliseconds that ``import tensorflow`` should not pay when the
1.x API mode routes tf.train.AdamOptimizer through ``retf.train``.
"""

import importlib
import sys
import types

from retf import nn, ops, train
from retf._library import OpLibraryError, load_library


class _Package(types.ModuleType):
    """This package, importing retf.keras on first use (Python 3.6 has no module __getattr__)."""

    def __getattr__(self, name):
        if name == "keras":
            return importlib.import_module("retf.keras")
        raise AttributeError("module 'retf' has no attribute '{}'".format(name))


sys.modules[__name__].__class__ = _Package

__all__ = ["OpLibraryError", "keras", "load_library", "nn", "ops", "train"]
