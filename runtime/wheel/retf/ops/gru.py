"""A GRU over whole sequences in one op (gru_recurrence, with its gradient), and its routing into
tf.nn.dynamic_rnn over a tf.nn.rnn_cell.GRUCell."""

import tensorflow as tf

from retf._library import load_library

GRU_RECURRENCE = "Retf>GRURecurrence"


def gru_recurrence(x_ru, x_c, h0, lengths, w_ru_h, w_c_h, name=None):
    """The recurrence of tf.nn.rnn_cell.GRUCell over time-major sequences, the inputs' products taken.

    x_ru [T, B, 2H] and x_c [T, B, H] are each step's x W_ru[:I] + b_ru and x W_c[:I] + b_c (W_ru the
    cell's gates kernel, W_c its candidate kernel, I the input's depth); h0 [B, H] the initial state;
    lengths [B] int32 each row's number of steps (clamped to [0, T]); w_ru_h = W_ru[I:] and w_c_h = W_c[I:].
    Returns (outputs [T, B, H], final [B, H]) as tf.nn.dynamic_rnn's loop returns them: zero outputs past
    a row's length, whose final state is its last step's.
    """
    # named without the op's ">", which TF 1.15 refuses in a node's name (a served graph keeps this node)
    outputs, final, _, _ = load_library().retf_gru_recurrence(x_ru, x_c, h0, lengths, w_ru_h, w_c_h,
                                                              name=name or "GRURecurrence")
    return outputs, final


@tf.RegisterGradient(GRU_RECURRENCE)
def _gru_recurrence_gradient(op, d_outputs, d_final, d_gates, d_h_prev):
    """The gradients for x_ru, x_c, h0 and the two recurrent weights (none for lengths). gates and h_prev
    are kept for this gradient only; nothing differentiates them."""
    del d_gates, d_h_prev
    _, _, h0, lengths, w_ru_h, w_c_h = op.inputs
    outputs, _, gates, h_prev = op.outputs
    if d_outputs is None:
        d_outputs = tf.zeros_like(outputs)
    if d_final is None:
        d_final = tf.zeros_like(h0)
    d_x_ru, d_x_c, d_h0, d_w_ru_h, d_w_c_h = load_library().retf_gru_recurrence_grad(
        d_outputs, d_final, gates, h_prev, lengths, w_ru_h, w_c_h)
    return d_x_ru, d_x_c, d_h0, None, d_w_ru_h, d_w_c_h


def _plain_gru(cell, inputs, initial_state):
    """Whether a dynamic_rnn loop of cell over inputs is one gru_recurrence computes: a GRUCell itself (not
    a subclass or wrapper) with its default tanh, over one float32 time-major tensor of known depth, in a
    graph."""
    from tensorflow.python.eager import context
    from tensorflow.python.ops import math_ops, rnn_cell_impl

    if type(cell) not in (rnn_cell_impl.GRUCell, tf.compat.v1.nn.rnn_cell.GRUCell):  # TensorFlow's, Keras's
        return False
    if cell._activation is not math_ops.tanh:
        return False
    if context.executing_eagerly() or not isinstance(inputs, tf.Tensor) or not isinstance(initial_state, tf.Tensor):
        return False
    if inputs.dtype != tf.float32 or initial_state.dtype != tf.float32:
        return False
    if inputs.shape.rank != 3 or initial_state.shape.rank != 2:
        return False
    return tf.compat.dimension_value(inputs.shape[2]) is not None  # a Dimension in the 1.x API, else an int


def _weight(variable):
    return tf.convert_to_tensor(variable)  # a variable's value; a partitioned one's parts concatenated


def _gru_loop(cell, inputs, initial_state, sequence_length):
    """dynamic_rnn's loop of a plain GRUCell (see _plain_gru) as gru_recurrence: (outputs [T, B, H], final)."""
    shape, width, units = tf.shape(inputs), tf.compat.dimension_value(inputs.shape[2]), cell._num_units
    steps, batch = shape[0], shape[1]
    if not cell.built:  # the cell's variables, named as the loop's first step names them (ops never run)
        cell(tf.zeros([1, width]), tf.zeros([1, units]))
    gate_kernel, candidate_kernel = _weight(cell._gate_kernel), _weight(cell._candidate_kernel)
    flat = tf.reshape(inputs, [-1, width])
    x_ru = tf.nn.bias_add(tf.linalg.matmul(flat, gate_kernel[:width]), _weight(cell._gate_bias))
    x_c = tf.nn.bias_add(tf.linalg.matmul(flat, candidate_kernel[:width]), _weight(cell._candidate_bias))
    if sequence_length is None:
        lengths = tf.fill([batch], steps)
    else:
        lengths = tf.cast(sequence_length, tf.int32)
    outputs, final = gru_recurrence(tf.reshape(x_ru, [steps, batch, 2 * units]),
                                    tf.reshape(x_c, [steps, batch, units]), initial_state, lengths,
                                    gate_kernel[width:], candidate_kernel[width:])
    outputs.set_shape(inputs.shape[:2].concatenate([units]))
    final.set_shape(initial_state.shape[:1].concatenate([units]))
    return outputs, final


def routed_dynamic_rnn_loop(original):
    """tf.nn.dynamic_rnn's inner loop: original's, except that a plain GRUCell's runs as gru_recurrence."""

    def loop(cell, inputs, initial_state, parallel_iterations, swap_memory, sequence_length=None, dtype=None):
        if not _plain_gru(cell, inputs, initial_state):
            return original(cell, inputs, initial_state, parallel_iterations, swap_memory,
                            sequence_length=sequence_length, dtype=dtype)
        return _gru_loop(cell, inputs, initial_state, sequence_length)

    loop.original = original
    return loop


def route_dynamic_rnn():
    """Make every tf.nn.dynamic_rnn (tf.compat.v1.nn.dynamic_rnn, bidirectional_dynamic_rnn) built from now
    on in this process run a plain tf.nn.rnn_cell.GRUCell's loop as gru_recurrence. Idempotent; returns
    whether it changed the loop."""
    from tensorflow.python.ops import rnn  # dynamic_rnn reads its loop from the module at each call

    if getattr(rnn._dynamic_rnn_loop, "original", None) is not None:
        return False
    rnn._dynamic_rnn_loop = routed_dynamic_rnn_loop(rnn._dynamic_rnn_loop)
    return True
