"""tf.contrib.legacy_seq2seq: TF 1.15's sequence-to-sequence models on unrolled RNNs (the old translate tutorial's
embedding_attention_seq2seq and model_with_buckets, char-rnn's rnn_decoder and sequence_loss_by_example), written
here from TF 1.15's definitions: its signatures, variable scopes and names ("attention_decoder/AttnW_0",
"rnn/embedding_wrapper/embedding", ...), its arithmetic and losses, so checkpoints and results carry over.

A sequence is a Python list with one tensor a step: [batch] symbol ids, or [batch, depth] inputs. With
feed_previous=True a decoder reads only its first input (GO) and then feeds itself the embedding of the argmax of
its previous output (greedy decoding). feed_previous may be a boolean tensor: both decoders are then built, the
second reusing the first's variables, and tf.cond picks one. The variables of TF 1.15's helpers come from
contrib.rnn's _Linear ("kernel", "bias"), EmbeddingWrapper and OutputProjectionWrapper."""
import copy

from tensorflow.compat import v1 as _v1
from tensorflow.contrib import part
from tensorflow.contrib.rnn.python.ops.core_rnn_cell import EmbeddingWrapper, OutputProjectionWrapper, _Linear
from tensorflow.python.framework import dtypes, ops, tensor_shape
from tensorflow.python.ops import (
    array_ops,
    control_flow_ops,
    embedding_ops,
    math_ops,
    nn_ops,
    rnn,
    rnn_cell_impl,
    variable_scope,
)
from tensorflow.python.util import nest

__all__ = ["attention_decoder", "basic_rnn_seq2seq", "embedding_attention_decoder", "embedding_attention_seq2seq",
           "embedding_rnn_decoder", "embedding_rnn_seq2seq", "embedding_tied_rnn_seq2seq", "model_with_buckets",
           "one2many_rnn_seq2seq", "rnn_decoder", "sequence_loss", "sequence_loss_by_example", "tied_rnn_seq2seq"]


# tf.nn.rnn_cell's cells are Keras' copy of rnn_cell_impl in TensorFlow 2.6; TensorFlow's internal ones its own.
_RNN_CELLS = (_v1.nn.rnn_cell.RNNCell, rnn_cell_impl.RNNCell)


def _extract_argmax_and_embed(embedding, output_projection=None, update_embedding=True):
    """A loop_function: the embedding of the argmax of the previous output (first mapped by output_projection's
    (W, B)); without update_embedding no gradient reaches the embedding through it."""
    def loop_function(prev, _):
        if output_projection is not None:
            prev = nn_ops.xw_plus_b(prev, output_projection[0], output_projection[1])
        embedded = embedding_ops.embedding_lookup(embedding, math_ops.argmax(prev, 1))
        return embedded if update_embedding else array_ops.stop_gradient(embedded)

    return loop_function


def _check_projection(output_projection, num_symbols, dtype):
    weights = ops.convert_to_tensor(output_projection[0], dtype=dtype)
    weights.get_shape().assert_is_compatible_with([None, num_symbols])
    biases = ops.convert_to_tensor(output_projection[1], dtype=dtype)
    biases.get_shape().assert_is_compatible_with([num_symbols])


def _either_decoder(feed_previous, decode, steps, state_structure):
    """decode(True) and decode(False), the second reusing the first's variables, picked by the boolean tensor
    ``feed_previous``: (the ``steps`` outputs, the final state packed as ``state_structure``)."""
    def branch(greedy):
        with variable_scope.variable_scope(variable_scope.get_variable_scope(), reuse=None if greedy else True):
            outputs, state = decode(greedy)
        return outputs + nest.flatten(state)

    outputs_and_state = control_flow_ops.cond(feed_previous, lambda: branch(True), lambda: branch(False))
    state = outputs_and_state[steps:]
    if nest.is_sequence(state_structure):
        return outputs_and_state[:steps], nest.pack_sequence_as(structure=state_structure, flat_sequence=state)
    return outputs_and_state[:steps], state[0]


