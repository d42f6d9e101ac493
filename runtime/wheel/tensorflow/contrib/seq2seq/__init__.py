"""tf.contrib.seq2seq: decoders, helpers, attention and the sequence loss, written here from TF 1.15's definitions
(its class and function names, variable names and arithmetic), on TF 1.x's graph-mode RNN cells and layers.

Provided: sequence_loss, tile_batch, Helper, TrainingHelper, GreedyEmbeddingHelper, SampleEmbeddingHelper, Decoder,
BasicDecoder, BasicDecoderOutput, dynamic_decode, AttentionMechanism, BahdanauAttention, LuongAttention,
AttentionWrapper, AttentionWrapperState, and the beam search (beam_search.py): BeamSearchDecoder,
BeamSearchDecoderOutput, BeamSearchDecoderState, FinalBeamSearchDecoderOutput, gather_tree. The monotonic attentions
and the other helpers are not: TensorFlow Addons' tfa.seq2seq has them."""
import abc
import collections

import numpy as np
from tensorflow.compat import v1 as _v1
from tensorflow.contrib import part
from tensorflow.python.framework import constant_op, dtypes, ops, tensor_shape, tensor_util
from tensorflow.python.ops import (
    array_ops,
    control_flow_ops,
    control_flow_util,
    embedding_ops,
    math_ops,
    nn_ops,
    random_ops,
    rnn_cell_impl,
    tensor_array_ops,
    variable_scope,
)
from tensorflow.python.util import nest

_Dense = _v1.layers.Dense
_RNNCell = _v1.nn.rnn_cell.RNNCell  # the cells' base class of the 1.x API (tf.nn.rnn_cell)


# --- the loss and batch tiling ---------------------------------------------------------------------


def sequence_loss(logits, targets, weights, average_across_timesteps=True, average_across_batch=True,
                  sum_over_timesteps=False, sum_over_batch=False, softmax_loss_function=None, name=None):
    """Weighted cross-entropy of [batch, time, classes] logits against [batch, time] targets, averaged or summed
    over time and batch as asked (a sum divides by nothing; an average by the summed weights)."""
    if (average_across_timesteps and sum_over_timesteps) or (average_across_batch and sum_over_batch):
        raise ValueError("average_across_timesteps and sum_over_timesteps (or the batch pair) cannot both be set")
    with ops.name_scope(name, "sequence_loss", [logits, targets, weights]):
        num_classes = array_ops.shape(logits)[2]
        logits_flat = array_ops.reshape(logits, [-1, num_classes])
        targets = array_ops.reshape(targets, [-1])
        if softmax_loss_function is None:
            crossent = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits_flat)
        else:
            crossent = softmax_loss_function(labels=targets, logits=logits_flat)
        crossent *= array_ops.reshape(weights, [-1])
        if average_across_timesteps and average_across_batch:
            crossent = math_ops.reduce_sum(crossent)
            total_size = math_ops.reduce_sum(weights)
            crossent = math_ops.div_no_nan(crossent, total_size)
        elif sum_over_timesteps and sum_over_batch:
            crossent = math_ops.reduce_sum(crossent)
            total_count = math_ops.cast(math_ops.count_nonzero(weights), dtypes.float32)
            crossent = math_ops.div_no_nan(crossent, total_count)
        else:
            crossent = array_ops.reshape(crossent, array_ops.shape(logits)[0:2])
            if average_across_timesteps or average_across_batch:
                axis = [0] if average_across_batch else [1]
                crossent = math_ops.reduce_sum(crossent, axis=axis)
                total_size = math_ops.reduce_sum(weights, axis=axis)
                crossent = math_ops.div_no_nan(crossent, total_size)
            elif sum_over_timesteps or sum_over_batch:
                axis = [0] if sum_over_batch else [1]
                crossent = math_ops.reduce_sum(crossent, axis=axis)
                total_count = math_ops.cast(math_ops.count_nonzero(weights, axis=axis), dtype=dtypes.float32)
                crossent = math_ops.div_no_nan(crossent, total_count)
        return crossent


def _tile_batch(t, multiplier):
    t = ops.convert_to_tensor(t, name="t")
    shape_t = array_ops.shape(t)
    if t.shape.ndims is None or t.shape.ndims < 1:
        raise ValueError("t must have statically known rank")
    tiling = [1] * (t.shape.ndims + 1)
    tiling[1] = multiplier
    tiled_static_batch_size = (tensor_shape.dimension_value(t.shape[0]) * multiplier
                               if tensor_shape.dimension_value(t.shape[0]) is not None else None)
    tiled = array_ops.tile(array_ops.expand_dims(t, 1), tiling)
    tiled = array_ops.reshape(tiled, array_ops.concat(([shape_t[0] * multiplier], shape_t[1:]), 0))
    tiled.set_shape(tensor_shape.TensorShape([tiled_static_batch_size]).concatenate(t.shape[1:]))
    return tiled


