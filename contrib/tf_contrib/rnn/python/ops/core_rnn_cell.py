"""TF 1.x's contrib core_rnn_cell: the linear map RNN cells of TF 1.x code are built from.

_Linear(args, output_size, build_bias) creates, in the current variable scope, a "kernel" of shape
[sum of the args' last dimensions, output_size] and, unless build_bias is false, a "bias" of shape
[output_size] (zeros unless bias_initializer says otherwise; never partitioned); calling it
returns concat(args, 1) @ kernel + bias. Variable names, shapes, defaults and arithmetic are TF
1.15's, so checkpoints and results carry over (DIN/DIEN attention GRU cells are written on it).
"""
from tensorflow.compat import v1 as tf

_KERNEL = "kernel"
_BIAS = "bias"


def _as_list(args):
    if args is None or (isinstance(args, (list, tuple)) and not args):
        raise ValueError("`args` must be specified")
    return (list(args), True) if isinstance(args, (list, tuple)) else ([args], False)


class _Linear(object):
    """concat(args, 1) @ kernel (+ bias), its variables made once, in the scope where it is built."""

    def __init__(self, args, output_size, build_bias, bias_initializer=None, kernel_initializer=None):
        args, self._is_sequence = _as_list(args)
        self._build_bias = build_bias
        width = 0
        for arg in args:
            shape = arg.get_shape()
            if shape.ndims != 2:
                raise ValueError("linear is expecting 2D arguments: %s" % [a.get_shape() for a in args])
            if shape.dims[1].value is None:
                raise ValueError("linear expects shape[1] to be provided for shape %s, but saw %s"
                                 % (shape, shape.dims[1]))
            width += shape.dims[1].value
        dtype = args[0].dtype
        with tf.variable_scope(tf.get_variable_scope()) as outer:
            self._weights = tf.get_variable(_KERNEL, [width, output_size], dtype=dtype,
                                            initializer=kernel_initializer)
            if build_bias:
                with tf.variable_scope(outer) as inner:
                    inner.set_partitioner(None)
                    if bias_initializer is None:
                        bias_initializer = tf.constant_initializer(0.0)
                    self._biases = tf.get_variable(_BIAS, [output_size], dtype=dtype, initializer=bias_initializer)

    def __call__(self, args):
        if not self._is_sequence:
            args = [args]
        joined = args[0] if len(args) == 1 else tf.concat(args, 1)
        result = tf.matmul(joined, self._weights)
        return tf.nn.bias_add(result, self._biases) if self._build_bias else result


def _linear(args, output_size, bias, bias_initializer=None, kernel_initializer=None):
    """The functional form: _Linear built and applied once."""
    return _Linear(args, output_size, bias, bias_initializer=bias_initializer,
                   kernel_initializer=kernel_initializer)(args)
