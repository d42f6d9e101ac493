"""TensorFlow's sparse Adagrad and FTRL, and DeepRec's AdagradDecay, each with its duplicate summing in one fused
kernel."""

import tensorflow as tf

from retf.ops._common import _run


def sparse_apply_adagrad(var, accum, lr, grad, indices, epsilon=None, update_slots=True, use_locking=False, name=None):
    """TensorFlow's sparse Adagrad after duplicate summing, in one fused op.

    Duplicate indices are summed first; per named row accum += g^2 (when update_slots), then
    var -= lr*g*rsqrt(accum) (SparseApplyAdagrad), or with epsilon var -= lr*g/(sqrt(accum)+epsilon)
    (SparseApplyAdagradV2). Returns the update op (resource variables) or var's new value (reference).
    """
    if epsilon is None:
        return _run("retf_sparse_apply_adagrad", [var, accum], [lr, grad, indices], name,
                    update_slots=update_slots, use_locking=use_locking)
    return _run("retf_sparse_apply_adagrad_v2", [var, accum], [lr, epsilon, grad, indices], name,
                update_slots=update_slots, use_locking=use_locking)


def sparse_apply_adagrad_decay(var, accum, accum_decay_power, lr, decay_step, decay_rate, decay_baseline,
                               global_step, grad, indices, use_locking=False, name=None):
    """DeepRec's sparse AdagradDecay in one fused op; duplicate indices are summed first.

    Per named row r: when global_step // decay_step > accum_decay_power[r] (its element r),
    accum = max(accum*decay_rate, decay_baseline) and the count goes up by one; then
    accum += g^2 and var -= lr*g*rsqrt(accum). decay_step and global_step share accum_decay_power's
    integer dtype.
    """
    return _run("retf_sparse_apply_adagrad_decay", [var, accum, accum_decay_power],
                [lr, decay_step, decay_rate, decay_baseline, global_step, grad, indices], name,
                use_locking=use_locking)


def sparse_apply_ftrl(var, accum, linear, grad, indices, lr, l1, l2, lr_power, l2_shrinkage=None,
                      use_locking=False, name=None):
    """TensorFlow's sparse FTRL (SparseApplyFtrl, or SparseApplyFtrlV2 with l2_shrinkage) after duplicate summing.

    Duplicate indices are summed first; then each named row once, with TensorFlow's formulas and
    roundings (multiply_linear_by_lr false, as tf.compat.v1.train.FtrlOptimizer runs them).
    """
    if l2_shrinkage is None:
        return _run("retf_sparse_apply_ftrl", [var, accum, linear], [grad, indices, lr, l1, l2, lr_power], name,
                    use_locking=use_locking)
    return _run("retf_sparse_apply_ftrl_v2", [var, accum, linear],
                [grad, indices, lr, l1, l2, l2_shrinkage, lr_power], name, use_locking=use_locking)


for _op_type in ("SparseApplyAdagrad", "SparseApplyAdagradV2", "SparseApplyAdagradDecay", "SparseApplyFtrl",
                 "SparseApplyFtrlV2"):
    tf.no_gradient("Retf>" + _op_type)
    tf.no_gradient("Retf>" + _op_type + "Ref")
