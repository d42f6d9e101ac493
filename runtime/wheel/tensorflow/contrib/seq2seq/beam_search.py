"""tf.contrib.seq2seq's beam search: BeamSearchDecoder and gather_tree, written here from TF 1.15's definitions.

The decoder keeps ``beam_width`` hypotheses per batch entry; each step scores every (beam, word) continuation by
its summed log-probability (divided by the GNMT length penalty, plus the coverage penalty when asked), keeps the
best ``beam_width``, and moves the cell states, lengths and finished flags with their beams. Finished beams can only
emit ``end_token`` at no cost. At the end, ``gather_tree`` follows the parent pointers back from the last step so
that each beam reads as one sequence. Same numbers as TF 1.15: its initial log-probabilities (0 for the first beam,
-inf for the others), its masking, its top-k over the flattened [beam * vocab] scores, and its tie order.

gather_tree is TF 1.15's GatherTree kernel (a contrib op TensorFlow 2.x does not have) written with TensorFlow's
own ops, so graphs holding it load on any TensorFlow."""
import collections

import numpy as np
from tensorflow.compat import v1 as _v1
from tensorflow.contrib.seq2seq import AttentionWrapperState, Decoder
from tensorflow.python.framework import dtypes, ops, tensor_shape, tensor_util
from tensorflow.python.ops import (
    array_ops,
    control_flow_ops,
    embedding_ops,
    math_ops,
    nn_ops,
    rnn_cell_impl,
    tensor_array_ops,
)
from tensorflow.python.platform import tf_logging
from tensorflow.python.util import nest

__all__ = ["BeamSearchDecoder", "BeamSearchDecoderOutput", "BeamSearchDecoderState", "FinalBeamSearchDecoderOutput",
           "gather_tree", "gather_tree_from_array"]


class BeamSearchDecoderState(collections.namedtuple(
        "BeamSearchDecoderState", ("cell_state", "log_probs", "finished", "lengths", "accumulated_attention_probs"))):
    pass


class BeamSearchDecoderOutput(collections.namedtuple(
        "BeamSearchDecoderOutput", ("scores", "predicted_ids", "parent_ids"))):
    pass


class FinalBeamSearchDecoderOutput(collections.namedtuple(
        "FinalBeamDecoderOutput", ["predicted_ids", "beam_search_decoder_output"])):
    """predicted_ids: [batch, time, beam] (or time-major) whole sequences; beam_search_decoder_output: each step's
    BeamSearchDecoderOutput."""


# --- following the parents back ------------------------------------------------------------------


def gather_tree(step_ids, parent_ids, max_sequence_lengths, end_token, name=None):
    """Each beam's whole sequence from per-step ids and parent beams ([max_time, batch, beam] each).

    For batch entry b only its first min(max_sequence_lengths[b], max_time) steps are read; later steps are
    end_token, and so is every step after a beam's first end_token."""
    with ops.name_scope(name, "GatherTree", [step_ids, parent_ids, max_sequence_lengths, end_token]):
        step_ids = ops.convert_to_tensor(step_ids, dtype=dtypes.int32, name="step_ids")
        parent_ids = ops.convert_to_tensor(parent_ids, dtype=dtypes.int32, name="parent_ids")
        lengths = ops.convert_to_tensor(max_sequence_lengths, dtype=dtypes.int32, name="max_sequence_lengths")
        end_token = ops.convert_to_tensor(end_token, dtype=dtypes.int32, name="end_token")
        shape = array_ops.shape(step_ids)
        max_time, batch_size, beam_width = shape[0], shape[1], shape[2]
        lengths = math_ops.minimum(lengths, max_time)
        own_beam = array_ops.tile(array_ops.expand_dims(math_ops.range(beam_width), 0), [batch_size, 1])
        batch_index = array_ops.tile(array_ops.expand_dims(math_ops.range(batch_size), 1), [1, beam_width])
        ends = array_ops.fill([batch_size, beam_width], end_token)

        def level(time, parent, beams):
            inside = array_ops.tile(array_ops.expand_dims(time < lengths, 1), [1, beam_width])
            at = array_ops.stack([batch_index, parent], -1)
            beams = beams.write(time, array_ops.where(inside, array_ops.gather_nd(step_ids[time], at), ends))
            return time - 1, array_ops.where(inside, array_ops.gather_nd(parent_ids[time], at), own_beam), beams

        written = tensor_array_ops.TensorArray(dtypes.int32, size=max_time, element_shape=tensor_shape.TensorShape(
            [None, None]))
        _, _, written = control_flow_ops.while_loop(
            lambda time, *_: time >= 0, level, (max_time - 1, own_beam, written), back_prop=False)
        beams = written.stack()
        ended_before = math_ops.cumsum(math_ops.cast(math_ops.equal(beams, end_token), dtypes.int32), axis=0,
                                       exclusive=True) > 0
        beams = array_ops.where(ended_before, array_ops.fill(shape, end_token), beams)
        beams.set_shape(step_ids.shape)
        return beams


