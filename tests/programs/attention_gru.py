"""A DIEN-style interest evolution layer written as TF 1.15 code: a GRU cell whose gates are built
with tf.contrib's _Linear (`from tensorflow.contrib.rnn.python.ops.core_rnn_cell import _Linear`),
its update gate scaled by attention over a behaviour sequence (AUGRU), run by tf.nn.dynamic_rnn.

    python attention_gru.py WORK_DIR

Prints one JSON line: the losses, and the names and shapes of the trainable variables.
"""
import json
import sys

import numpy as np
import tensorflow as tf
from tensorflow.contrib.rnn.python.ops.core_rnn_cell import _Linear

ITEMS, DIM, LENGTH, UNITS, BATCH, STEPS = 500, 8, 10, 12, 128, 30


class AttentionGRUCell(tf.nn.rnn_cell.RNNCell):
    """GRU whose update gate is scaled by the attention score fed as the input's last column."""

    def __init__(self, num_units, reuse=None):
        super(AttentionGRUCell, self).__init__(_reuse=reuse)
        self._num_units = num_units
        self._gate_linear = None
        self._candidate_linear = None

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def call(self, inputs, state):
        features, attention = inputs[:, :-1], inputs[:, -1:]
        if self._gate_linear is None:
            with tf.variable_scope("gates"):
                self._gate_linear = _Linear([features, state], 2 * self._num_units, True,
                                            bias_initializer=tf.constant_initializer(1.0),
                                            kernel_initializer=tf.glorot_uniform_initializer(seed=61))
        reset, update = tf.split(tf.sigmoid(self._gate_linear([features, state])), 2, axis=1)
        if self._candidate_linear is None:
            with tf.variable_scope("candidate"):
                self._candidate_linear = _Linear([features, reset * state], self._num_units, True,
                                                 kernel_initializer=tf.glorot_uniform_initializer(seed=62))
        candidate = tf.tanh(self._candidate_linear([features, reset * state]))
        update = (1.0 - attention) * update
        new_state = update * state + (1.0 - update) * candidate
        return new_state, new_state


def make_data(rng):
    history = rng.randint(0, ITEMS, (BATCH, LENGTH)).astype(np.int64)
    lengths = rng.randint(3, LENGTH + 1, BATCH).astype(np.int32)
    target = rng.randint(0, ITEMS, BATCH).astype(np.int64)
    label = ((history[:, :3] % 5 == target[:, None] % 5).any(axis=1)).astype(np.float32)
    return history, lengths, target, label


def main(work_dir):
    history_v, lengths_v, target_v, label_v = make_data(np.random.RandomState(9))
    tf.set_random_seed(60)
    history = tf.placeholder(tf.int64, [None, LENGTH])
    lengths = tf.placeholder(tf.int32, [None])
    target = tf.placeholder(tf.int64, [None])
    label = tf.placeholder(tf.float32, [None])
    table = tf.get_variable("items", [ITEMS, DIM], initializer=tf.random_normal_initializer(0.0, 0.1, seed=63))
    history_emb = tf.nn.embedding_lookup(table, history)
    target_emb = tf.nn.embedding_lookup(table, target)
    scores = tf.reduce_sum(history_emb * tf.expand_dims(target_emb, 1), axis=2)
    mask = tf.sequence_mask(lengths, LENGTH)
    scores = tf.where(mask, scores, tf.fill(tf.shape(scores), -1e9))
    attention = tf.expand_dims(tf.nn.softmax(scores), -1)
    with tf.variable_scope("interest_evolution"):
        _, final_state = tf.nn.dynamic_rnn(AttentionGRUCell(UNITS), tf.concat([history_emb, attention], axis=2),
                                           sequence_length=lengths, dtype=tf.float32)
    hidden = tf.layers.dense(tf.concat([final_state, target_emb], axis=1), 16, activation=tf.nn.relu,
                             kernel_initializer=tf.glorot_uniform_initializer(seed=64))
    logits = tf.squeeze(tf.layers.dense(hidden, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=65)), 1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss)
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    feed = {history: history_v, lengths: lengths_v, target: target_v, label: label_v}
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(STEPS):
            losses.append(float(sess.run([loss, train_op], feed)[0]))
    variables = sorted("%s %s" % (v.op.name, v.shape.as_list()) for v in tf.trainable_variables())
    print(json.dumps({"losses": losses, "variables": variables}))


if __name__ == "__main__":
    main(*sys.argv[1:])
