"""retf's kernel for TensorFlow's own BiasAddGrad on float32 (a bias's gradient: the column sums of its layer's output
gradient), and its routing: the BiasAddGrad nodes BiasAdd's gradient builds in a graph (every tf.layers.dense, Keras
Dense and tf.nn.bias_add) carry the kernel label that selects it. TensorFlow's kernel keeps an Eigen reduction's sums
in memory; retf's streams the rows once (ops/cc/kernels/bias_add_grad_kernels.cc)."""

import tensorflow as tf

from retf._library import load_kernels
from retf.ops._common import _label_for_retf, onednn_rewrites_graphs

# The kernel label under which retf's BiasAddGrad kernel is registered: a node with `_kernel: "retf"` runs it.
BIAS_ADD_GRAD_LABEL = "retf"


def bias_gradient_takes_retf(op):
    """Whether op, a BiasAddGrad node, gets retf's kernel label: float32, channels last (NHWC, the default), on a CPU
    (or unplaced)."""
    if op.type != "BiasAddGrad" or op.get_attr("T") != tf.float32 or "GPU" in op.device.upper():
        return False
    return op.get_attr("data_format") in (b"NHWC", "NHWC")


def label_bias_gradient(op):
    """Give op retf's kernel label if bias_gradient_takes_retf(op) and it has no label yet; whether it did."""
    return _label_for_retf(op, BIAS_ADD_GRAD_LABEL, bias_gradient_takes_retf)


def routed_bias_add_grad(original):
    """TensorFlow's generated BiasAddGrad wrapper: original's node, labelled for retf's kernel where
    bias_gradient_takes_retf says so, in a graph."""

    def bias_add_grad(out_backprop, data_format="NHWC", name=None):
        gradient = original(out_backprop, data_format=data_format, name=name)
        if not tf.executing_eagerly() and hasattr(gradient, "op"):
            label_bias_gradient(gradient.op)
        return gradient

    bias_add_grad.original = original
    return bias_add_grad


def route_bias_gradients():
    """Make every BiasAddGrad that BiasAdd's gradient builds in a graph from now on in this process run retf's kernel;
    where oneDNN's graph rewrite runs, the gradients stay its. Idempotent; returns whether it changed the wrapper."""
    from tensorflow.python.ops import gen_nn_ops  # nn_grad reads the wrapper from it at each call

    if onednn_rewrites_graphs():
        return False
    load_kernels()  # the kernel the label names registers with the library
    if getattr(gen_nn_ops.bias_add_grad, "original", None) is not None:
        return False
    gen_nn_ops.bias_add_grad = routed_bias_add_grad(gen_nn_ops.bias_add_grad)
    return True
