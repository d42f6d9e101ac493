"""A BiLSTM-CRF sequence tagger, as TF 1.x NER code writes it (tf.contrib.crf).

    python bilstm_crf.py WORK_DIR [FROM_DIR]

Word embeddings, tf.nn.bidirectional_dynamic_rnn over LSTM cells, a dense projection to tag scores, then
tf.contrib.crf.crf_log_likelihood (its "transitions" variable) as the loss, trained with Adam; tags decoded in
the graph with crf_decode and in numpy with viterbi_decode, on padded sentences of varied lengths. Trains 15
steps and saves; then restores FROM_DIR's checkpoint (another TensorFlow's) or its own and trains 5 more.
Prints one JSON line.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

VOCAB, TAGS, MAX_LEN, BATCH, STEPS, MORE = 40, 5, 9, 16, 15, 5


def make_data(rng, count):
    lengths = rng.randint(1, MAX_LEN + 1, count)
    words = np.zeros((count, MAX_LEN), np.int32)
    tags = np.zeros((count, MAX_LEN), np.int32)
    for row, length in enumerate(lengths):
        words[row, :length] = rng.randint(1, VOCAB, length)
        tags[row, :length] = words[row, :length] % TAGS
        tags[row, 1:length] = np.where(words[row, 1:length] % 3 == 0, tags[row, :length - 1], tags[row, 1:length])
    return words, tags, lengths.astype(np.int32)


def build():
    tf.set_random_seed(60)
    words = tf.placeholder(tf.int32, [None, MAX_LEN], name="words")
    tags = tf.placeholder(tf.int32, [None, MAX_LEN], name="tags")
    lengths = tf.placeholder(tf.int32, [None], name="lengths")
    embeddings = tf.get_variable("embeddings", [VOCAB, 8], initializer=tf.random_uniform_initializer(-0.5, 0.5, seed=61))
    inputs = tf.nn.embedding_lookup(embeddings, words)
    forward = tf.nn.rnn_cell.LSTMCell(12, initializer=tf.glorot_uniform_initializer(seed=62))
    backward = tf.nn.rnn_cell.LSTMCell(12, initializer=tf.glorot_uniform_initializer(seed=63))
    (out_fw, out_bw), _ = tf.nn.bidirectional_dynamic_rnn(forward, backward, inputs, sequence_length=lengths,
                                                          dtype=tf.float32)
    scores = tf.layers.dense(tf.concat([out_fw, out_bw], axis=-1), TAGS, name="tag_scores",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=64))
    with tf.variable_scope("crf", initializer=tf.glorot_uniform_initializer(seed=65)):
        log_likelihood, transitions = tf.contrib.crf.crf_log_likelihood(scores, tags, lengths)
    loss = tf.reduce_mean(-log_likelihood)
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss)
    decoded, best = tf.contrib.crf.crf_decode(scores, transitions, lengths)
    return words, tags, lengths, scores, transitions, loss, train_op, decoded, best


def main(work_dir, from_dir=None):
    words, tags, lengths, scores, transitions, loss, train_op, decoded, best = build()
    data = make_data(np.random.RandomState(6), BATCH * (STEPS + MORE))
    test = make_data(np.random.RandomState(7), 8)
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    saver = tf.train.Saver()

    def feed(batch):
        return {words: batch[0], tags: batch[1], lengths: batch[2]}

    def batches(first, count):
        return [tuple(part[i * BATCH:(i + 1) * BATCH] for part in data) for i in range(first, first + count)]

    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        losses = [float(sess.run([loss, train_op], feed(b))[0]) for b in batches(0, STEPS)]
        path = saver.save(sess, os.path.join(work_dir, "model"))
        tags_in_graph, best_scores, test_scores, transition_values = sess.run(
            [decoded, best, scores, transitions], feed(test))
        in_numpy = [[int(t) for t in tf.contrib.crf.viterbi_decode(test_scores[row, :test[2][row]],
                                                                    transition_values)[0]]
                    for row in range(len(test[2]))]
        variables = sorted("%s %s" % (v.op.name, v.shape.as_list()) for v in tf.global_variables())
    with tf.Session(config=config) as sess:
        saver.restore(sess, tf.train.latest_checkpoint(from_dir or work_dir) if from_dir else path)
        resumed = [float(sess.run([loss, train_op], feed(b))[0]) for b in batches(STEPS, MORE)]
    print(json.dumps({
        "losses": losses, "resumed_losses": resumed, "variables": variables,
        "decoded": [[int(t) for t in row[:n]] for row, n in zip(tags_in_graph, test[2])],
        "viterbi": in_numpy, "best_scores": [float(s) for s in best_scores], "lengths": [int(n) for n in test[2]]}))


if __name__ == "__main__":
    main(*sys.argv[1:])