def tile_batch(t, multiplier, name=None):
    """Each batch entry of every tensor in ``t`` repeated ``multiplier`` times in a row."""
    flat_t = nest.flatten(t)
    with ops.name_scope(name, "tile_batch", flat_t + [multiplier]):
        return nest.map_structure(lambda t_: _tile_batch(t_, multiplier), t)


# --- helpers -----------------------------------------------------------------------------------------


def _unstack_ta(inp):
    return tensor_array_ops.TensorArray(dtype=inp.dtype, size=array_ops.shape(inp)[0],
                                        element_shape=inp.get_shape()[1:]).unstack(inp)


def _transpose_batch_time(x):
    x = ops.convert_to_tensor(x)
    if x.shape.ndims is not None and x.shape.ndims < 2:
        return x
    return array_ops.transpose(x, array_ops.concat(([1, 0], math_ops.range(2, array_ops.rank(x))), axis=0))


class Helper(object, metaclass=abc.ABCMeta):
    """How a decoder reads its inputs and picks its samples, step by step."""

    @abc.abstractproperty
    def batch_size(self):
        raise NotImplementedError

    @abc.abstractproperty
    def sample_ids_shape(self):
        raise NotImplementedError

    @abc.abstractproperty
    def sample_ids_dtype(self):
        raise NotImplementedError

    @abc.abstractmethod
    def initialize(self, name=None):
        pass

    @abc.abstractmethod
    def sample(self, time, outputs, state, name=None):
        pass

    @abc.abstractmethod
    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        pass


class TrainingHelper(Helper):
    """Teacher forcing: step t reads inputs[:, t] until each sequence's length; samples are the argmax."""

    def __init__(self, inputs, sequence_length, time_major=False, name=None):
        with ops.name_scope(name, "TrainingHelper", [inputs, sequence_length]):
            inputs = ops.convert_to_tensor(inputs, name="inputs")
            self._inputs = inputs
            if not time_major:
                inputs = nest.map_structure(_transpose_batch_time, inputs)
            self._input_tas = nest.map_structure(_unstack_ta, inputs)
            self._sequence_length = ops.convert_to_tensor(sequence_length, name="sequence_length")
            if self._sequence_length.get_shape().ndims != 1:
                raise ValueError("Expected sequence_length to be a vector, but received shape: %s"
                                 % self._sequence_length.get_shape())
            self._zero_inputs = nest.map_structure(lambda inp: array_ops.zeros_like(inp[0, :]), inputs)
            self._batch_size = array_ops.size(sequence_length)

    @property
    def inputs(self):
        return self._inputs

    @property
    def sequence_length(self):
        return self._sequence_length

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return tensor_shape.TensorShape([])

    @property
    def sample_ids_dtype(self):
        return dtypes.int32

    def initialize(self, name=None):
        with ops.name_scope(name, "TrainingHelperInitialize"):
            finished = math_ops.equal(0, self._sequence_length)
            all_finished = math_ops.reduce_all(finished)
            next_inputs = control_flow_ops.cond(
                all_finished, lambda: self._zero_inputs,
                lambda: nest.map_structure(lambda inp: inp.read(0), self._input_tas))
            return (finished, next_inputs)

    def sample(self, time, outputs, name=None, **unused_kwargs):
        with ops.name_scope(name, "TrainingHelperSample", [time, outputs]):
            return math_ops.cast(math_ops.argmax(outputs, axis=-1), dtypes.int32)

    def next_inputs(self, time, outputs, state, name=None, **unused_kwargs):
        with ops.name_scope(name, "TrainingHelperNextInputs", [time, outputs, state]):
            next_time = time + 1
            finished = (next_time >= self._sequence_length)
            all_finished = math_ops.reduce_all(finished)

            def read_from_ta(inp):
                return inp.read(next_time)

            next_inputs = control_flow_ops.cond(
                all_finished, lambda: self._zero_inputs,
                lambda: nest.map_structure(read_from_ta, self._input_tas))
            return (finished, next_inputs, state)