def rnn_decoder(decoder_inputs, initial_state, cell, loop_function=None, scope=None):
    """``cell`` run over ``decoder_inputs`` from ``initial_state``: (outputs, final state). With
    loop_function(prev, i), every step after the first reads it of the previous output instead of its input."""
    with variable_scope.variable_scope(scope or "rnn_decoder"):
        state, outputs, prev = initial_state, [], None
        for i, inp in enumerate(decoder_inputs):
            if loop_function is not None and prev is not None:
                with variable_scope.variable_scope("loop_function", reuse=True):
                    inp = loop_function(prev, i)
            if i > 0:
                variable_scope.get_variable_scope().reuse_variables()
            output, state = cell(inp, state)
            outputs.append(output)
            if loop_function is not None:
                prev = output
    return outputs, state


def basic_rnn_seq2seq(encoder_inputs, decoder_inputs, cell, dtype=dtypes.float32, scope=None):
    """An encoder (a copy of ``cell``) whose final state starts the decoder (``cell``); nothing shared."""
    with variable_scope.variable_scope(scope or "basic_rnn_seq2seq"):
        _, encoder_state = rnn.static_rnn(copy.deepcopy(cell), encoder_inputs, dtype=dtype)
        return rnn_decoder(decoder_inputs, encoder_state, cell)


def tied_rnn_seq2seq(encoder_inputs, decoder_inputs, cell, loop_function=None, dtype=dtypes.float32, scope=None):
    """basic_rnn_seq2seq with one set of variables for the encoder and the decoder."""
    with variable_scope.variable_scope("combined_tied_rnn_seq2seq"):
        scope = scope or "tied_rnn_seq2seq"
        _, encoder_state = rnn.static_rnn(cell, encoder_inputs, dtype=dtype, scope=scope)
        variable_scope.get_variable_scope().reuse_variables()
        return rnn_decoder(decoder_inputs, encoder_state, cell, loop_function=loop_function, scope=scope)


def embedding_rnn_decoder(decoder_inputs, initial_state, cell, num_symbols, embedding_size, output_projection=None,
                          feed_previous=False, update_embedding_for_previous=True, scope=None):
    """rnn_decoder over the embeddings ("embedding" [num_symbols, embedding_size]) of symbol ids; with
    feed_previous, greedy (output_projection's (W, B) maps outputs to symbol logits first)."""
    with variable_scope.variable_scope(scope or "embedding_rnn_decoder") as scope:
        if output_projection is not None:
            _check_projection(output_projection, num_symbols, scope.dtype)
        embedding = variable_scope.get_variable("embedding", [num_symbols, embedding_size])
        loop_function = (_extract_argmax_and_embed(embedding, output_projection, update_embedding_for_previous)
                         if feed_previous else None)
        # lazily, as TF 1.15: each step's lookup is made in rnn_decoder's scope
        embedded = (embedding_ops.embedding_lookup(embedding, i) for i in decoder_inputs)
        return rnn_decoder(embedded, initial_state, cell, loop_function=loop_function)


def embedding_rnn_seq2seq(encoder_inputs, decoder_inputs, cell, num_encoder_symbols, num_decoder_symbols,
                          embedding_size, output_projection=None, feed_previous=False, dtype=None, scope=None):
    """An encoder on embedded symbols (EmbeddingWrapper around a copy of ``cell``), then embedding_rnn_decoder from
    its final state; without output_projection the decoder's outputs are projected to num_decoder_symbols."""
    with variable_scope.variable_scope(scope or "embedding_rnn_seq2seq") as scope:
        if dtype is not None:
            scope.set_dtype(dtype)
        else:
            dtype = scope.dtype
        encoder_cell = EmbeddingWrapper(copy.deepcopy(cell), embedding_classes=num_encoder_symbols,
                                        embedding_size=embedding_size)
        _, encoder_state = rnn.static_rnn(encoder_cell, encoder_inputs, dtype=dtype)
        if output_projection is None:
            cell = OutputProjectionWrapper(cell, num_decoder_symbols)

        def decode(greedy, update_embedding=True):
            return embedding_rnn_decoder(decoder_inputs, encoder_state, cell, num_decoder_symbols, embedding_size,
                                         output_projection=output_projection, feed_previous=greedy,
                                         update_embedding_for_previous=update_embedding)

        if isinstance(feed_previous, bool):
            return decode(feed_previous)
        return _either_decoder(feed_previous, lambda greedy: decode(greedy, False), len(decoder_inputs),
                               encoder_state)