def gather_tree_from_array(t, parent_ids, sequence_length):
    """A stacked TensorArray of per-step [batch * beam, ...] (or [batch, beam, ...]) values, reordered along the
    beams' ancestry as gather_tree orders their ids."""
    max_time = tensor_shape.dimension_value(parent_ids.shape[0]) or array_ops.shape(parent_ids)[0]
    batch_size = tensor_shape.dimension_value(parent_ids.shape[1]) or array_ops.shape(parent_ids)[1]
    beam_width = tensor_shape.dimension_value(parent_ids.shape[2]) or array_ops.shape(parent_ids)[2]
    beam_ids = array_ops.tile(array_ops.reshape(math_ops.range(beam_width), [1, 1, -1]), [max_time, batch_size, 1])
    max_sequence_lengths = math_ops.cast(math_ops.reduce_max(sequence_length, axis=1), dtypes.int32)
    sorted_beam_ids = gather_tree(beam_ids, parent_ids, max_sequence_lengths, end_token=beam_width + 1)
    in_bound_steps = array_ops.transpose(array_ops.sequence_mask(sequence_length, maxlen=max_time), perm=[2, 0, 1])
    sorted_beam_ids = array_ops.where(in_bound_steps, sorted_beam_ids, beam_ids)
    time_index = array_ops.tile(array_ops.reshape(math_ops.range(max_time), [-1, 1, 1]), [1, batch_size, beam_width])
    batch_index = array_ops.transpose(array_ops.tile(array_ops.reshape(math_ops.range(batch_size), [-1, 1, 1]),
                                                     [1, max_time, beam_width]), perm=[1, 0, 2])
    indices = array_ops.stack([time_index, batch_index, sorted_beam_ids], -1)
    final_shape = array_ops.shape(t)
    ordered = array_ops.gather_nd(array_ops.reshape(t, [max_time, batch_size, beam_width, -1]), indices)
    return array_ops.reshape(ordered, final_shape)


# --- one step of the search ----------------------------------------------------------------------


def _check_ndims(t):
    if t.shape.ndims is None:
        raise ValueError("Expected tensor (%s) to have known rank, but ndims == None." % t)


def _gather_beams(indices, values, batch_size, range_size, gather_shape, name=None):
    """values' rows picked per batch entry: ``indices`` [batch, k] index the entry's own ``range_size`` rows of
    ``values`` reshaped to ``gather_shape``."""
    with ops.name_scope(name, "tensor_gather_helper"):
        offsets = array_ops.expand_dims(math_ops.range(batch_size) * range_size, 1)
        picked = array_ops.gather(array_ops.reshape(values, gather_shape), array_ops.reshape(indices + offsets, [-1]))
        output = array_ops.reshape(picked, array_ops.shape(values)[:1 + len(gather_shape)], name="output")
        output.set_shape(tensor_shape.TensorShape([tensor_util.constant_value(batch_size)]).concatenate(
            values.shape[1:1 + len(gather_shape)]))
        return output


def _maybe_gather_beams(indices, values, batch_size, range_size, gather_shape):
    if isinstance(values, tensor_array_ops.TensorArray):
        return values
    _check_ndims(values)
    if values.shape.ndims < len(gather_shape):
        return values
    return _gather_beams(indices, values, batch_size, range_size, gather_shape)


def _length_penalty(sequence_lengths, penalty_factor):
    """GNMT's ((5 + length) / 6) ** penalty_factor; the number 1.0 when the factor is statically 0."""
    penalty_factor = ops.convert_to_tensor(penalty_factor, name="penalty_factor")
    penalty_factor.set_shape(())
    static = tensor_util.constant_value(penalty_factor)
    if static is not None and static == 0:
        return 1.0
    return math_ops.div((5. + math_ops.cast(sequence_lengths, dtypes.float32)) ** penalty_factor,
                        (5. + 1.) ** penalty_factor)


