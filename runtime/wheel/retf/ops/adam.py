"""Sparse Adam in fused kernels: lazy (sparse_apply_adam), DeepRec's AdamAsync, TensorFlow's dense rule for a
sparse gradient (sparse_apply_adam_dense) and its gradient-free half (adam_decay_untouched)."""

import tensorflow as tf

from retf._library import load_library
from retf.ops._common import _handle, _is_resource


def _apply(op_name, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices, use_locking,
           name):
    """Runs op_name on resource variables (their handles), or its _ref form on reference variables."""
    library = load_library()
    if _is_resource(var):
        return getattr(library, op_name)(
            _handle(var), _handle(m), _handle(v), beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
            indices, use_locking=use_locking, name=name)
    return getattr(library, op_name + "_ref")(
        var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
        use_locking=use_locking, name=name)


def sparse_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                      use_locking=False, name=None):
    """Lazy Adam on the rows of var, m and v named by indices; duplicate indices are summed.

    Per touched row: m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g^2;
    var -= lr * sqrt(1-beta2_power)/(1-beta1_power) * m/(sqrt(v)+epsilon).
    Returns the update op (resource variables) or var's new value (reference variables).
    """
    return _apply("retf_sparse_apply_adam", var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
                  indices, use_locking, name)


def adam_decay_untouched(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, indices, use_locking=False,
                         name=None):
    """The rows of var, m and v that indices does not name, as sparse_apply_adam_dense updates them: m = beta1*m;
    v = beta2*v; var -= lr * sqrt(1-beta2_power)/(1-beta1_power) * m/(sqrt(v)+epsilon).

    sparse_apply_adam_async on the same indices and gradient afterwards completes sparse_apply_adam_dense's
    update, bit for bit; this half needs no gradient, so it can run while the gradient is computed.
    Returns the op (resource variables) or var's new value (reference variables).
    """
    library = load_library()
    dtype = getattr(var, "dtype", tf.resource).base_dtype
    if dtype != tf.resource:  # no gradient to set the scalars' dtype: the variable's
        beta1_power, beta2_power, lr, beta1, beta2, epsilon = (
            tf.cast(tf.convert_to_tensor(value, dtype_hint=dtype), dtype)  # a Python float exactly in dtype
            for value in (beta1_power, beta2_power, lr, beta1, beta2, epsilon))
    if _is_resource(var):
        return library.retf_adam_decay_untouched(
            _handle(var), _handle(m), _handle(v), beta1_power, beta2_power, lr, beta1, beta2, epsilon, indices,
            use_locking=use_locking, name=name)
    return library.retf_adam_decay_untouched_ref(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                                                 indices, use_locking=use_locking, name=name)


def sparse_apply_adam_async(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                            use_locking=False, name=None):
    """DeepRec's AdamAsync sparse rule: lazy Adam with lr * sqrt(1-beta2_power)/(1-beta1_power) rounded left to right.

    Duplicate indices are summed. The beta powers are values here; the caller advances its own.
    Returns the update op (resource variables) or var's new value (reference variables).
    """
    return _apply("retf_sparse_apply_adam_async", var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                  grad, indices, use_locking, name)


def sparse_apply_adam_dense(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                            use_locking=False, name=None):
    """TensorFlow's dense Adam for a sparse gradient in one pass; duplicate indices are summed.

    What tf.compat.v1.train.AdamOptimizer does with an IndexedSlices gradient: with g the summed
    gradient of each row (zero for rows indices does not name), for every row
    m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g^2;
    var -= lr*sqrt(1-beta2_power)/(1-beta1_power) * m/(sqrt(v)+epsilon).
    Returns the update op (resource variables) or var's new value (reference variables).
    """
    return _apply("retf_sparse_apply_adam_dense", var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                  grad, indices, use_locking, name)


tf.no_gradient("Retf>AdamDecayUntouched")
tf.no_gradient("Retf>AdamDecayUntouchedRef")
for _op_type in ("SparseApplyAdam", "SparseApplyAdamDense", "SparseApplyAdamAsync"):
    tf.no_gradient("Retf>" + _op_type)
    tf.no_gradient("Retf>" + _op_type + "Ref")