def embedding_tied_rnn_seq2seq(encoder_inputs, decoder_inputs, cell, num_symbols, embedding_size,
                               num_decoder_symbols=None, output_projection=None, feed_previous=False, dtype=None,
                               scope=None):
    """tied_rnn_seq2seq on embedded symbols, one "embedding" for both sides; outputs over the first
    num_decoder_symbols symbols (default: all num_symbols)."""
    with variable_scope.variable_scope(scope or "embedding_tied_rnn_seq2seq", dtype=dtype) as scope:
        dtype = scope.dtype
        if output_projection is not None:
            _check_projection(output_projection, num_symbols, dtype)
        embedding = variable_scope.get_variable("embedding", [num_symbols, embedding_size], dtype=dtype)
        embedded_encoder = [embedding_ops.embedding_lookup(embedding, x) for x in encoder_inputs]
        embedded_decoder = [embedding_ops.embedding_lookup(embedding, x) for x in decoder_inputs]
        if output_projection is None:
            cell = OutputProjectionWrapper(cell, num_symbols if num_decoder_symbols is None else num_decoder_symbols)

        def decode(greedy, update_embedding=True):
            loop_function = (_extract_argmax_and_embed(embedding, output_projection, update_embedding)
                             if greedy else None)
            return tied_rnn_seq2seq(embedded_encoder, embedded_decoder, cell, loop_function=loop_function,
                                    dtype=dtype)

        if isinstance(feed_previous, bool):
            return decode(feed_previous)
        return _either_decoder(feed_previous, lambda greedy: decode(greedy, False), len(decoder_inputs),
                               cell.state_size)


