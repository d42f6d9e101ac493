"""A dense layer's weight gradient, a^T b, summed in parallel over the batch; and MatMul's routed gradient: small
weights' gradients in that product, wide inputs' gradients at small batches as the swapped product's transpose."""

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

# The input gradient g w^T of x @ w, [M, N] = [M, K] x [N, K]^T, where N (x's width) is at least twice M (the batch):
# TensorFlow 2.6.2's product for that shape ran 1.0-4.5x slower than the same product swapped, (w g^T)^T, the
# transpose included (bench/bench_matmul_forms.py, batches of 128 and 512, widths 429-2189); where N was below 2M
# (every width at a batch of 2048) the swapped form lost (0.41-0.92x), and at 272 columns too (0.79x). Narrower inputs
# keep TensorFlow's product at any batch.
SWAPPED_INPUT_GRADIENT_MIN_COLUMNS = 384


def _routes(op):
    """Whether op, a MatMul, is a float32 a @ w on a CPU (or unplaced) whose gradient routed_matmul_gradient builds."""
    if op.get_attr("transpose_a") or op.get_attr("transpose_b") or op.get_attr("T") != tf.float32:
        return False
    if "GPU" in getattr(op, "device", "").upper():  # a tape's recorded op (eager) has no device
        return False
    return not getattr(op, "skip_input_indices", None)  # a tape asking for one input's gradient only: TensorFlow's


def _weight_gradient_applies(op):
    """Whether op, a MatMul, is a float32 a @ w with w's shape known and small, on a CPU (or unplaced)."""
    if not _routes(op):
        return False
    weight = op.inputs[1].shape
    if weight.rank != 2 or not weight.is_fully_defined():
        return False
    return int(weight[0]) * int(weight[1]) <= WEIGHT_GRADIENT_MAX_VALUES


def input_gradient(grad, w):
    """g w^T, x's gradient for x @ w: TensorFlow's product, or the transpose of w g^T where x's width is at least
    SWAPPED_INPUT_GRADIENT_MIN_COLUMNS and at least twice the batch's rows (decided when the step runs where the batch
    is unknown until then). The two differ by float rounding."""
    def product():
        return tf.linalg.matmul(grad, w, transpose_b=True)

    columns = tf.compat.dimension_value(w.shape[0]) if w.shape.rank == 2 else None
    if columns is None or columns < SWAPPED_INPUT_GRADIENT_MIN_COLUMNS:
        return product()

    def swapped():
        return tf.transpose(tf.linalg.matmul(w, grad, transpose_b=True))

    rows = tf.compat.dimension_value(grad.shape[0]) if grad.shape.rank == 2 else None
    if rows is not None:  # known when the graph is built (and always in eager mode)
        return swapped() if 2 * rows <= columns else product()
    return tf.cond(2 * tf.shape(grad)[0] <= columns, swapped, product)


def routed_matmul_gradient(original):
    """The gradient function for MatMul: original's, except that a small weight's gradient comes from
    transposed_matmul, and a wide input's gradient from input_gradient (outside loops: TensorFlow's own there)."""

    def gradient(op, grad):
        if not _routes(op):
            return original(op, grad)
        a, w = op.inputs
        small = _weight_gradient_applies(op)
        in_loop = getattr(op, "_control_flow_context", None) is not None
        if not small and in_loop:
            return original(op, grad)
        grad_a = tf.linalg.matmul(grad, w, transpose_b=True) if in_loop else input_gradient(grad, w)
        grad_w = transposed_matmul(a, grad) if small else tf.linalg.matmul(a, grad, transpose_a=True)
        return grad_a, grad_w

    return _route(gradient, original, "weights")


def route_weight_gradients():
    """Make every MatMul gradient built from now on in this process take small weights' gradients from
    transposed_matmul and wide inputs' gradients from input_gradient. Idempotent; returns whether it changed the
    registry."""
    from tensorflow.python.framework import ops as framework_ops  # the gradient registry has no public name
    entry = framework_ops._gradient_registry._registry["MatMul"]
    if _routed(entry["type"], "weights"):
        return False
    entry["type"] = routed_matmul_gradient(entry["type"])
    return True