class GreedyEmbeddingHelper(Helper):
    """Inference: each step reads the embedding of the previous step's argmax, from start_tokens to end_token."""

    def __init__(self, embedding, start_tokens, end_token):
        if callable(embedding):
            self._embedding_fn = embedding
        else:
            self._embedding_fn = lambda ids: embedding_ops.embedding_lookup(embedding, ids)
        self._start_tokens = ops.convert_to_tensor(start_tokens, dtype=dtypes.int32, name="start_tokens")
        self._end_token = ops.convert_to_tensor(end_token, dtype=dtypes.int32, name="end_token")
        if self._start_tokens.get_shape().ndims != 1:
            raise ValueError("start_tokens must be a vector")
        self._batch_size = array_ops.size(start_tokens)
        if self._end_token.get_shape().ndims != 0:
            raise ValueError("end_token must be a scalar")
        self._start_inputs = self._embedding_fn(self._start_tokens)

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return tensor_shape.TensorShape([])

    @property
    def sample_ids_dtype(self):
        return dtypes.int32

    def initialize(self, name=None):
        finished = array_ops.tile([False], [self._batch_size])
        return (finished, self._start_inputs)

    def sample(self, time, outputs, state, name=None):
        del time, state
        if not isinstance(outputs, ops.Tensor):
            raise TypeError("Expected outputs to be a single Tensor, got: %s" % type(outputs))
        return math_ops.argmax(outputs, axis=-1, output_type=dtypes.int32)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        del time, outputs
        finished = math_ops.equal(sample_ids, self._end_token)
        all_finished = math_ops.reduce_all(finished)
        next_inputs = control_flow_ops.cond(all_finished, lambda: self._start_inputs,
                                            lambda: self._embedding_fn(sample_ids))
        return (finished, next_inputs, state)


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """As GreedyEmbeddingHelper, sampling each next id from the softmax of the outputs (over a temperature)."""

    def __init__(self, embedding, start_tokens, end_token, softmax_temperature=None, seed=None):
        super(SampleEmbeddingHelper, self).__init__(embedding, start_tokens, end_token)
        self._softmax_temperature = softmax_temperature
        self._seed = seed

    def sample(self, time, outputs, state, name=None):
        del time, state
        if not isinstance(outputs, ops.Tensor):
            raise TypeError("Expected outputs to be a single Tensor, got: %s" % type(outputs))
        logits = outputs if self._softmax_temperature is None else outputs / self._softmax_temperature
        return math_ops.cast(random_ops.multinomial(logits, 1, seed=self._seed)[:, 0], dtypes.int32)


# --- decoders ----------------------------------------------------------------------------------------


class Decoder(object, metaclass=abc.ABCMeta):
    """A step function over (time, inputs, state) that dynamic_decode runs until every sequence finishes."""

    @property
    def batch_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    @property
    def output_dtype(self):
        raise NotImplementedError

    @abc.abstractmethod
    def initialize(self, name=None):
        raise NotImplementedError

    @abc.abstractmethod
    def step(self, time, inputs, state, name=None):
        raise NotImplementedError

    def finalize(self, outputs, final_state, sequence_lengths):
        raise NotImplementedError

    @property
    def tracks_own_finished(self):
        return False


class BasicDecoderOutput(collections.namedtuple("BasicDecoderOutput", ("rnn_output", "sample_id"))):
    pass


class BasicDecoder(Decoder):
    """A cell (and an output layer) stepped through a helper."""

    def __init__(self, cell, helper, initial_state, output_layer=None):
        rnn_cell_impl.assert_like_rnncell("cell", cell)
        if not isinstance(helper, Helper):
            raise TypeError("helper must be a Helper, received: %s" % type(helper))
        self._cell, self._helper, self._initial_state, self._output_layer = cell, helper, initial_state, output_layer

    @property
    def batch_size(self):
        return self._helper.batch_size

    def _rnn_output_size(self):
        size = self._cell.output_size
        if self._output_layer is None:
            return size
        output_shape_with_unknown_batch = nest.map_structure(
            lambda s: tensor_shape.TensorShape([None]).concatenate(s), size)
        layer_output_shape = self._output_layer.compute_output_shape(output_shape_with_unknown_batch)
        return nest.map_structure(lambda s: s[1:], layer_output_shape)

    @property
    def output_size(self):
        return BasicDecoderOutput(rnn_output=self._rnn_output_size(), sample_id=self._helper.sample_ids_shape)

    @property
    def output_dtype(self):
        dtype = nest.flatten(self._initial_state)[0].dtype
        return BasicDecoderOutput(nest.map_structure(lambda _: dtype, self._rnn_output_size()),
                                  self._helper.sample_ids_dtype)

    def initialize(self, name=None):
        return self._helper.initialize() + (self._initial_state,)

    def step(self, time, inputs, state, name=None):
        with ops.name_scope(name, "BasicDecoderStep", (time, inputs, state)):
            cell_outputs, cell_state = self._cell(inputs, state)
            if self._output_layer is not None:
                cell_outputs = self._output_layer(cell_outputs)
            sample_ids = self._helper.sample(time=time, outputs=cell_outputs, state=cell_state)
            (finished, next_inputs, next_state) = self._helper.next_inputs(
                time=time, outputs=cell_outputs, state=cell_state, sample_ids=sample_ids)
        return (BasicDecoderOutput(cell_outputs, sample_ids), next_state, next_inputs, finished)