def attention_decoder(decoder_inputs, initial_state, attention_states, cell, output_size=None, num_heads=1,
                      loop_function=None, dtype=None, scope=None, initial_state_attention=False):
    """rnn_decoder that attends to ``attention_states`` [batch, length, size] (arXiv:1412.7449): each step runs
    ``cell`` on a linear map of its input and the previous attention reads, reads each head's
    softmax(v . tanh(W1 h + W2 state))-weighted sum of the states, and outputs a linear map of the cell output and
    those reads (``output_size``, default the cell's). The first reads are zeros, or, with
    initial_state_attention, made from initial_state."""
    if not decoder_inputs:
        raise ValueError("Must provide at least 1 input to attention decoder.")
    if num_heads < 1:
        raise ValueError("With less than 1 heads, use a non-attention decoder.")
    attn_size = tensor_shape.dimension_value(attention_states.get_shape()[2])
    if attn_size is None:
        raise ValueError("Shape[2] of attention_states must be known: %s" % attention_states.get_shape())
    if output_size is None:
        output_size = cell.output_size
    with variable_scope.variable_scope(scope or "attention_decoder", dtype=dtype) as scope:
        dtype = scope.dtype
        batch_size = array_ops.shape(decoder_inputs[0])[0]
        attn_length = tensor_shape.dimension_value(attention_states.get_shape()[1])
        if attn_length is None:
            attn_length = array_ops.shape(attention_states)[1]
        # W1 h for every position at once: a 1x1 convolution over [batch, length, 1, size].
        hidden = array_ops.reshape(attention_states, [-1, attn_length, 1, attn_size])
        hidden_features, v = [], []
        for a in range(num_heads):
            k = variable_scope.get_variable("AttnW_%d" % a, [1, 1, attn_size, attn_size], dtype=dtype)
            hidden_features.append(nn_ops.conv2d(hidden, k, [1, 1, 1, 1], "SAME"))
            v.append(variable_scope.get_variable("AttnV_%d" % a, [attn_size], dtype=dtype))

        def attention(query):
            """Each head's read of the attention states for ``query`` (a state; a tuple is concatenated)."""
            if nest.is_sequence(query):
                parts = nest.flatten(query)
                for q in parts:
                    if q.get_shape().ndims not in (None, 2):
                        raise ValueError("attention query parts must be 2-D: %s" % q)
                query = array_ops.concat(parts, 1)
            reads = []
            for a in range(num_heads):
                with variable_scope.variable_scope("Attention_%d" % a):
                    y = _Linear(query, attn_size, True)(query)
                    y = math_ops.cast(array_ops.reshape(y, [-1, 1, 1, attn_size]), dtype)
                    scores = math_ops.reduce_sum(v[a] * math_ops.tanh(hidden_features[a] + y), [2, 3])
                    weights = math_ops.cast(nn_ops.softmax(math_ops.cast(scores, dtype=dtypes.float32)), dtype)
                    read = math_ops.reduce_sum(array_ops.reshape(weights, [-1, attn_length, 1, 1]) * hidden, [1, 2])
                    reads.append(array_ops.reshape(read, [-1, attn_size]))
            return reads

        state, outputs, prev = initial_state, [], None
        attns = [array_ops.zeros(array_ops.stack([batch_size, attn_size]), dtype=dtype) for _ in range(num_heads)]
        for read in attns:
            read.set_shape([None, attn_size])
        if initial_state_attention:
            attns = attention(initial_state)
        for i, inp in enumerate(decoder_inputs):
            if i > 0:
                variable_scope.get_variable_scope().reuse_variables()
            if loop_function is not None and prev is not None:
                with variable_scope.variable_scope("loop_function", reuse=True):
                    inp = loop_function(prev, i)
            input_size = tensor_shape.dimension_value(inp.get_shape().with_rank(2)[1])
            if input_size is None:
                raise ValueError("Could not infer input size from input: %s" % inp.name)
            inputs = [math_ops.cast(e, dtype) for e in [inp] + attns]
            cell_output, state = cell(_Linear(inputs, input_size, True)(inputs), state)
            if i == 0 and initial_state_attention:  # the heads' variables were made reading initial_state
                with variable_scope.variable_scope(variable_scope.get_variable_scope(), reuse=True):
                    attns = attention(state)
            else:
                attns = attention(state)
            with variable_scope.variable_scope("AttnOutputProjection"):
                inputs = [math_ops.cast(cell_output, dtype)] + attns
                output = _Linear(inputs, output_size, True)(inputs)
            if loop_function is not None:
                prev = output
            outputs.append(output)
    return outputs, state


def embedding_attention_decoder(decoder_inputs, initial_state, attention_states, cell, num_symbols, embedding_size,
                                num_heads=1, output_size=None, output_projection=None, feed_previous=False,
                                update_embedding_for_previous=True, dtype=None, scope=None,
                                initial_state_attention=False):
    """attention_decoder over the embeddings ("embedding" [num_symbols, embedding_size]) of symbol ids; with
    feed_previous, greedy (output_projection's (W, B) maps outputs to symbol logits first)."""
    if output_size is None:
        output_size = cell.output_size
    if output_projection is not None:
        _check_projection(output_projection, num_symbols, dtype)
    with variable_scope.variable_scope(scope or "embedding_attention_decoder", dtype=dtype):
        embedding = variable_scope.get_variable("embedding", [num_symbols, embedding_size])
        loop_function = (_extract_argmax_and_embed(embedding, output_projection, update_embedding_for_previous)
                         if feed_previous else None)
        embedded = [embedding_ops.embedding_lookup(embedding, i) for i in decoder_inputs]
        return attention_decoder(embedded, initial_state, attention_states, cell, output_size=output_size,
                                 num_heads=num_heads, loop_function=loop_function,
                                 initial_state_attention=initial_state_attention)