def _mask_probs(probs, eos_token, finished):
    """Finished beams put all their probability on eos (0 there, the dtype's lowest value elsewhere)."""
    vocab_size = array_ops.shape(probs)[2]
    finished_row = array_ops.one_hot(eos_token, vocab_size, dtype=probs.dtype,
                                     on_value=ops.convert_to_tensor(0., dtype=probs.dtype),
                                     off_value=probs.dtype.min)
    finished_probs = array_ops.tile(array_ops.reshape(finished_row, [1, 1, -1]),
                                    array_ops.concat([array_ops.shape(finished), [1]], 0))
    finished_mask = array_ops.tile(array_ops.expand_dims(finished, 2), [1, 1, vocab_size])
    return array_ops.where(finished_mask, finished_probs, probs)


def _attention_probs_of(state):
    probs = state.alignments
    if isinstance(probs, tuple):
        probs = math_ops.reduce_mean(array_ops.concat([array_ops.expand_dims(p, -1) for p in probs], -1), -1)
    return probs


def get_attention_probs(next_cell_state, coverage_penalty_weight):
    """The alignments the coverage penalty accumulates ([batch, beam, memory time], averaged over attention
    layers), or None when that penalty is off."""
    if coverage_penalty_weight == 0.0:
        return None
    if isinstance(next_cell_state, AttentionWrapperState):
        per_layer = [_attention_probs_of(next_cell_state)]
    elif isinstance(next_cell_state, tuple):
        per_layer = [_attention_probs_of(s) for s in next_cell_state if isinstance(s, AttentionWrapperState)]
    else:
        per_layer = []
    if not per_layer:
        raise ValueError("coverage_penalty_weight must be 0.0 if no cell is attentional.")
    if len(per_layer) == 1:
        return per_layer[0]
    return math_ops.reduce_mean(array_ops.concat([array_ops.expand_dims(p, -1) for p in per_layer], -1), -1)


def _get_scores(log_probs, sequence_lengths, length_penalty_weight, coverage_penalty_weight, finished,
                accumulated_attention_probs):
    """log_probs over the length penalty, plus (for finished beams) the weighted coverage penalty."""
    length_penalty = math_ops.cast(_length_penalty(sequence_lengths, length_penalty_weight), dtype=log_probs.dtype)
    scores = log_probs / length_penalty
    coverage_penalty_weight = ops.convert_to_tensor(coverage_penalty_weight, name="coverage_penalty_weight")
    if coverage_penalty_weight.shape.ndims != 0:
        raise ValueError("coverage_penalty_weight should be a scalar, but saw shape: %s"
                         % coverage_penalty_weight.shape)
    if tensor_util.constant_value(coverage_penalty_weight) == 0.0:
        return scores
    if accumulated_attention_probs is None:
        raise ValueError("accumulated_attention_probs can be None only if coverage penalty is disabled.")
    covered = array_ops.where(math_ops.equal(accumulated_attention_probs, 0.0),
                              array_ops.ones_like(accumulated_attention_probs), accumulated_attention_probs)
    coverage_penalty = math_ops.reduce_sum(math_ops.log(math_ops.minimum(covered, 1.0)), 2)
    coverage_penalty *= math_ops.cast(finished, dtypes.float32)
    return scores + array_ops.expand_dims(coverage_penalty * coverage_penalty_weight, 2)


