"""TF 1.x's contrib core_rnn_cell: the linear map RNN cells of TF 1.x code are built from.

_Linear(args, output_size, build_bias) creates, in the current variable scope, a "kernel" of shape
[sum of the args' last dimensions, output_size] and, unless build_bias is false, a "bias" of shape
[output_size] (zeros unless bias_initializer says otherwise; never partitioned); calling it
returns concat(args, 1) @ kernel + bias. Variable names, shapes, defaults and arithmetic are TF
1.15's, so checkpoints and results carry over (DIN/DIEN attention GRU cells are written on it).

EmbeddingWrapper and OutputProjectionWrapper, which TensorFlow 2.x dropped, are written here the same way:
their variables are "embedding_wrapper/embedding" and "output_projection_wrapper/kernel" and ".../bias".
"""
import math

from tensorflow.compat import v1 as tf
from tensorflow.python.ops.rnn_cell_impl import assert_like_rnncell

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


class _Wrapper(tf.nn.rnn_cell.RNNCell):
    """A cell around ``cell``, with its state and zero state."""

    def __init__(self, cell, reuse=None):
        super(_Wrapper, self).__init__(_reuse=reuse)
        assert_like_rnncell("cell", cell)
        self._cell = cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    def zero_state(self, batch_size, dtype):
        with tf.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            return self._cell.zero_state(batch_size, dtype)


class EmbeddingWrapper(_Wrapper):
    """``cell`` run on the embeddings of its integer inputs: an "embedding" [embedding_classes, embedding_size],
    kept on the CPU, drawn from ``initializer``, else the scope's, else uniform(-sqrt(3), sqrt(3)) (variance 1)."""

    def __init__(self, cell, embedding_classes, embedding_size, initializer=None, reuse=None):
        super(EmbeddingWrapper, self).__init__(cell, reuse=reuse)
        if embedding_classes <= 0 or embedding_size <= 0:
            raise ValueError("Both embedding_classes and embedding_size must be > 0: %d, %d."
                             % (embedding_classes, embedding_size))
        self._embedding_classes = embedding_classes
        self._embedding_size = embedding_size
        self._initializer = initializer

    def call(self, inputs, state):
        with tf.device("/cpu:0"):
            initializer = self._initializer or tf.get_variable_scope().initializer
            if not initializer:
                initializer = tf.random_uniform_initializer(-math.sqrt(3), math.sqrt(3))
            dtype = state[0].dtype if isinstance(state, tuple) else state.dtype
            embedding = tf.get_variable("embedding", [self._embedding_classes, self._embedding_size],
                                        initializer=initializer, dtype=dtype)
            embedded = tf.nn.embedding_lookup(embedding, tf.reshape(inputs, [-1]))
            return self._cell(embedded, state)


class OutputProjectionWrapper(_Wrapper):
    """``cell`` with its output mapped by a _Linear ("kernel", "bias") to ``output_size``, then ``activation``."""

    def __init__(self, cell, output_size, activation=None, reuse=None):
        super(OutputProjectionWrapper, self).__init__(cell, reuse=reuse)
        if output_size < 1:
            raise ValueError("Parameter output_size must be > 0: %d." % output_size)
        self._output_size = output_size
        self._activation = activation
        self._linear = None

    @property
    def output_size(self):
        return self._output_size

    def call(self, inputs, state):
        output, new_state = self._cell(inputs, state)
        if self._linear is None:
            self._linear = _Linear(output, self._output_size, True)
        projected = self._linear(output)
        return (self._activation(projected) if self._activation else projected), new_state
