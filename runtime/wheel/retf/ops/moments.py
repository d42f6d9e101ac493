"""A dense layer's batch normalization in retf's kernels: tf.nn.moments over a matrix's rows and
tf.nn.batch_normalization of a matrix with one mean, variance, offset and scale per column, forward and gradient,
and their routing (tf.layers.batch_normalization and Keras's BatchNormalization on a dense layer's output build
both, as TF 1.15 does, when their inputs are matrices)."""

import tensorflow as tf

from retf._library import load_library

FLOATS = (tf.float32, tf.float64)


def moments(x, name=None):
    """(mean, variance) of each column of the matrix x, as tf.nn.moments(x, axes=[0]) computes them."""
    return load_library().retf_moments(x, name=name or "Moments")  # TF 1.15 refuses the op's name (its ">")


@tf.RegisterGradient("Retf>Moments")
def _moments_gradient(op, mean_grad, variance_grad):
    x, (mean, _) = op.inputs[0], op.outputs
    if mean_grad is None and variance_grad is None:
        return [None]
    mean_grad = tf.zeros_like(mean) if mean_grad is None else mean_grad
    variance_grad = tf.zeros_like(mean) if variance_grad is None else variance_grad
    return [load_library().retf_moments_grad(x, mean, mean_grad, variance_grad)]


def batch_normalize(x, mean, variance, offset, scale, epsilon, name=None):
    """x * inv + (offset - mean * inv), inv = scale / sqrt(variance + epsilon): tf.nn.batch_normalization of the
    matrix x with vectors of its columns."""
    return load_library().retf_batch_normalize(x, mean, variance, offset, scale, epsilon=epsilon,
                                               name=name or "BatchNormalize")


@tf.RegisterGradient("Retf>BatchNormalize")
def _batch_normalize_gradient(op, y_grad):
    x, mean, variance, _, scale = op.inputs
    return load_library().retf_batch_normalize_grad(y_grad, x, mean, variance, scale,
                                                     epsilon=op.get_attr("epsilon"))


def _moments_grad_in_tensorflows_ops(x, mean, mean_grad, variance_grad):
    # tf.nn.moments reads the mean into the variance through tf.stop_gradient, so its second-order gradients take no
    # path through it
    rows = tf.cast(tf.shape(x)[0], x.dtype)
    return [mean_grad / rows + 2.0 * variance_grad * (x - tf.stop_gradient(mean)) / rows]


def _batch_normalize_grad_in_tensorflows_ops(y_grad, x, mean, variance, scale, epsilon):
    root = tf.math.rsqrt(variance + epsilon)
    inv = root * scale
    sum_g, sum_gd = tf.reduce_sum(y_grad, 0), tf.reduce_sum(y_grad * (x - mean), 0)
    return [y_grad * inv, -inv * sum_g, -0.5 * root * root * root * scale * sum_gd, sum_g, root * sum_gd]


def _second_order(op, grads, build):
    """The gradients of op's inputs from those of its outputs, through ``build(*inputs)``: the same values in
    TensorFlow's ops (a gradient penalty, a Hessian-vector product through a batch normalization)."""
    inputs = list(op.inputs)
    if all(grad is None for grad in grads):
        return [None] * len(inputs)
    if tf.executing_eagerly():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = build(*inputs)
        pairs = [(output, grad) for output, grad in zip(outputs, grads) if grad is not None]
        return tape.gradient([o for o, _ in pairs], inputs, output_gradients=[g for _, g in pairs])
    pairs = [(output, grad) for output, grad in zip(build(*inputs), grads) if grad is not None]
    # each input's partial derivative: the inputs depend on one another (y's gradient on x) through the graph above
    return tf.gradients([o for o, _ in pairs], inputs, grad_ys=[g for _, g in pairs], stop_gradients=inputs)


@tf.RegisterGradient("Retf>MomentsGrad")
def _moments_grad_gradient(op, x_grad_grad):
    return _second_order(op, [x_grad_grad], _moments_grad_in_tensorflows_ops)


