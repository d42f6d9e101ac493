"""Normalizations in retf's kernels, forward and gradient, and their routing.

- A dense layer's batch normalization: tf.nn.moments over a matrix's rows and tf.nn.batch_normalization of a
  matrix with one mean, variance, offset and scale per column (tf.layers.batch_normalization and Keras's
  BatchNormalization on a dense layer's output build both, as TF 1.15 does, when their inputs are matrices).
- A layer normalization over the last axis: tf.nn.moments over each row of the matrix of a tensor's other axes
  and tf.nn.batch_normalization with one mean and variance per row and one offset and scale per column
  (tf.contrib.layers.layer_norm, BERT's layer_norm, and Keras's LayerNormalization in TF 1.15's form build both).
"""

import tensorflow as tf

from retf._library import load_kernels, load_library

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


def layer_moments(x, name=None):
    """(mean, variance) of each row of the matrix x, as tf.nn.moments(x, axes=[-1]) computes them."""
    return load_library().retf_layer_moments(x, name=name or "LayerMoments")


@tf.RegisterGradient("Retf>LayerMoments")
def _layer_moments_gradient(op, mean_grad, variance_grad):
    x, (mean, _) = op.inputs[0], op.outputs
    if mean_grad is None and variance_grad is None:
        return [None]
    mean_grad = tf.zeros_like(mean) if mean_grad is None else mean_grad
    variance_grad = tf.zeros_like(mean) if variance_grad is None else variance_grad
    return [load_library().retf_layer_moments_grad(x, mean, mean_grad, variance_grad)]


def layer_normalize(x, mean, variance, offset, scale, epsilon, name=None):
    """x * inv + (offset - mean * inv), inv = scale / sqrt(variance + epsilon), mean and variance vectors of the
    matrix x's rows, offset and scale of its columns: tf.nn.batch_normalization of a layer normalization."""
    return load_library().retf_layer_normalize(x, mean, variance, offset, scale, epsilon=epsilon,
                                               name=name or "LayerNormalize")