def _beam_search_step(logits, next_cell_state, beam_state, batch_size, beam_width, end_token, length_penalty_weight,
                      coverage_penalty_weight):
    """The next beams: the best ``beam_width`` continuations of each entry's beams, with their states."""
    static_batch_size = tensor_util.constant_value(batch_size)
    previously_finished = beam_state.finished
    not_finished = math_ops.logical_not(previously_finished)
    step_log_probs = _mask_probs(nn_ops.log_softmax(logits), end_token, previously_finished)
    total_probs = array_ops.expand_dims(beam_state.log_probs, 2) + step_log_probs

    vocab_size = tensor_shape.dimension_value(logits.shape[-1]) or array_ops.shape(logits)[-1]
    lengths_to_add = array_ops.one_hot(array_ops.fill([batch_size, beam_width], end_token), depth=vocab_size,
                                       on_value=np.int64(0), off_value=np.int64(1), dtype=dtypes.int64)
    lengths_to_add *= array_ops.expand_dims(math_ops.cast(not_finished, dtypes.int64), 2)
    new_prediction_lengths = lengths_to_add + array_ops.expand_dims(beam_state.lengths, 2)

    accumulated_attention_probs = None
    attention_probs = get_attention_probs(next_cell_state, coverage_penalty_weight)
    if attention_probs is not None:
        attention_probs *= array_ops.expand_dims(math_ops.cast(not_finished, dtypes.float32), 2)
        accumulated_attention_probs = beam_state.accumulated_attention_probs + attention_probs
    scores = _get_scores(total_probs, new_prediction_lengths, length_penalty_weight, coverage_penalty_weight,
                         previously_finished, accumulated_attention_probs)

    scores_flat = array_ops.reshape(scores, [batch_size, -1])
    next_beam_scores, word_indices = nn_ops.top_k(
        scores_flat, k=ops.convert_to_tensor(beam_width, dtype=dtypes.int32, name="beam_width"))
    next_beam_scores.set_shape([static_batch_size, beam_width])
    word_indices.set_shape([static_batch_size, beam_width])
    next_beam_probs = _gather_beams(word_indices, total_probs, batch_size, beam_width * vocab_size, [-1],
                                    name="next_beam_probs")
    next_word_ids = math_ops.cast(math_ops.mod(word_indices, vocab_size, name="next_beam_word_ids"), dtypes.int32)
    next_beam_ids = math_ops.cast(math_ops.floordiv(word_indices, vocab_size), dtypes.int32,
                                  name="next_beam_parent_ids")

    def follow(values, gather_shape, name=None):
        return _gather_beams(next_beam_ids, values, batch_size, beam_width, gather_shape, name=name)

    previously_finished = follow(previously_finished, [-1])
    next_finished = math_ops.logical_or(previously_finished, math_ops.equal(next_word_ids, end_token),
                                        name="next_beam_finished")
    next_prediction_len = follow(beam_state.lengths, [-1])
    next_prediction_len += math_ops.cast(math_ops.logical_not(previously_finished), dtypes.int64)
    next_accumulated = () if accumulated_attention_probs is None else follow(
        accumulated_attention_probs, [batch_size * beam_width, -1], name="next_accumulated_attention_probs")
    next_cell_state = nest.map_structure(
        lambda values: _maybe_gather_beams(next_beam_ids, values, batch_size, beam_width,
                                           [batch_size * beam_width, -1]),
        next_cell_state)
    state = BeamSearchDecoderState(cell_state=next_cell_state, log_probs=next_beam_probs,
                                   lengths=next_prediction_len, finished=next_finished,
                                   accumulated_attention_probs=next_accumulated)
    return BeamSearchDecoderOutput(next_beam_scores, next_word_ids, next_beam_ids), state


# --- the decoder ---------------------------------------------------------------------------------