def _create_zero_outputs(size, dtype, batch_size):
    return nest.map_structure(lambda s, d: rnn_cell_impl._zero_state_tensors(s, batch_size, d),  # noqa: SLF001
                              size, dtype)


def dynamic_decode(decoder, output_time_major=False, impute_finished=False, maximum_iterations=None,
                   parallel_iterations=32, swap_memory=False, scope=None):
    """Run ``decoder`` until every sequence finishes (or maximum_iterations): (outputs, final state, lengths)."""
    if not isinstance(decoder, Decoder):
        raise TypeError("Expected decoder to be type Decoder, but saw: %s" % type(decoder))
    with variable_scope.variable_scope(scope, "decoder") as varscope:
        ctxt = ops.get_default_graph()._get_control_flow_context()  # pylint: disable=protected-access
        is_xla = ctxt is not None and ctxt.GetXLAContext() is not None
        in_while_loop = control_flow_util.GetContainingWhileContext(ctxt) is not None
        if not in_while_loop and varscope.caching_device is None:
            varscope.set_caching_device(lambda op: op.device)
        if maximum_iterations is not None:
            maximum_iterations = ops.convert_to_tensor(maximum_iterations, dtype=dtypes.int32,
                                                       name="maximum_iterations")
            if maximum_iterations.get_shape().ndims != 0:
                raise ValueError("maximum_iterations must be a scalar")
        initial_finished, initial_inputs, initial_state = decoder.initialize()
        zero_outputs = _create_zero_outputs(decoder.output_size, decoder.output_dtype, decoder.batch_size)
        if is_xla and maximum_iterations is None:
            raise ValueError("maximum_iterations is required for XLA compilation.")
        if maximum_iterations is not None:
            initial_finished = math_ops.logical_or(initial_finished, 0 >= maximum_iterations)
        initial_sequence_lengths = array_ops.zeros_like(initial_finished, dtype=dtypes.int32)
        initial_time = constant_op.constant(0, dtype=dtypes.int32)

        def _shape(batch_size, from_shape):
            if not isinstance(from_shape, tensor_shape.TensorShape) or from_shape.ndims == 0:
                return None
            batch_size = tensor_util.constant_value(ops.convert_to_tensor(batch_size, name="batch_size"))
            return tensor_shape.TensorShape([batch_size]).concatenate(from_shape)

        dynamic_size = maximum_iterations is None or not is_xla

        def _create_ta(s, d):
            return tensor_array_ops.TensorArray(dtype=d, size=0 if dynamic_size else maximum_iterations,
                                                dynamic_size=dynamic_size, element_shape=_shape(decoder.batch_size, s))

        initial_outputs_ta = nest.map_structure(_create_ta, decoder.output_size, decoder.output_dtype)

        def condition(unused_time, unused_outputs_ta, unused_state, unused_inputs, finished, unused_sequence_lengths):
            return math_ops.logical_not(math_ops.reduce_all(finished))

        def body(time, outputs_ta, state, inputs, finished, sequence_lengths):
            (next_outputs, decoder_state, next_inputs, decoder_finished) = decoder.step(time, inputs, state)
            if decoder.tracks_own_finished:
                next_finished = decoder_finished
            else:
                next_finished = math_ops.logical_or(decoder_finished, finished)
            next_sequence_lengths = array_ops.where(
                math_ops.logical_not(finished), array_ops.fill(array_ops.shape(sequence_lengths), time + 1),
                sequence_lengths)
            nest.assert_same_structure(state, decoder_state)
            nest.assert_same_structure(outputs_ta, next_outputs)
            nest.assert_same_structure(inputs, next_inputs)
            if impute_finished:
                emit = nest.map_structure(lambda out, zero: array_ops.where(finished, zero, out), next_outputs,
                                          zero_outputs)
            else:
                emit = next_outputs

            def _maybe_copy_state(new, cur):
                if isinstance(cur, tensor_array_ops.TensorArray):
                    pass_through = True
                else:
                    new.set_shape(cur.shape)
                    pass_through = (new.shape.ndims == 0)
                return new if pass_through else array_ops.where(finished, cur, new)

            next_state = nest.map_structure(_maybe_copy_state, decoder_state, state) if impute_finished \
                else decoder_state
            outputs_ta = nest.map_structure(lambda ta, out: ta.write(time, out), outputs_ta, emit)
            return (time + 1, outputs_ta, next_state, next_inputs, next_finished, next_sequence_lengths)

        res = control_flow_ops.while_loop(
            condition, body, loop_vars=(initial_time, initial_outputs_ta, initial_state, initial_inputs,
                                        initial_finished, initial_sequence_lengths),
            parallel_iterations=parallel_iterations, maximum_iterations=maximum_iterations, swap_memory=swap_memory)
        final_outputs_ta, final_state, final_sequence_lengths = res[1], res[2], res[5]
        final_outputs = nest.map_structure(lambda ta: ta.stack(), final_outputs_ta)
        try:
            final_outputs, final_state = decoder.finalize(final_outputs, final_state, final_sequence_lengths)
        except NotImplementedError:
            pass
        if not output_time_major:
            final_outputs = nest.map_structure(_transpose_batch_time, final_outputs)
    return final_outputs, final_state, final_sequence_lengths


