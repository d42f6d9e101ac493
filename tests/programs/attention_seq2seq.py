"""An attention sequence-to-sequence model, as TF 1.x NMT code writes it (tf.contrib.seq2seq).

    python attention_seq2seq.py WORK_DIR [bahdanau|luong] [FROM_DIR]

Learns to reverse short token sequences. Encoder: embeddings and tf.nn.dynamic_rnn over an LSTM cell. Decoder:
tf.contrib.seq2seq.AttentionWrapper around an LSTM cell with BahdanauAttention (or scaled LuongAttention) over the
encoder outputs, masked by the source lengths, started from the encoder state; TrainingHelper + BasicDecoder +
dynamic_decode (impute_finished) for training, sequence_loss over the target mask, Adam; GreedyEmbeddingHelper with
maximum_iterations for inference, sharing the variables; and NMT's beam search: the encoder's outputs, state and
lengths tiled with tile_batch, a second attention mechanism and AttentionWrapper over them reusing the trained
variables (alignment history on, so the decoder reorders it), BeamSearchDecoder (no penalties with Bahdanau; length
and coverage penalties with Luong). Trains 25 steps and saves; then restores FROM_DIR's checkpoint (another
TensorFlow's) or its own, trains 5 more and decodes. Prints one JSON line.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

VOCAB, MAX_LEN, UNITS, BATCH, STEPS, MORE, BEAM = 12, 6, 16, 16, 25, 5, 3
START, END = 1, 2


def make_data(rng, count):
    lengths = rng.randint(2, MAX_LEN + 1, count).astype(np.int32)
    source = np.zeros((count, MAX_LEN), np.int32)
    target_in = np.zeros((count, MAX_LEN + 1), np.int32)
    target_out = np.zeros((count, MAX_LEN + 1), np.int32)
    for row, length in enumerate(lengths):
        tokens = rng.randint(3, VOCAB, length)
        source[row, :length] = tokens
        target_in[row, :length + 1] = np.concatenate([[START], tokens[::-1]])
        target_out[row, :length + 1] = np.concatenate([tokens[::-1], [END]])
    return source, lengths, target_in, target_out, lengths + 1


def build(mechanism):
    tf.set_random_seed(80)
    source = tf.placeholder(tf.int32, [None, MAX_LEN], name="source")
    source_lengths = tf.placeholder(tf.int32, [None], name="source_lengths")
    target_in = tf.placeholder(tf.int32, [None, MAX_LEN + 1], name="target_in")
    target_out = tf.placeholder(tf.int32, [None, MAX_LEN + 1], name="target_out")
    target_lengths = tf.placeholder(tf.int32, [None], name="target_lengths")
    batch = tf.shape(source)[0]
    with tf.variable_scope("seq2seq", initializer=tf.random_uniform_initializer(-0.1, 0.1, seed=81)):
        embeddings = tf.get_variable("embeddings", [VOCAB, 8])
        encoder_cell = tf.nn.rnn_cell.LSTMCell(UNITS)
        encoder_outputs, encoder_state = tf.nn.dynamic_rnn(
            encoder_cell, tf.nn.embedding_lookup(embeddings, source), sequence_length=source_lengths,
            dtype=tf.float32, scope="encoder")
        decoder_cell = tf.nn.rnn_cell.LSTMCell(UNITS)
        cell = tf.contrib.seq2seq.AttentionWrapper(
            decoder_cell, attention_mechanism(mechanism, encoder_outputs, source_lengths),
            attention_layer_size=UNITS, alignment_history=True)
        initial_state = cell.zero_state(batch, tf.float32).clone(cell_state=encoder_state)
        projection = tf.layers.Dense(VOCAB, use_bias=False, name="output_projection")
        helper = tf.contrib.seq2seq.TrainingHelper(tf.nn.embedding_lookup(embeddings, target_in), target_lengths)
        decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, initial_state, output_layer=projection)
        outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(decoder, impute_finished=True, scope="decoder")
        logits = outputs.rnn_output
        weights = tf.sequence_mask(target_lengths, tf.shape(logits)[1], dtype=tf.float32)
        targets = target_out[:, :tf.shape(logits)[1]]
        loss = tf.contrib.seq2seq.sequence_loss(logits, targets, weights)
        train_op = tf.train.AdamOptimizer(0.02).minimize(loss)
        greedy = tf.contrib.seq2seq.GreedyEmbeddingHelper(embeddings, tf.fill([batch], START), END)
        inference = tf.contrib.seq2seq.BasicDecoder(cell, greedy, initial_state, output_layer=projection)
        decoded, final_state, decoded_lengths = tf.contrib.seq2seq.dynamic_decode(
            inference, maximum_iterations=MAX_LEN + 1, scope="decoder")
        alignments = final_state.alignment_history.stack()
    with tf.variable_scope("seq2seq", reuse=True):  # inference with the trained variables, as NMT's infer graph
        beam = beam_search(mechanism, decoder_cell, projection, embeddings, encoder_outputs, encoder_state,
                           source_lengths, batch)
    rng = np.random.RandomState(10)  # gather_tree on hand-made beams: ends mid-way, lengths 0, short and too long
    outputs = {"gather_tree": tf.contrib.seq2seq.gather_tree(
        rng.randint(0, 7, (5, 4, 3)).astype(np.int32), rng.randint(0, 3, (5, 4, 3)).astype(np.int32), [5, 3, 0, 9],
        end_token=END)}
    placeholders = (source, source_lengths, target_in, target_out, target_lengths)
    outputs.update({"sample_ids": decoded.sample_id, "decoded_lengths": decoded_lengths, "alignments": alignments})
    outputs.update(beam)
    return placeholders, loss, train_op, outputs


def attention_mechanism(mechanism, memory, lengths):
    if mechanism == "luong":
        return tf.contrib.seq2seq.LuongAttention(UNITS, memory, memory_sequence_length=lengths, scale=True)
    return tf.contrib.seq2seq.BahdanauAttention(UNITS, memory, memory_sequence_length=lengths)


def beam_search(mechanism, decoder_cell, projection, embeddings, encoder_outputs, encoder_state, lengths, batch):
    memory = tf.contrib.seq2seq.tile_batch(encoder_outputs, multiplier=BEAM)
    tiled_lengths = tf.contrib.seq2seq.tile_batch(lengths, multiplier=BEAM)
    tiled_state = tf.contrib.seq2seq.tile_batch(encoder_state, multiplier=BEAM)
    cell = tf.contrib.seq2seq.AttentionWrapper(
        decoder_cell, attention_mechanism(mechanism, memory, tiled_lengths), attention_layer_size=UNITS,
        alignment_history=True)
    initial_state = cell.zero_state(batch * BEAM, tf.float32).clone(cell_state=tiled_state)
    penalties = (0.6, 0.2) if mechanism == "luong" else (0.0, 0.0)
    decoder = tf.contrib.seq2seq.BeamSearchDecoder(
        cell, embeddings, tf.fill([batch], START), END, initial_state, BEAM, output_layer=projection,
        length_penalty_weight=penalties[0], coverage_penalty_weight=penalties[1])
    outputs, final_state, _ = tf.contrib.seq2seq.dynamic_decode(decoder, maximum_iterations=MAX_LEN + 1,
                                                                scope="decoder")
    return {"beam_ids": outputs.predicted_ids, "beam_scores": outputs.beam_search_decoder_output.scores,
            "beam_parents": outputs.beam_search_decoder_output.parent_ids, "beam_lengths": final_state.lengths,
            "beam_alignments": final_state.cell_state.alignment_history}


def main(work_dir, mechanism="bahdanau", from_dir=None):
    placeholders, loss, train_op, outputs = build(mechanism)
    data = make_data(np.random.RandomState(8), BATCH * (STEPS + MORE))
    test = make_data(np.random.RandomState(9), 6)
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    saver = tf.train.Saver()

    def feed(batch):
        return dict(zip(placeholders, batch))

    def batches(first, count):
        return [tuple(part[i * BATCH:(i + 1) * BATCH] for part in data) for i in range(first, first + count)]

    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        losses = [float(sess.run([loss, train_op], feed(b))[0]) for b in batches(0, STEPS)]
        path = saver.save(sess, os.path.join(work_dir, "model"))
        variables = sorted("%s %s" % (v.op.name, v.shape.as_list()) for v in tf.global_variables())
    with tf.Session(config=config) as sess:
        saver.restore(sess, tf.train.latest_checkpoint(from_dir) if from_dir else path)
        resumed = [float(sess.run([loss, train_op], feed(b))[0]) for b in batches(STEPS, MORE)]
        got = sess.run(outputs, feed(test))
    print(json.dumps({"losses": losses, "resumed_losses": resumed, "variables": variables,
                      "decoded": got["sample_ids"].tolist(), "decoded_lengths": got["decoded_lengths"].tolist(),
                      "alignment_sums": [float(v) for v in got["alignments"].sum(axis=(0, 2))],
                      "beam_ids": got["beam_ids"].tolist(), "beam_parents": got["beam_parents"].tolist(),
                      "beam_lengths": got["beam_lengths"].tolist(), "gather_tree": got["gather_tree"].tolist(),
                      "beam_scores": [float(v) for v in got["beam_scores"].ravel()],
                      # the attended source position at each step of each reordered beam (reordering moves it)
                      "beam_attended": (got["beam_alignments"] * np.arange(MAX_LEN)).sum(axis=2).ravel().tolist()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
