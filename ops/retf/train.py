"""tf.compat.v1 optimizers with fused sparse updates."""

import tensorflow as tf

from retf import ops

# The variable dtypes the fused kernels are built for.
KERNEL_DTYPES = (tf.float32, tf.float64)


class _FusedSparseAdam(tf.compat.v1.train.AdamOptimizer):
    """AdamOptimizer whose sparse gradients go, duplicates and all, to one fused kernel."""

    _kernel = None  # a function with the signature of retf.ops.sparse_apply_adam

    def _fusable(self, var):
        """Whether var's sparse updates can go to the kernel; if not, AdamOptimizer's own code does them."""
        return var.dtype.base_dtype in KERNEL_DTYPES

    def _fused_sparse_apply(self, grad, var, indices):
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = self._get_beta_accumulators()
        return self._kernel(
            var, self.get_slot(var, "m"), self.get_slot(var, "v"),
            tf.cast(beta1_power, dtype), tf.cast(beta2_power, dtype), tf.cast(self._lr_t, dtype),
            tf.cast(self._beta1_t, dtype), tf.cast(self._beta2_t, dtype), tf.cast(self._epsilon_t, dtype),
            grad, indices, use_locking=self._use_locking)

    # The kernel sums duplicate indices itself, so the base class's dedup pass is skipped.
    def _apply_sparse_duplicate_indices(self, grad, var):
        if not self._fusable(var):
            return super(_FusedSparseAdam, self)._apply_sparse_duplicate_indices(grad, var)
        return self._fused_sparse_apply(grad.values, var, grad.indices)

    def _apply_sparse(self, grad, var):
        if not self._fusable(var):
            return super(_FusedSparseAdam, self)._apply_sparse(grad, var)
        return self._fused_sparse_apply(grad.values, var, grad.indices)

    def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices):
        if not self._fusable(handle):
            return super(_FusedSparseAdam, self)._resource_apply_sparse_duplicate_indices(grad, handle, indices)
        return self._fused_sparse_apply(grad, handle, indices)

    def _resource_apply_sparse(self, grad, var, indices):
        if not self._fusable(var):
            return super(_FusedSparseAdam, self)._resource_apply_sparse(grad, var, indices)
        return self._fused_sparse_apply(grad, var, indices)


class AdamOptimizer(_FusedSparseAdam):
    """tf.compat.v1.train.AdamOptimizer, same results, with sparse gradients applied in one pass.

    For an IndexedSlices gradient AdamOptimizer decays m and v over the whole variable and moves
    every row of it, as a dozen elementwise ops, each with a variable-sized temporary. This class
    computes the same thing (duplicate indices summed in the same order, the same roundings) in one
    fused pass over var, m and v. Dense gradients, slots, accumulators and names are
    AdamOptimizer's own, so checkpoints interchange; variables of other dtypes than float32 and
    float64 (float16) take AdamOptimizer's own sparse path.
    """

    _kernel = staticmethod(ops.sparse_apply_adam_dense)


class LazyAdamOptimizer(_FusedSparseAdam):
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

    _kernel = staticmethod(ops.sparse_apply_adam)

    def _fusable(self, var):
        dtype = var.dtype.base_dtype
        if dtype not in KERNEL_DTYPES:  # AdamOptimizer's own code would not be lazy
            raise TypeError("LazyAdamOptimizer: variable {} is {}; lazy sparse updates take float32 or float64 "
                            "variables".format(var.name, dtype.name))
        return True


class LazyAdamStandIn(LazyAdamOptimizer):
    """LazyAdamOptimizer under AdamOptimizer's default name, "Adam".

    What `v1_sparse_adam = "lazy"` installs as tf.train.AdamOptimizer, and what the 1.x API mode's
    tf.contrib.opt.LazyAdamOptimizer is (TF 1.15's also defaults to the name "Adam"): slot variables
    keep AdamOptimizer's names, so a program's checkpoints restore either way.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False, name="Adam"):
        super(LazyAdamStandIn, self).__init__(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, use_locking=use_locking,
            name=name)