# --- attention -------------------------------------------------------------------------------------


class AttentionMechanism(object):
    @property
    def alignments_size(self):
        raise NotImplementedError

    @property
    def state_size(self):
        raise NotImplementedError


def _prepare_memory(memory, memory_sequence_length):
    memory = nest.map_structure(lambda m: ops.convert_to_tensor(m, name="memory"), memory)
    if memory_sequence_length is not None:
        memory_sequence_length = ops.convert_to_tensor(memory_sequence_length, name="memory_sequence_length")
    if memory_sequence_length is None:
        seq_len_mask = None
    else:
        seq_len_mask = array_ops.sequence_mask(memory_sequence_length,
                                               maxlen=array_ops.shape(nest.flatten(memory)[0])[1],
                                               dtype=nest.flatten(memory)[0].dtype)

    def _maybe_mask(m, seq_len_mask):
        rank = m.get_shape().ndims
        rank = rank if rank is not None else array_ops.rank(m)
        extra_ones = array_ops.ones(rank - 2, dtype=dtypes.int32)
        if memory_sequence_length is not None:
            seq_len_mask = array_ops.reshape(seq_len_mask, array_ops.concat((array_ops.shape(seq_len_mask),
                                                                              extra_ones), 0))
            return m * seq_len_mask
        return m

    return nest.map_structure(lambda m: _maybe_mask(m, seq_len_mask), memory)


def _maybe_mask_score(score, memory_sequence_length, score_mask_value):
    if memory_sequence_length is None:
        return score
    score_mask = array_ops.sequence_mask(memory_sequence_length, maxlen=array_ops.shape(score)[1])
    score_mask_values = score_mask_value * array_ops.ones_like(score)
    return array_ops.where(score_mask, score, score_mask_values)


class _BaseAttentionMechanism(AttentionMechanism):
    def __init__(self, query_layer, memory, probability_fn, memory_sequence_length=None, memory_layer=None,
                 score_mask_value=None, name=None):
        self._query_layer, self._memory_layer = query_layer, memory_layer
        self.dtype = memory_layer.dtype
        if not callable(probability_fn):
            raise TypeError("probability_fn must be callable, saw type: %s" % type(probability_fn).__name__)
        if score_mask_value is None:
            score_mask_value = dtypes.as_dtype(self._memory_layer.dtype).as_numpy_dtype(-np.inf)
        self._probability_fn = lambda score, prev: probability_fn(
            _maybe_mask_score(score, memory_sequence_length, score_mask_value), prev)
        with ops.name_scope(name, "BaseAttentionMechanismInit", nest.flatten(memory)):
            self._values = _prepare_memory(memory, memory_sequence_length)
            self._keys = self.memory_layer(self._values) if self.memory_layer else self._values
            self._batch_size = (tensor_shape.dimension_value(self._keys.shape[0])
                                or array_ops.shape(self._keys)[0])
            self._alignments_size = (tensor_shape.dimension_value(self._keys.shape[1])
                                     or array_ops.shape(self._keys)[1])

    @property
    def memory_layer(self):
        return self._memory_layer

    @property
    def query_layer(self):
        return self._query_layer

    @property
    def values(self):
        return self._values

    @property
    def keys(self):
        return self._keys

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def alignments_size(self):
        return self._alignments_size

    @property
    def state_size(self):
        return self._alignments_size

    def initial_alignments(self, batch_size, dtype):
        return array_ops.zeros(array_ops.stack([batch_size, self._alignments_size]), dtype=dtype)

    def initial_state(self, batch_size, dtype):
        return self.initial_alignments(batch_size, dtype)


