"""tf.compat.v1 optimizers with fused sparse updates."""

import tensorflow as tf

from retf import ops


class LazyAdamOptimizer(tf.compat.v1.train.AdamOptimizer):
    """tf.compat.v1.train.AdamOptimizer whose sparse updates touch only the rows in the gradient.

    Dense gradients are applied exactly as AdamOptimizer applies them; slots ("m", "v") and the
    beta1_power/beta2_power accumulators are AdamOptimizer's own, so checkpoints interchange.
    For an IndexedSlices gradient (embedding lookups), only the rows it names are updated, the
    lazy Adam of tfa.optimizers.LazyAdam, in one fused kernel that also sums duplicate indices.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 name="LazyAdam"):
        super(LazyAdamOptimizer, self).__init__(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, use_locking=use_locking,
            name=name)

    def _fused_sparse_apply(self, grad, var, indices):
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = self._get_beta_accumulators()
        return ops.sparse_apply_adam(
            var, self.get_slot(var, "m"), self.get_slot(var, "v"),
            tf.cast(beta1_power, dtype), tf.cast(beta2_power, dtype), tf.cast(self._lr_t, dtype),
            tf.cast(self._beta1_t, dtype), tf.cast(self._beta2_t, dtype), tf.cast(self._epsilon_t, dtype),
            grad, indices, use_locking=self._use_locking)

    # The kernel sums duplicate indices itself, so the base class's dedup pass is skipped.
    def _apply_sparse_duplicate_indices(self, grad, var):
        return self._fused_sparse_apply(grad.values, var, grad.indices)

    def _apply_sparse(self, grad, var):
        return self._fused_sparse_apply(grad.values, var, grad.indices)

    def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices):
        return self._fused_sparse_apply(grad, handle, indices)

    def _resource_apply_sparse(self, grad, var, indices):
        return self._fused_sparse_apply(grad, var, indices)