class BeamSearchDecoder(Decoder):
    """Beam search over ``cell``: start from ``start_tokens`` ([batch]) with ``initial_state`` already tiled to
    batch * beam_width rows (tile_batch), feed each step's ids back through ``embedding``, stop at ``end_token``."""

    def __init__(self, cell, embedding, start_tokens, end_token, initial_state, beam_width, output_layer=None,
                 length_penalty_weight=0.0, coverage_penalty_weight=0.0, reorder_tensor_arrays=True):
        rnn_cell_impl.assert_like_rnncell("cell", cell)
        if output_layer is not None and not isinstance(output_layer, _v1.keras.layers.Layer):
            raise TypeError("output_layer must be a Layer, received: %s" % type(output_layer))
        self._cell, self._output_layer, self._reorder_tensor_arrays = cell, output_layer, reorder_tensor_arrays
        self._beam_width = beam_width
        self._length_penalty_weight, self._coverage_penalty_weight = length_penalty_weight, coverage_penalty_weight
        if callable(embedding):
            self._embedding_fn = embedding
        else:
            self._embedding_fn = lambda ids: embedding_ops.embedding_lookup(embedding, ids)
        start_tokens = ops.convert_to_tensor(start_tokens, dtype=dtypes.int32, name="start_tokens")
        if start_tokens.get_shape().ndims != 1:
            raise ValueError("start_tokens must be a vector")
        self._end_token = ops.convert_to_tensor(end_token, dtype=dtypes.int32, name="end_token")
        if self._end_token.get_shape().ndims != 0:
            raise ValueError("end_token must be a scalar")
        self._batch_size = array_ops.size(start_tokens)
        self._initial_cell_state = nest.map_structure(self._maybe_split_batch_beams, initial_state,
                                                      self._cell.state_size)
        self._start_tokens = array_ops.tile(array_ops.expand_dims(start_tokens, 1), [1, self._beam_width])
        self._start_inputs = self._embedding_fn(self._start_tokens)
        self._finished = array_ops.one_hot(array_ops.zeros([self._batch_size], dtype=dtypes.int32),
                                           depth=self._beam_width, on_value=False, off_value=True, dtype=dtypes.bool)

    @property
    def batch_size(self):
        return self._batch_size

    def _rnn_output_size(self):
        size = self._cell.output_size
        if self._output_layer is None:
            return size
        unknown_batch = nest.map_structure(lambda s: tensor_shape.TensorShape([None]).concatenate(s), size)
        return nest.map_structure(lambda s: s[1:], self._output_layer.compute_output_shape(unknown_batch))

    @property
    def tracks_own_finished(self):
        """Beams move between slots each step, so dynamic_decode must take this decoder's finished flags as
        they are."""
        return True

    @property
    def output_size(self):
        beams = tensor_shape.TensorShape([self._beam_width])
        return BeamSearchDecoderOutput(scores=beams, predicted_ids=beams, parent_ids=beams)

    @property
    def output_dtype(self):
        dtype = nest.flatten(self._initial_cell_state)[0].dtype
        return BeamSearchDecoderOutput(scores=nest.map_structure(lambda _: dtype, self._rnn_output_size()),
                                       predicted_ids=dtypes.int32, parent_ids=dtypes.int32)

    def initialize(self, name=None):
        dtype = nest.flatten(self._initial_cell_state)[0].dtype
        log_probs = array_ops.one_hot(array_ops.zeros([self._batch_size], dtype=dtypes.int32),
                                      depth=self._beam_width, on_value=ops.convert_to_tensor(0.0, dtype=dtype),
                                      off_value=ops.convert_to_tensor(-np.inf, dtype=dtype), dtype=dtype)
        attention_probs = get_attention_probs(self._initial_cell_state, self._coverage_penalty_weight)
        state = BeamSearchDecoderState(
            cell_state=self._initial_cell_state, log_probs=log_probs, finished=self._finished,
            lengths=array_ops.zeros([self._batch_size, self._beam_width], dtype=dtypes.int64),
            accumulated_attention_probs=() if attention_probs is None else attention_probs)
        return self._finished, self._start_inputs, state

    def step(self, time, inputs, state, name=None):
        with ops.name_scope(name, "BeamSearchDecoderStep", (time, inputs, state)):
            inputs = nest.map_structure(lambda inp: self._merge_batch_beams(inp, s=inp.shape[2:]), inputs)
            cell_state = nest.map_structure(self._maybe_merge_batch_beams, state.cell_state, self._cell.state_size)
            cell_outputs, next_cell_state = self._cell(inputs, cell_state)
            cell_outputs = nest.map_structure(lambda out: self._split_batch_beams(out, out.shape[1:]), cell_outputs)
            next_cell_state = nest.map_structure(self._maybe_split_batch_beams, next_cell_state,
                                                 self._cell.state_size)
            if self._output_layer is not None:
                cell_outputs = self._output_layer(cell_outputs)
            output, beam_state = _beam_search_step(
                cell_outputs, next_cell_state, state, self._batch_size, self._beam_width, self._end_token,
                self._length_penalty_weight, self._coverage_penalty_weight)
            finished = beam_state.finished
            next_inputs = control_flow_ops.cond(math_ops.reduce_all(finished), lambda: self._start_inputs,
                                                lambda: self._embedding_fn(output.predicted_ids))
        return output, beam_state, next_inputs, finished

    def finalize(self, outputs, final_state, sequence_lengths):
        """The whole sequences (gather_tree over the steps' ids and parents); TensorArrays in the cell state
        reordered the same way when reorder_tensor_arrays."""
        del sequence_lengths  # the beams' own lengths are in final_state
        max_sequence_lengths = math_ops.cast(math_ops.reduce_max(final_state.lengths, axis=1), dtypes.int32)
        predicted_ids = gather_tree(outputs.predicted_ids, outputs.parent_ids, max_sequence_lengths,
                                    end_token=self._end_token)
        if self._reorder_tensor_arrays:
            final_state = final_state._replace(cell_state=nest.map_structure(
                lambda t: self._maybe_sort_array_beams(t, outputs.parent_ids, final_state.lengths),
                final_state.cell_state))
        return FinalBeamSearchDecoderOutput(predicted_ids=predicted_ids, beam_search_decoder_output=outputs), \
            final_state

    # [batch * beam, ...] <-> [batch, beam, ...]

    def _merge_batch_beams(self, t, s=None):
        s = tensor_shape.as_shape(tensor_util.constant_value(s)) if isinstance(s, ops.Tensor) \
            else tensor_shape.TensorShape(s)
        static_batch_size = tensor_util.constant_value(self._batch_size)
        rows = None if static_batch_size is None else static_batch_size * self._beam_width
        reshaped = array_ops.reshape(t, array_ops.concat(([self._batch_size * self._beam_width],
                                                          array_ops.shape(t)[2:]), 0))
        reshaped.set_shape(tensor_shape.TensorShape([rows]).concatenate(s))
        return reshaped

    def _split_batch_beams(self, t, s=None):
        s = tensor_shape.TensorShape(tensor_util.constant_value(s)) if isinstance(s, ops.Tensor) \
            else tensor_shape.TensorShape(s)
        reshaped = array_ops.reshape(t, array_ops.concat(([self._batch_size, self._beam_width],
                                                          array_ops.shape(t)[1:]), 0))
        expected = tensor_shape.TensorShape([tensor_util.constant_value(self._batch_size),
                                             self._beam_width]).concatenate(s)
        if not reshaped.shape.is_compatible_with(expected):
            raise ValueError("Unexpected behavior when reshaping between beam width and batch size.  The reshaped "
                             "tensor has shape: %s.  We expected it to have shape (batch_size, beam_width, depth) "
                             "== %s.  Perhaps you forgot to create a zero_state with "
                             "batch_size=encoder_batch_size * beam_width?" % (reshaped.shape, expected))
        reshaped.set_shape(expected)
        return reshaped

    def _maybe_split_batch_beams(self, t, s):
        if isinstance(t, tensor_array_ops.TensorArray):
            return t
        _check_ndims(t)
        return self._split_batch_beams(t, s) if t.shape.ndims >= 1 else t

    def _maybe_merge_batch_beams(self, t, s):
        if isinstance(t, tensor_array_ops.TensorArray):
            return t
        _check_ndims(t)
        return self._merge_batch_beams(t, s) if t.shape.ndims >= 2 else t

    def _maybe_sort_array_beams(self, t, parent_ids, sequence_length):
        if not isinstance(t, tensor_array_ops.TensorArray):
            return t
        shape = t.element_shape
        if shape.ndims is None or shape.ndims < 1:
            tf_logging.warn("The TensorArray %s in the cell state is not amenable to sorting based on the beam "
                            "search result. For a TensorArray to be sorted, its elements shape must be defined and "
                            "have at least a rank of 1, but saw shape: %s" % (t.handle.name, shape))
            return t
        batch_size = tensor_util.constant_value(self._batch_size)
        rows = tensor_shape.dimension_value(shape[0])
        if batch_size is not None and rows is not None and (
                rows != batch_size * self._beam_width
                or (shape.ndims >= 2 and tensor_shape.dimension_value(shape[1]) is not None
                    and (rows != batch_size or shape[1] != self._beam_width))):
            tf_logging.warn("TensorArray reordering expects elements to be reshapable to %s which is incompatible "
                            "with the current shape %s. Consider setting reorder_tensor_arrays to False to disable "
                            "TensorArray reordering during the beam search."
                            % (tensor_shape.TensorShape([batch_size, self._beam_width, None]), shape))
            return t
        stacked = t.stack()
        with ops.control_dependencies([self._check_batch_beam(stacked)]):
            return gather_tree_from_array(stacked, parent_ids, sequence_length)

    def _check_batch_beam(self, t):
        message = ("TensorArray reordering expects elements to be reshapable to [batch_size, beam_size, -1] which is "
                   "incompatible with the dynamic shape of %s elements. Consider setting reorder_tensor_arrays to "
                   "False to disable TensorArray reordering during the beam search." % t.name)
        shape = array_ops.shape(t)
        merged = math_ops.equal(shape[1], self._batch_size * self._beam_width)
        if t.shape.ndims != 2:
            merged = math_ops.logical_or(merged, math_ops.logical_and(math_ops.equal(shape[1], self._batch_size),
                                                                      math_ops.equal(shape[2], self._beam_width)))
        return control_flow_ops.Assert(merged, [message])