def _luong_score(query, keys, scale):
    depth = query.get_shape()[-1]
    key_units = keys.get_shape()[-1]
    if depth != key_units:
        raise ValueError("Incompatible or unknown inner dimensions between query and keys. Query (%s) has units: "
                         "%s. Keys (%s) have units: %s. Perhaps you need to set num_units to the keys' dimension "
                         "(%s)?" % (query, depth, keys, key_units, key_units))
    query = array_ops.expand_dims(query, 1)
    score = math_ops.matmul(query, keys, transpose_b=True)
    score = array_ops.squeeze(score, [1])
    if scale:
        g = variable_scope.get_variable("attention_g", dtype=query.dtype, initializer=_v1.ones_initializer, shape=())
        score = g * score
    return score


class LuongAttention(_BaseAttentionMechanism):
    """Multiplicative attention (Luong et al., 2015): score = query . memory_layer(memory), optionally scaled."""

    def __init__(self, num_units, memory, memory_sequence_length=None, scale=False, probability_fn=None,
                 score_mask_value=None, dtype=None, custom_key_value_fn=None, name="LuongAttention"):
        if probability_fn is None:
            probability_fn = nn_ops.softmax
        if dtype is None:
            dtype = dtypes.float32
        if custom_key_value_fn is not None:
            raise ValueError("LuongAttention(custom_key_value_fn=...) is not provided by this TensorFlow build")
        wrapped_probability_fn = lambda score, _: probability_fn(score)  # noqa: E731
        super(LuongAttention, self).__init__(
            query_layer=None, memory_layer=_Dense(num_units, name="memory_layer", use_bias=False, dtype=dtype),
            memory=memory, probability_fn=wrapped_probability_fn, memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value, name=name)
        self._num_units, self._scale, self._name = num_units, scale, name

    def __call__(self, query, state):
        with variable_scope.variable_scope(None, "luong_attention", [query]):
            score = _luong_score(query, self._keys, self._scale)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


def _bahdanau_score(processed_query, keys, normalize):
    dtype = processed_query.dtype
    num_units = tensor_shape.dimension_value(keys.shape[2]) or array_ops.shape(keys)[2]
    processed_query = array_ops.expand_dims(processed_query, 1)
    v = variable_scope.get_variable("attention_v", [num_units], dtype=dtype)
    if normalize:
        g = variable_scope.get_variable("attention_g", dtype=dtype,
                                        initializer=_v1.constant_initializer(np.sqrt(1. / num_units)), shape=())
        b = variable_scope.get_variable("attention_b", [num_units], dtype=dtype,
                                        initializer=_v1.zeros_initializer())
        normed_v = g * v * math_ops.rsqrt(math_ops.reduce_sum(math_ops.square(v)))
        return math_ops.reduce_sum(normed_v * math_ops.tanh(keys + processed_query + b), [2])
    return math_ops.reduce_sum(v * math_ops.tanh(keys + processed_query), [2])


class BahdanauAttention(_BaseAttentionMechanism):
    """Additive attention (Bahdanau et al., 2015): score = v . tanh(memory_layer(memory) + query_layer(query))."""

    def __init__(self, num_units, memory, memory_sequence_length=None, normalize=False, probability_fn=None,
                 score_mask_value=None, dtype=None, custom_key_value_fn=None, name="BahdanauAttention"):
        if probability_fn is None:
            probability_fn = nn_ops.softmax
        if dtype is None:
            dtype = dtypes.float32
        if custom_key_value_fn is not None:
            raise ValueError("BahdanauAttention(custom_key_value_fn=...) is not provided by this TensorFlow build")
        wrapped_probability_fn = lambda score, _: probability_fn(score)  # noqa: E731
        super(BahdanauAttention, self).__init__(
            query_layer=_Dense(num_units, name="query_layer", use_bias=False, dtype=dtype),
            memory_layer=_Dense(num_units, name="memory_layer", use_bias=False, dtype=dtype),
            memory=memory, probability_fn=wrapped_probability_fn, memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value, name=name)
        self._num_units, self._normalize, self._name = num_units, normalize, name

    def __call__(self, query, state):
        with variable_scope.variable_scope(None, "bahdanau_attention", [query]):
            processed_query = self.query_layer(query) if self.query_layer else query
            score = _bahdanau_score(processed_query, self._keys, self._normalize)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


class AttentionWrapperState(collections.namedtuple(
        "AttentionWrapperState", ("cell_state", "attention", "time", "alignments", "alignment_history",
                                  "attention_state"))):
    """The wrapped cell's state, the attention it emitted, the step, the alignments and (optionally) their
    history."""

    def clone(self, **kwargs):
        def with_same_shape(old, new):
            if isinstance(old, ops.Tensor) and isinstance(new, ops.Tensor):
                new.set_shape(old.shape)
            return new
        return nest.map_structure(with_same_shape, self, super(AttentionWrapperState, self)._replace(**kwargs))