@tf.RegisterGradient("Retf>BatchNormalizeGrad")
def _batch_normalize_grad_gradient(op, *grads):
    epsilon = op.get_attr("epsilon")
    return _second_order(op, grads, lambda *inputs: _batch_normalize_grad_in_tensorflows_ops(*inputs, epsilon))


def _read(value):
    """A variable as the tensor of its value (Keras passes its gamma and beta as variables); anything else as it is."""
    from tensorflow.python.ops import variables

    return tf.convert_to_tensor(value) if isinstance(value, variables.Variable) else value


def _matrix(x):
    """Whether x is a float32 or float64 tensor of rank 2 on a CPU (or unplaced)."""
    if not isinstance(x, tf.Tensor) or x.dtype not in FLOATS or x.shape.rank != 2:
        return False
    return "GPU" not in getattr(x, "device", "").upper()


def _over_rows(x, axes):
    """Whether axes, as tf.nn.moments takes them, name only the rows of the rank-2 x."""
    try:
        axes = [int(a) for a in axes]
    except (TypeError, ValueError):  # a tensor of axes
        return False
    return axes in ([0], [-2])


def routed_moments(original):
    """tf.nn.moments (TensorFlow 1.x's signature): retf's kernel for a matrix's columns over its rows, original's
    function for everything else."""

    def moments_v1(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
        keep = keepdims if keepdims is not None else keep_dims
        tensor = _read(x)
        if not _matrix(tensor) or not _over_rows(tensor, axes):
            return original(x, axes, shift=shift, name=name, keep_dims=keep_dims, keepdims=keepdims)
        with tf.name_scope(name or "moments"):
            mean, variance = moments(tensor)
            if keep:
                mean, variance = tf.expand_dims(mean, 0), tf.expand_dims(variance, 0)
            return mean, variance

    moments_v1.original = original
    moments_v1.__doc__ = original.__doc__
    return moments_v1


def routed_batch_normalization(original):
    """tf.nn.batch_normalization: retf's kernel for a matrix with a vector per column of each parameter (offset and
    scale given), original's function for everything else."""

    def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
        x, mean, variance, offset, scale = (_read(v) for v in (x, mean, variance, offset, scale))
        vectors = (mean, variance, offset, scale)
        if (not _matrix(x)
                or not all(isinstance(v, tf.Tensor) and v.dtype == x.dtype and v.shape.rank == 1 for v in vectors)
                or not all(tf.compat.dimension_value(v.shape[0]) in (None, tf.compat.dimension_value(x.shape[1]))
                           for v in vectors)):
            return original(x, mean, variance, offset, scale, variance_epsilon, name=name)
        with tf.name_scope(name or "batchnorm"):
            return batch_normalize(x, mean, variance, offset, scale, float(variance_epsilon))

    batch_normalization.original = original
    batch_normalization.__doc__ = original.__doc__
    return batch_normalization


def route_batch_moments():
    """Make tf.nn.moments and tf.nn.batch_normalization, as TensorFlow's modules and every API namespace loaded in
    this process (tf.nn, tf.compat.v1.nn, and the tensorflow.compat.v2 that Keras's BatchNormalization calls) call
    them from now on, run retf's kernels on matrices; a namespace loaded later takes the routed functions from
    nn_impl itself. Idempotent; returns whether it changed them."""
    import sys

    from tensorflow.python.ops import nn, nn_impl  # moments_v2 and Keras read them from these modules at each call

    load_library()
    if getattr(nn_impl.moments, "original", None) is not None:
        return False
    routed = {"moments": routed_moments(nn_impl.moments),
              "batch_normalization": routed_batch_normalization(nn_impl.batch_normalization)}
    for module in (nn_impl, nn):
        for key, function in routed.items():
            setattr(module, key, function)
    for name, module in list(sys.modules.items()):
        if not name.startswith("tensorflow") or not name.endswith(".nn") or module is None:
            continue
        for key, function in routed.items():  # tf.nn.moments of the 2.x API is moments_v2, which calls nn_impl's
            if getattr(module, key, None) is function.original:
                setattr(module, key, function)
    return True
