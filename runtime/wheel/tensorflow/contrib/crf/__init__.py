"""tf.contrib.crf: a linear-chain conditional random field (written here from TF 1.15's definitions: its function
and variable names, its forward algorithm and Viterbi decoding through tf.nn.dynamic_rnn over the time steps,
sequence lengths masked as TF 1.15 masked them).

inputs / potentials: [batch, time, tags] unary scores; transition_params: [tags, tags], from tag i to tag j."""
import numpy as np
from tensorflow.contrib import part
from tensorflow.python.framework import dtypes, tensor_shape
from tensorflow.python.framework.smart_cond import smart_cond
from tensorflow.python.ops import array_ops, math_ops, rnn, rnn_cell_impl, variable_scope

__all__ = ["crf_sequence_score", "crf_log_norm", "crf_log_likelihood", "crf_unary_score", "crf_binary_score",
           "CrfForwardRnnCell", "viterbi_decode", "crf_decode", "CrfDecodeForwardRnnCell",
           "CrfDecodeBackwardRnnCell", "crf_multitag_sequence_score"]


def _single_step(inputs):
    return tensor_shape.dimension_value(inputs.shape[1]) == 1


def crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params):
    """The unnormalized score of each tag sequence: its unary scores plus its transitions."""
    def _one_step():
        batch = array_ops.shape(inputs)[0]
        flat = array_ops.reshape(inputs, [batch, -1])
        indices = array_ops.stack([math_ops.range(batch), array_ops.reshape(tag_indices, [-1])], axis=1)
        score = array_ops.gather_nd(flat, indices)
        return array_ops.where(math_ops.less_equal(sequence_lengths, 0), array_ops.zeros_like(score), score)

    def _multi_steps():
        return (crf_unary_score(tag_indices, sequence_lengths, inputs)
                + crf_binary_score(tag_indices, sequence_lengths, transition_params))

    return smart_cond(_single_step(inputs), _one_step, _multi_steps)


def crf_multitag_sequence_score(inputs, tag_bitmap, sequence_lengths, transition_params):
    """The score of all sequences through the tags ``tag_bitmap`` allows at each step ([batch, time, tags] bool)."""
    masked = array_ops.where(tag_bitmap, inputs, array_ops.fill(array_ops.shape(inputs), float("-inf")))
    return crf_log_norm(masked, sequence_lengths, transition_params)


def crf_log_norm(inputs, sequence_lengths, transition_params):
    """The log partition function of each sequence (the forward algorithm)."""
    first = array_ops.slice(inputs, [0, 0, 0], [-1, 1, -1])
    first = array_ops.squeeze(first, [1])

    def _one_step():
        log_norm = math_ops.reduce_logsumexp(first, [1])
        return array_ops.where(math_ops.less_equal(sequence_lengths, 0), array_ops.zeros_like(log_norm), log_norm)

    def _multi_steps():
        rest = array_ops.slice(inputs, [0, 1, 0], [-1, -1, -1])
        cell = CrfForwardRnnCell(transition_params)
        lengths_less_one = math_ops.maximum(array_ops.constant(0, dtype=sequence_lengths.dtype), sequence_lengths - 1)
        _, alphas = rnn.dynamic_rnn(cell=cell, inputs=rest, sequence_length=lengths_less_one, initial_state=first,
                                    dtype=inputs.dtype)
        log_norm = math_ops.reduce_logsumexp(alphas, [1])
        return array_ops.where(math_ops.less_equal(sequence_lengths, 0), array_ops.zeros_like(log_norm), log_norm)

    return smart_cond(_single_step(inputs), _one_step, _multi_steps)


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None):
    """(log-likelihood of each tag sequence, transition_params); without transition_params, the variable
    "transitions" [tags, tags] of the current variable scope."""
    num_tags = tensor_shape.dimension_value(inputs.shape[2])
    if transition_params is None:
        transition_params = variable_scope.get_variable("transitions", [num_tags, num_tags])
    sequence_scores = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    log_norm = crf_log_norm(inputs, sequence_lengths, transition_params)
    return sequence_scores - log_norm, transition_params


def crf_unary_score(tag_indices, sequence_lengths, inputs):
    """Each sequence's sum of the unary scores of its tags, over its length."""
    batch, max_len = array_ops.shape(inputs)[0], array_ops.shape(inputs)[1]
    num_tags = array_ops.shape(inputs)[2]
    flat_inputs = array_ops.reshape(inputs, [-1])
    offsets = array_ops.expand_dims(math_ops.range(batch) * max_len * num_tags, 1)
    offsets += array_ops.expand_dims(math_ops.range(max_len) * num_tags, 0)
    if tag_indices.dtype == dtypes.int64:
        offsets = math_ops.cast(offsets, dtypes.int64)
    flat_indices = array_ops.reshape(offsets + tag_indices, [-1])
    scores = array_ops.reshape(array_ops.gather(flat_inputs, flat_indices), [batch, max_len])
    masks = array_ops.sequence_mask(sequence_lengths, maxlen=array_ops.shape(tag_indices)[1], dtype=dtypes.float32)
    return math_ops.reduce_sum(scores * masks, 1)


