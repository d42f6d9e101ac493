"""retf's kernel for TensorFlow's own BatchMatMulV2 on batches of small float32 matrices, and its routing: the
products tf.matmul builds in a graph (attention's scores and weighted sums, and their gradients) carry the
kernel label that selects it, and the kernel hands products of larger matrices to TensorFlow's own."""

import tensorflow as tf

from retf._library import load_kernels
from retf.ops._common import _label_for_retf, onednn_rewrites_graphs

# The kernel label under which retf's BatchMatMulV2 kernel is registered: a node with `_kernel: "retf"` runs it.
BATCH_MATMUL_LABEL = "retf"


def labels_for_retf(op):
    """Whether op, a BatchMatMulV2 node, gets retf's kernel label: float32, on a CPU (or unplaced), and not a rank-2
    MatMul-like product. Which of its calls run retf's tiles and which TensorFlow's kernel the kernel decides by
    the shapes it is given (batch_matmul_kernels.cc: small matrices its tiles, the rest TensorFlow's)."""
    if op.type != "BatchMatMulV2" or op.get_attr("T") != tf.float32 or "GPU" in op.device.upper():
        return False
    ranks = [tensor.shape.rank for tensor in op.inputs]
    return None in ranks or max(ranks) >= 3


def label_batch_product(op):
    """Give op retf's kernel label if labels_for_retf(op) and it has no label yet; whether it did."""
    return _label_for_retf(op, BATCH_MATMUL_LABEL, labels_for_retf)


def routed_batch_mat_mul_v2(original):
    """TensorFlow's generated BatchMatMulV2 wrapper: original's node, labelled for retf's kernel where
    labels_for_retf says so, in a graph."""

    def batch_mat_mul_v2(x, y, adj_x=False, adj_y=False, name=None):
        product = original(x, y, adj_x=adj_x, adj_y=adj_y, name=name)
        if not tf.executing_eagerly() and hasattr(product, "op"):
            label_batch_product(product.op)
        return product

    batch_mat_mul_v2.original = original
    return batch_mat_mul_v2


def route_batch_matmul():
    """Make every BatchMatMulV2 that tf.matmul (tf.linalg.matmul, Keras's layers, BatchMatMulV2's own
    gradient) builds in a graph from now on in this process run retf's kernel, which takes the small matrices'
    products itself and hands the rest to TensorFlow's; where oneDNN's graph rewrite runs, the products stay its.
    Idempotent; returns whether it changed the wrapper."""
    from tensorflow.python.ops import gen_math_ops  # math_ops.matmul reads the wrapper from it at each call

    if onednn_rewrites_graphs():
        return False

    load_kernels()  # the kernel the label names registers with the library
    if getattr(gen_math_ops.batch_mat_mul_v2, "original", None) is not None:
        return False
    gen_math_ops.batch_mat_mul_v2 = routed_batch_mat_mul_v2(gen_math_ops.batch_mat_mul_v2)
    return True