@tf.RegisterGradient("Retf>LayerNormalize")
def _layer_normalize_gradient(op, y_grad):
    x, mean, variance, _, scale = op.inputs
    return load_library().retf_layer_normalize_grad(y_grad, x, mean, variance, scale,
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


def _layer_moments_grad_in_tensorflows_ops(x, mean, mean_grad, variance_grad):
    columns = tf.cast(tf.shape(x)[1], x.dtype)
    return [mean_grad[:, None] / columns
            + 2.0 * variance_grad[:, None] * (x - tf.stop_gradient(mean)[:, None]) / columns]


def _layer_normalize_grad_in_tensorflows_ops(y_grad, x, mean, variance, scale, epsilon):
    root = tf.math.rsqrt(variance + epsilon)
    inv = root[:, None] * scale
    centered = y_grad * (x - mean[:, None])
    return [y_grad * inv, -tf.reduce_sum(y_grad * inv, 1), -0.5 * root * root * root * tf.reduce_sum(centered * scale, 1),
            tf.reduce_sum(y_grad, 0), tf.reduce_sum(centered * root[:, None], 0)]


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


@tf.RegisterGradient("Retf>LayerMomentsGrad")
def _layer_moments_grad_gradient(op, x_grad_grad):
    return _second_order(op, [x_grad_grad], _layer_moments_grad_in_tensorflows_ops)


@tf.RegisterGradient("Retf>LayerNormalizeGrad")
def _layer_normalize_grad_gradient(op, *grads):
    epsilon = op.get_attr("epsilon")
    return _second_order(op, grads, lambda *inputs: _layer_normalize_grad_in_tensorflows_ops(*inputs, epsilon))


# The forms routed in this process: "batch" (a matrix's columns over its rows) and "layer" (each row over the last
# axis); route_batch_moments and route_layer_moments each add theirs.
_ROUTED = set()


def _read(value):
    """A variable as the tensor of its value (Keras passes its gamma and beta as variables); anything else as it is."""
    from tensorflow.python.ops import variables

    return tf.convert_to_tensor(value) if isinstance(value, variables.Variable) else value


def _on_cpu(x, rank):
    """Whether x is a float32 or float64 tensor of a known rank that rank(x.shape.rank) accepts, on a CPU (or
    unplaced)."""
    if not isinstance(x, tf.Tensor) or x.dtype not in FLOATS or x.shape.rank is None or not rank(x.shape.rank):
        return False
    return "GPU" not in getattr(x, "device", "").upper()


def _matrix(x):
    """Whether x is a float32 or float64 matrix on a CPU (or unplaced)."""
    return _on_cpu(x, lambda rank: rank == 2)


def _layers(x):
    """Whether x is a float32 or float64 tensor of rank 2 or more on a CPU (or unplaced): rows over its last axis."""
    return _on_cpu(x, lambda rank: rank >= 2)


def _axes(axes):
    """axes, as tf.nn.moments takes them, as a list of ints; None for a tensor of axes."""
    try:
        return [int(a) for a in axes]
    except (TypeError, ValueError):
        return None


def _dimension(shape, axis):
    return tf.compat.dimension_value(shape[axis])


def _vectors_of(size, vectors, dtype):
    """Whether each of vectors is a tensor of dtype of rank 1 whose length can be size."""
    return all(isinstance(v, tf.Tensor) and v.dtype == dtype and v.shape.rank == 1
               and _dimension(v.shape, 0) in (None, size) for v in vectors)


def _row_statistics(x, statistics):
    """Whether each of statistics holds one value per row of x over its last axis, as tf.nn.moments(x, [-1],
    keep_dims=True) gives it: x's shape but a last dimension of 1 (a dimension unknown in x unknown in it too)."""
    leading = x.shape.as_list()[:-1]
    return all(isinstance(v, tf.Tensor) and v.dtype == x.dtype and v.shape.rank == x.shape.rank
               and v.shape.as_list() == leading + [1] for v in statistics)


def _as_rows(x):
    """x as the matrix of its rows over its last axis."""
    if x.shape.rank == 2:
        return x
    rows = tf.reshape(x, tf.stack([-1, tf.shape(x)[-1]]))
    rows.set_shape([None, _dimension(x.shape, -1)])
    return rows


def _per_row(vector, x, keep):
    """A vector of one value per row of x's matrix of rows, in x's shape less its last axis (keep: with 1 there)."""
    if x.shape.rank == 2:
        return tf.expand_dims(vector, 1) if keep else vector
    shape = tf.shape(x)[:-1]
    result = tf.reshape(vector, tf.concat([shape, [1]], 0) if keep else shape)
    result.set_shape(x.shape[:-1].concatenate([1] if keep else []))
    return result


def routed_moments(original):
    """tf.nn.moments (TensorFlow 1.x's signature): retf's kernels for a matrix's columns over its rows and for the
    rows over a tensor's last axis, as this process routes them; original's function for everything else."""

    def moments_v1(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
        keep = keepdims if keepdims is not None else keep_dims
        tensor = _read(x)
        axes_list = _axes(axes)
        if "batch" in _ROUTED and _matrix(tensor) and axes_list in ([0], [-2]):
            with tf.name_scope(name or "moments"):
                mean, variance = moments(tensor)
                if keep:
                    mean, variance = tf.expand_dims(mean, 0), tf.expand_dims(variance, 0)
                return mean, variance
        if "layer" in _ROUTED and _layers(tensor) and axes_list in ([-1], [tensor.shape.rank - 1]):
            with tf.name_scope(name or "moments"):
                mean, variance = layer_moments(_as_rows(tensor))
                return _per_row(mean, tensor, keep), _per_row(variance, tensor, keep)
        return original(x, axes, shift=shift, name=name, keep_dims=keep_dims, keepdims=keepdims)

    moments_v1.original = original
    moments_v1.__doc__ = original.__doc__
    return moments_v1


def routed_batch_normalization(original):
    """tf.nn.batch_normalization: retf's kernels, as this process routes them, for a matrix with a vector per column
    of each parameter and for the rows over a tensor's last axis with a mean and variance per row (as
    tf.nn.moments(x, [-1], keep_dims=True) gives them) and an offset and scale per column, offset and scale given;
    original's function for everything else."""

    def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
        x, mean, variance, offset, scale = (_read(v) for v in (x, mean, variance, offset, scale))
        if "batch" in _ROUTED and _matrix(x) and _vectors_of(_dimension(x.shape, 1), (mean, variance, offset, scale),
                                                             x.dtype):
            with tf.name_scope(name or "batchnorm"):
                return batch_normalize(x, mean, variance, offset, scale, float(variance_epsilon))
        if ("layer" in _ROUTED and _layers(x) and _row_statistics(x, (mean, variance))
                and _vectors_of(_dimension(x.shape, -1), (offset, scale), x.dtype)):
            with tf.name_scope(name or "batchnorm"):
                rows = _as_rows(x)
                y = layer_normalize(rows, tf.reshape(mean, [-1]), tf.reshape(variance, [-1]), offset, scale,
                                    float(variance_epsilon))
                if x.shape.rank == 2:
                    return y
                y = tf.reshape(y, tf.shape(x))
                y.set_shape(x.shape)
                return y
        return original(x, mean, variance, offset, scale, variance_epsilon, name=name)

    batch_normalization.original = original
    batch_normalization.__doc__ = original.__doc__
    return batch_normalization


def route_batch_moments():
    """Make tf.nn.moments and tf.nn.batch_normalization run retf's kernels on a dense layer's batch normalization
    (routed_moments, routed_batch_normalization). Idempotent; returns whether it changed them."""
    return _route("batch")


def route_layer_moments():
    """Make tf.nn.moments and tf.nn.batch_normalization run retf's kernels on a layer normalization over the last
    axis (routed_moments, routed_batch_normalization). Idempotent; returns whether it changed them."""
    return _route("layer")


def _route(form):
    """Route form ("batch" or "layer"): tf.nn.moments and tf.nn.batch_normalization, as TensorFlow's modules and every
    API namespace loaded in this process (tf.nn, tf.compat.v1.nn, and the tensorflow.compat.v2 that Keras calls)
    call them from now on, are the routed functions; a namespace loaded later takes them from nn_impl itself."""
    import sys

    from tensorflow.python.ops import nn, nn_impl  # moments_v2 and Keras read them from these modules at each call

    load_kernels()  # the routed functions build the library's ops on first use
    changed = form not in _ROUTED
    _ROUTED.add(form)
    if getattr(nn_impl.moments, "original", None) is not None:
        return changed
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
    return changed