def crf_binary_score(tag_indices, sequence_lengths, transition_params):
    """Each sequence's sum of the scores of its tag transitions, over its length."""
    num_tags = tensor_shape.dimension_value(transition_params.shape[0])
    num_transitions = array_ops.shape(tag_indices)[1] - 1
    start_tags = array_ops.slice(tag_indices, [0, 0], [-1, num_transitions])
    end_tags = array_ops.slice(tag_indices, [0, 1], [-1, num_transitions])
    flat_indices = start_tags * num_tags + end_tags
    scores = array_ops.gather(array_ops.reshape(transition_params, [-1]), flat_indices)
    masks = array_ops.sequence_mask(sequence_lengths, maxlen=array_ops.shape(tag_indices)[1], dtype=dtypes.float32)
    masks = array_ops.slice(masks, [0, 1], [-1, -1])
    return math_ops.reduce_sum(scores * masks, 1)


class _TransitionCell(rnn_cell_impl.RNNCell):
    """A cell stepping over tags with [tags, tags] transition scores; its state and output: one score per tag."""

    def __init__(self, transition_params):
        super(_TransitionCell, self).__init__()
        self._transition_params = array_ops.expand_dims(transition_params, 0)
        self._num_tags = tensor_shape.dimension_value(transition_params.shape[0])

    @property
    def state_size(self):
        return self._num_tags

    @property
    def output_size(self):
        return self._num_tags


class CrfForwardRnnCell(_TransitionCell):
    """One step of the forward algorithm: the log-sum of the previous scores through each transition."""

    def __call__(self, inputs, state, scope=None):
        scores = array_ops.expand_dims(state, 2) + self._transition_params
        new_alphas = inputs + math_ops.reduce_logsumexp(scores, [1])
        return new_alphas, new_alphas


def viterbi_decode(score, transition_params):
    """The best tag sequence of one [time, tags] numpy score, and its score (outside TensorFlow, in numpy)."""
    trellis = np.zeros_like(score)
    backpointers = np.zeros_like(score, dtype=np.int32)
    trellis[0] = score[0]
    for t in range(1, score.shape[0]):
        v = np.expand_dims(trellis[t - 1], 1) + transition_params
        trellis[t] = score[t] + np.max(v, 0)
        backpointers[t] = np.argmax(v, 0)
    viterbi = [np.argmax(trellis[-1])]
    for pointers in reversed(backpointers[1:]):
        viterbi.append(pointers[viterbi[-1]])
    viterbi.reverse()
    return viterbi, np.max(trellis[-1])


class CrfDecodeForwardRnnCell(_TransitionCell):
    """One forward step of Viterbi decoding: the best previous tag for each tag, and the new best scores."""

    def __call__(self, inputs, state, scope=None):
        scores = array_ops.expand_dims(state, 2) + self._transition_params
        new_state = inputs + math_ops.reduce_max(scores, [1])
        backpointers = math_ops.cast(math_ops.argmax(scores, 1), dtype=dtypes.int32)
        return backpointers, new_state


class CrfDecodeBackwardRnnCell(rnn_cell_impl.RNNCell):
    """One backward step of Viterbi decoding: follow the backpointer of the tag chosen after this step."""

    def __init__(self, num_tags):
        super(CrfDecodeBackwardRnnCell, self).__init__()
        self._num_tags = num_tags

    @property
    def state_size(self):
        return 1

    @property
    def output_size(self):
        return 1

    def __call__(self, inputs, state, scope=None):
        state = array_ops.squeeze(state, axis=[1])
        batch = array_ops.shape(inputs)[0]
        indices = array_ops.stack([math_ops.range(batch), state], axis=1)
        new_tags = array_ops.expand_dims(array_ops.gather_nd(inputs, indices), axis=-1)
        return new_tags, new_tags


def crf_decode(potentials, transition_params, sequence_length):
    """(the best tag sequence of each row [batch, time] int32, its score [batch]), Viterbi in the graph."""
    def _one_step():
        tags = math_ops.cast(math_ops.argmax(potentials, axis=2), dtype=dtypes.int32)
        return tags, math_ops.reduce_max(array_ops.squeeze(potentials, [1]), axis=1)

    def _multi_steps():
        num_tags = tensor_shape.dimension_value(potentials.shape[2])
        initial_state = array_ops.squeeze(array_ops.slice(potentials, [0, 0, 0], [-1, 1, -1]), axis=[1])
        inputs = array_ops.slice(potentials, [0, 1, 0], [-1, -1, -1])
        lengths_less_one = math_ops.maximum(array_ops.constant(0, dtype=sequence_length.dtype), sequence_length - 1)
        backpointers, last_score = rnn.dynamic_rnn(
            CrfDecodeForwardRnnCell(transition_params), inputs=inputs, sequence_length=lengths_less_one,
            initial_state=initial_state, time_major=False, dtype=dtypes.int32)
        backpointers = array_ops.reverse_sequence(backpointers, lengths_less_one, seq_dim=1)
        last = math_ops.cast(math_ops.argmax(last_score, axis=1), dtype=dtypes.int32)
        last = array_ops.expand_dims(last, axis=-1)
        decode_tags, _ = rnn.dynamic_rnn(
            CrfDecodeBackwardRnnCell(num_tags), backpointers, sequence_length=lengths_less_one, initial_state=last,
            time_major=False, dtype=dtypes.int32)
        decode_tags = array_ops.squeeze(decode_tags, axis=[2])
        decode_tags = array_ops.concat([last, decode_tags], axis=1)
        decode_tags = array_ops.reverse_sequence(decode_tags, sequence_length, seq_dim=1)
        return decode_tags, math_ops.reduce_max(last_score, axis=1)

    return smart_cond(_single_step(potentials), _one_step, _multi_steps)


part(__name__, "see TensorFlow Addons' tfa.text (crf_log_likelihood, crf_decode, viterbi_decode)")
