"""Keras optimizers with fused sparse updates."""

import tensorflow as tf

from retf import ops


class LazyAdam(tf.keras.optimizers.Adam):
    """tf.keras.optimizers.Adam whose sparse updates touch only the rows in the gradient.

    Dense gradients go through Keras Adam unchanged. IndexedSlices gradients (Embedding layers,
    retf.nn.embedding_lookup_sparse) update only the rows they name, as tfa.optimizers.LazyAdam
    does, in one fused kernel that also sums duplicate indices. amsgrad is not supported.
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False,
                 name="LazyAdam", **kwargs):
        if amsgrad:
            raise ValueError("LazyAdam does not support amsgrad=True")
        super(LazyAdam, self).__init__(
            learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, amsgrad=False, name=name,
            **kwargs)

    # The kernel sums duplicate indices itself, so the base class's dedup pass is skipped.
    def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices, **kwargs):
        return self._resource_apply_sparse(grad, handle, indices, **kwargs)

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        var_device, var_dtype = var.device, var.dtype.base_dtype
        coefficients = ((apply_state or {}).get((var_device, var_dtype))
                        or self._fallback_apply_state(var_device, var_dtype))
        return ops.sparse_apply_adam(
            var, self.get_slot(var, "m"), self.get_slot(var, "v"),
            coefficients["beta_1_power"], coefficients["beta_2_power"], coefficients["lr_t"],
            coefficients["beta_1_t"], coefficients["beta_2_t"], coefficients["epsilon"],
            grad, indices, use_locking=self._use_locking)