def _compute_attention(attention_mechanism, cell_output, attention_state, attention_layer):
    alignments, next_attention_state = attention_mechanism(cell_output, state=attention_state)
    expanded_alignments = array_ops.expand_dims(alignments, 1)
    context = math_ops.matmul(expanded_alignments, attention_mechanism.values)
    context = array_ops.squeeze(context, [1])
    if attention_layer is not None:
        attention = attention_layer(array_ops.concat([cell_output, context], 1))
    else:
        attention = context
    return attention, alignments, next_attention_state


class AttentionWrapper(_RNNCell):
    """A cell whose every step attends over the memory with the cell's output and feeds the attention back in."""

    def __init__(self, cell, attention_mechanism, attention_layer_size=None, alignment_history=False,
                 cell_input_fn=None, output_attention=True, initial_cell_state=None, name=None, attention_layer=None,
                 attention_fn=None):
        super(AttentionWrapper, self).__init__(name=name)
        rnn_cell_impl.assert_like_rnncell("cell", cell)
        if isinstance(attention_mechanism, (list, tuple)):
            self._is_multi = True
            attention_mechanisms = list(attention_mechanism)
        else:
            self._is_multi = False
            attention_mechanisms = [attention_mechanism]
        if cell_input_fn is None:
            cell_input_fn = lambda inputs, attention: array_ops.concat([inputs, attention], -1)  # noqa: E731
        if attention_layer_size is not None and attention_layer is not None:
            raise ValueError("Only one of attention_layer_size and attention_layer should be set")
        if attention_layer_size is not None:
            sizes = tuple(attention_layer_size if isinstance(attention_layer_size, (list, tuple))
                          else (attention_layer_size,))
            if len(sizes) != len(attention_mechanisms):
                raise ValueError("If provided, attention_layer_size must contain exactly one integer per "
                                 "attention_mechanism, saw: %d vs %d" % (len(sizes), len(attention_mechanisms)))
            self._attention_layers = tuple(
                _Dense(size, name="attention_layer", use_bias=False, dtype=mechanism.dtype)
                for size, mechanism in zip(sizes, attention_mechanisms))
            self._attention_layer_size = sum(sizes)
        elif attention_layer is not None:
            self._attention_layers = tuple(attention_layer if isinstance(attention_layer, (list, tuple))
                                           else (attention_layer,))
            self._attention_layer_size = sum(
                tensor_shape.dimension_value(layer.compute_output_shape(
                    [None, cell.output_size + tensor_shape.dimension_value(mechanism.values.shape[-1])])[-1])
                for layer, mechanism in zip(self._attention_layers, attention_mechanisms))
        else:
            self._attention_layers = None
            self._attention_layer_size = sum(tensor_shape.dimension_value(mechanism.values.shape[-1])
                                             for mechanism in attention_mechanisms)
        if attention_fn is None:
            attention_fn = _compute_attention
        self._attention_fn = attention_fn
        self._cell, self._attention_mechanisms = cell, attention_mechanisms
        self._cell_input_fn, self._output_attention = cell_input_fn, output_attention
        self._alignment_history = alignment_history
        with ops.name_scope(name, "AttentionWrapperInit"):
            if initial_cell_state is None:
                self._initial_cell_state = None
            else:
                final_state_tensor = nest.flatten(initial_cell_state)[-1]
                state_batch_size = (tensor_shape.dimension_value(final_state_tensor.shape[0])
                                    or array_ops.shape(final_state_tensor)[0])
                error_message = ("When constructing AttentionWrapper %s: " % self._base_name
                                 + "Non-matching batch sizes between the memory (encoder output) and "
                                 "initial_cell_state.  Are you using the BeamSearchDecoder?  You may need to tile "
                                 "your initial state via the tf.contrib.seq2seq.tile_batch function with argument "
                                 "multiple=beam_width.")
                with ops.control_dependencies(self._batch_size_checks(state_batch_size, error_message)):
                    self._initial_cell_state = nest.map_structure(
                        lambda s: array_ops.identity(s, name="check_initial_cell_state"), initial_cell_state)

    def _batch_size_checks(self, batch_size, error_message):
        from tensorflow.python.ops import check_ops
        return [check_ops.assert_equal(batch_size, mechanism.batch_size, message=error_message)
                for mechanism in self._attention_mechanisms]

    def _item_or_tuple(self, seq):
        t = tuple(seq)
        return t if self._is_multi else t[0]

    @property
    def output_size(self):
        return self._attention_layer_size if self._output_attention else self._cell.output_size

    @property
    def state_size(self):
        return AttentionWrapperState(
            cell_state=self._cell.state_size, time=tensor_shape.TensorShape([]),
            attention=self._attention_layer_size,
            alignments=self._item_or_tuple(a.alignments_size for a in self._attention_mechanisms),
            attention_state=self._item_or_tuple(a.state_size for a in self._attention_mechanisms),
            alignment_history=self._item_or_tuple(a.alignments_size if self._alignment_history else ()
                                                  for a in self._attention_mechanisms))

    def zero_state(self, batch_size, dtype):
        with ops.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            if self._initial_cell_state is not None:
                cell_state = self._initial_cell_state
            else:
                cell_state = self._cell.zero_state(batch_size, dtype)
            error_message = ("When calling zero_state of AttentionWrapper %s: " % self._base_name
                             + "Non-matching batch sizes between the memory (encoder output) and the requested "
                             "batch size.  Are you using the BeamSearchDecoder?  If so, make sure your encoder "
                             "output has been tiled to beam_width via tf.contrib.seq2seq.tile_batch, and the "
                             "batch_size= argument passed to zero_state is batch_size * beam_width.")
            with ops.control_dependencies(self._batch_size_checks(batch_size, error_message)):
                cell_state = nest.map_structure(lambda s: array_ops.identity(s, name="checked_cell_state"),
                                                cell_state)
            initial_alignments = [a.initial_alignments(batch_size, dtype) for a in self._attention_mechanisms]
            return AttentionWrapperState(
                cell_state=cell_state, time=array_ops.zeros([], dtype=dtypes.int32),
                attention=rnn_cell_impl._zero_state_tensors(self._attention_layer_size, batch_size, dtype),
                alignments=self._item_or_tuple(initial_alignments),
                attention_state=self._item_or_tuple(a.initial_state(batch_size, dtype)
                                                    for a in self._attention_mechanisms),
                alignment_history=self._item_or_tuple(
                    tensor_array_ops.TensorArray(dtype, size=0, dynamic_size=True,
                                                 element_shape=alignment.shape)
                    if self._alignment_history else () for alignment in initial_alignments))

    def call(self, inputs, state):
        if not isinstance(state, AttentionWrapperState):
            raise TypeError("Expected state to be instance of AttentionWrapperState. Received type %s instead."
                            % type(state))
        cell_inputs = self._cell_input_fn(inputs, state.attention)
        cell_state = state.cell_state
        cell_output, next_cell_state = self._cell(cell_inputs, cell_state)
        cell_batch_size = (tensor_shape.dimension_value(cell_output.shape[0]) or array_ops.shape(cell_output)[0])
        error_message = ("When applying AttentionWrapper %s: " % self.name
                         + "Non-matching batch sizes between the memory (encoder output) and the query (decoder "
                         "output).  Are you using the BeamSearchDecoder?  You may need to tile your memory input via "
                         "the tf.contrib.seq2seq.tile_batch function with argument multiple=beam_width.")
        with ops.control_dependencies(self._batch_size_checks(cell_batch_size, error_message)):
            cell_output = array_ops.identity(cell_output, name="checked_cell_output")
        if self._is_multi:
            previous_attention_state, previous_alignment_history = state.attention_state, state.alignment_history
        else:
            previous_attention_state, previous_alignment_history = [state.attention_state], [state.alignment_history]
        all_alignments, all_attentions, all_attention_states, maybe_all_histories = [], [], [], []
        for i, attention_mechanism in enumerate(self._attention_mechanisms):
            attention, alignments, next_attention_state = self._attention_fn(
                attention_mechanism, cell_output, previous_attention_state[i],
                self._attention_layers[i] if self._attention_layers else None)
            alignment_history = previous_alignment_history[i].write(state.time, alignments) \
                if self._alignment_history else ()
            all_attention_states.append(next_attention_state)
            all_alignments.append(alignments)
            all_attentions.append(attention)
            maybe_all_histories.append(alignment_history)
        attention = array_ops.concat(all_attentions, 1)
        next_state = AttentionWrapperState(
            time=state.time + 1, cell_state=next_cell_state, attention=attention,
            attention_state=self._item_or_tuple(all_attention_states),
            alignments=self._item_or_tuple(all_alignments),
            alignment_history=self._item_or_tuple(maybe_all_histories))
        if self._output_attention:
            return attention, next_state
        return cell_output, next_state



# The beam search builds on the decoder and the attention state above.
from tensorflow.contrib.seq2seq.beam_search import (  # noqa: E402, F401 (the public names of this part)
    BeamSearchDecoder,
    BeamSearchDecoderOutput,
    BeamSearchDecoderState,
    FinalBeamSearchDecoderOutput,
    gather_tree,
)

part(__name__, "see TensorFlow Addons' tfa.seq2seq (the monotonic attentions, the scheduled-sampling helpers)")
