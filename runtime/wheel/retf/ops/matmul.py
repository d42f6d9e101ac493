"""A dense layer's weight gradient, a^T b, summed in parallel over the batch; and its routing into MatMul's
gradient for small weights."""

import tensorflow as tf

from retf._library import load_library
from retf.ops._common import _route, _routed


def transposed_matmul(a, b, name=None):
    """a^T b for matrices a [K, M] and b [K, N], as tf.matmul(a, b, transpose_a=True) computes it.

    Made for a dense layer's weight gradient (a the layer's input, b its output's gradient: K the
    batch, long; M x N the weight, small), where TensorFlow's product runs mostly on one thread: each
    chunk of K's rows is summed on one thread, and the chunks' sums are added in order, so the result
    does not depend on the number of threads. float32 and float64.
    """
    return load_library().retf_transposed_mat_mul(a, b, name=name)


@tf.RegisterGradient("Retf>TransposedMatMul")
def _transposed_matmul_gradient(op, grad):
    """The gradients of a^T b, as MatMul's with transpose_a: a routed weight gradient has second-order
    gradients too (a gradient penalty, a Hessian-vector product)."""
    a, b = op.inputs
    return tf.linalg.matmul(b, grad, transpose_b=True), tf.linalg.matmul(a, grad)


# The weights (at most this many values) whose MatMul gradient routed_matmul_gradient takes from
# transposed_matmul: up to 128 x 256 retf's product won or tied in every run of
# bench/bench_transposed_matmul.py (1.0-3.3x); larger weights won or lost by batch and run (0.7-1.3x),
# so they keep TensorFlow's product (ops/README.md).
WEIGHT_GRADIENT_MAX_VALUES = 32768


def _weight_gradient_applies(op):
    """Whether op, a MatMul, is a float32 a @ w with w's shape known and small, on a CPU (or unplaced)."""
    if op.get_attr("transpose_a") or op.get_attr("transpose_b") or op.get_attr("T") != tf.float32:
        return False
    if "GPU" in getattr(op, "device", "").upper():  # a tape's recorded op (eager) has no device
        return False
    if getattr(op, "skip_input_indices", None):  # a tape asking for one input's gradient only: TensorFlow's
        return False
    weight = op.inputs[1].shape
    if weight.rank != 2 or not weight.is_fully_defined():
        return False
    return int(weight[0]) * int(weight[1]) <= WEIGHT_GRADIENT_MAX_VALUES


def routed_matmul_gradient(original):
    """The gradient function for MatMul: original's, except that a small weight's gradient comes from
    transposed_matmul (the input's gradient stays TensorFlow's MatMul)."""

    def gradient(op, grad):
        if not _weight_gradient_applies(op):
            return original(op, grad)
        a, w = op.inputs
        grad_a = tf.linalg.matmul(grad, w, transpose_b=True)
        return grad_a, transposed_matmul(a, grad)

    return _route(gradient, original, "weights")


def route_weight_gradients():
    """Make every MatMul gradient built from now on in this process take small weights' gradients from
    transposed_matmul. Idempotent; returns whether it changed the registry."""
    from tensorflow.python.framework import ops as framework_ops  # the gradient registry has no public name
    entry = framework_ops._gradient_registry._registry["MatMul"]
    if _routed(entry["type"], "weights"):
        return False
    entry["type"] = routed_matmul_gradient(entry["type"])
    return True