def embedding_attention_seq2seq(encoder_inputs, decoder_inputs, cell, num_encoder_symbols, num_decoder_symbols,
                                embedding_size, num_heads=1, output_projection=None, feed_previous=False, dtype=None,
                                scope=None, initial_state_attention=False):
    """An encoder on embedded symbols (EmbeddingWrapper around a copy of ``cell``), then embedding_attention_decoder
    from its final state, attending to its outputs; without output_projection the decoder's outputs are projected
    to num_decoder_symbols (and the attention output has that size too)."""
    with variable_scope.variable_scope(scope or "embedding_attention_seq2seq", dtype=dtype) as scope:
        dtype = scope.dtype
        encoder_cell = EmbeddingWrapper(copy.deepcopy(cell), embedding_classes=num_encoder_symbols,
                                        embedding_size=embedding_size)
        encoder_outputs, encoder_state = rnn.static_rnn(encoder_cell, encoder_inputs, dtype=dtype)
        attention_states = array_ops.concat(
            [array_ops.reshape(e, [-1, 1, cell.output_size]) for e in encoder_outputs], 1)
        output_size = None
        if output_projection is None:
            cell = OutputProjectionWrapper(cell, num_decoder_symbols)
            output_size = num_decoder_symbols

        def decode(greedy, update_embedding=True):
            return embedding_attention_decoder(
                decoder_inputs, encoder_state, attention_states, cell, num_decoder_symbols, embedding_size,
                num_heads=num_heads, output_size=output_size, output_projection=output_projection,
                feed_previous=greedy, update_embedding_for_previous=update_embedding,
                initial_state_attention=initial_state_attention)

        if isinstance(feed_previous, bool):
            return decode(feed_previous)
        return _either_decoder(feed_previous, lambda greedy: decode(greedy, False), len(decoder_inputs),
                               encoder_state)


def one2many_rnn_seq2seq(encoder_inputs, decoder_inputs_dict, enc_cell, dec_cells_dict, num_encoder_symbols,
                         num_decoder_symbols_dict, embedding_size, feed_previous=False, dtype=None, scope=None):
    """One encoder on embedded symbols, then one embedding_rnn_decoder per name in decoder_inputs_dict
    (arXiv:1511.06114), each with its own cell, number of output symbols and scope "one2many_decoder_<name>":
    ({name: outputs}, {name: final state})."""
    if not isinstance(enc_cell, _RNN_CELLS):
        raise TypeError("enc_cell is not an RNNCell: %s" % type(enc_cell))
    if set(dec_cells_dict) != set(decoder_inputs_dict):
        raise ValueError("keys of dec_cells_dict != keys of decoder_inputs_dict")
    for dec_cell in dec_cells_dict.values():
        if not isinstance(dec_cell, _RNN_CELLS):
            raise TypeError("dec_cell is not an RNNCell: %s" % type(dec_cell))
    outputs_dict, state_dict = {}, {}
    with variable_scope.variable_scope(scope or "one2many_rnn_seq2seq", dtype=dtype) as scope:
        dtype = scope.dtype
        enc_cell = EmbeddingWrapper(enc_cell, embedding_classes=num_encoder_symbols, embedding_size=embedding_size)
        _, encoder_state = rnn.static_rnn(enc_cell, encoder_inputs, dtype=dtype)
        for name, decoder_inputs in decoder_inputs_dict.items():
            with variable_scope.variable_scope("one2many_decoder_" + str(name)):
                num_symbols = num_decoder_symbols_dict[name]
                dec_cell = OutputProjectionWrapper(dec_cells_dict[name], num_symbols)

                def decode(greedy, inputs=decoder_inputs, cell=dec_cell, num_symbols=num_symbols):
                    return embedding_rnn_decoder(inputs, encoder_state, cell, num_symbols, embedding_size,
                                                 feed_previous=greedy)

                if isinstance(feed_previous, bool):
                    outputs_dict[name], state_dict[name] = decode(feed_previous)
                else:
                    outputs_dict[name], state_dict[name] = _either_decoder(feed_previous, decode, len(decoder_inputs),
                                                                           encoder_state)
    return outputs_dict, state_dict


def sequence_loss_by_example(logits, targets, weights, average_across_timesteps=True, softmax_loss_function=None,
                             name=None):
    """Each example's weighted sum over the steps of its cross-entropy (softmax_loss_function(labels=, logits=),
    default sparse softmax), divided by its total weight unless average_across_timesteps is false."""
    if len(targets) != len(logits) or len(weights) != len(logits):
        raise ValueError("Lengths of logits, weights, and targets must be the same %d, %d, %d."
                         % (len(logits), len(weights), len(targets)))
    with ops.name_scope(name, "sequence_loss_by_example", logits + targets + weights):
        weighted = []
        for logit, target, weight in zip(logits, targets, weights):
            if softmax_loss_function is None:
                # reshaped: TF 1.x code passes targets as [batch, 1] or as scalars too
                crossent = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=array_ops.reshape(target, [-1]),
                                                                           logits=logit)
            else:
                crossent = softmax_loss_function(labels=target, logits=logit)
            weighted.append(crossent * weight)
        log_perps = math_ops.add_n(weighted)
        if average_across_timesteps:
            total_size = math_ops.add_n(weights)
            total_size += 1e-12  # all weights 0 gives 0, not NaN
            log_perps /= total_size
    return log_perps


def sequence_loss(logits, targets, weights, average_across_timesteps=True, average_across_batch=True,
                  softmax_loss_function=None, name=None):
    """The sum over the batch of sequence_loss_by_example, divided by the batch size unless average_across_batch
    is false."""
    with ops.name_scope(name, "sequence_loss", logits + targets + weights):
        cost = math_ops.reduce_sum(sequence_loss_by_example(
            logits, targets, weights, average_across_timesteps=average_across_timesteps,
            softmax_loss_function=softmax_loss_function))
        if not average_across_batch:
            return cost
        return cost / math_ops.cast(array_ops.shape(targets[0])[0], cost.dtype)


def model_with_buckets(encoder_inputs, decoder_inputs, targets, weights, buckets, seq2seq,
                       softmax_loss_function=None, per_example_loss=False, name=None):
    """seq2seq(encoder_inputs[:e], decoder_inputs[:d]) for each bucket (e, d), every bucket after the first reusing
    the variables: (each bucket's outputs, each bucket's sequence_loss, or sequence_loss_by_example with
    per_example_loss)."""
    if len(encoder_inputs) < buckets[-1][0]:
        raise ValueError("Length of encoder_inputs (%d) must be at least that of last bucket (%d)."
                         % (len(encoder_inputs), buckets[-1][0]))
    if len(targets) < buckets[-1][1]:
        raise ValueError("Length of targets (%d) must be at least that of last bucket (%d)."
                         % (len(targets), buckets[-1][1]))
    if len(weights) < buckets[-1][1]:
        raise ValueError("Length of weights (%d) must be at least that of last bucket (%d)."
                         % (len(weights), buckets[-1][1]))
    loss = sequence_loss_by_example if per_example_loss else sequence_loss
    outputs, losses = [], []
    with ops.name_scope(name, "model_with_buckets", encoder_inputs + decoder_inputs + targets + weights):
        for j, (encoder_size, decoder_size) in enumerate(buckets):
            with variable_scope.variable_scope(variable_scope.get_variable_scope(), reuse=True if j > 0 else None):
                bucket_outputs, _ = seq2seq(encoder_inputs[:encoder_size], decoder_inputs[:decoder_size])
                outputs.append(bucket_outputs)
                losses.append(loss(bucket_outputs, targets[:decoder_size], weights[:decoder_size],
                                   softmax_loss_function=softmax_loss_function))
    return outputs, losses


part(__name__, "TensorFlow 2.x has no legacy_seq2seq; tf.contrib.seq2seq / TensorFlow Addons' tfa.seq2seq "
               "replaced it")
