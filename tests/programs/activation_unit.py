"""DIN's attention as TF 1.15 programs write it: the ad's embedding tiled over the behaviour sequence, the activation
unit's concat [q, k, q - k, q * k] into an 80-40-1 sigmoid MLP (tf.layers.dense), a masked softmax, the weighted sum
of the sequence, then a small MLP to a click logit; one Adam, gradients clipped by norm as DIN's code clips them.

    python activation_unit.py WORK_DIR

Batches and sequence lengths vary, so the graph knows neither. Prints one JSON line: the losses, the trained
variables' names and shapes, and whether a step computes the concat (the 1.x API's wheel computes the layer by its
pieces, pair_dense_linear).
"""
import json
import sys

import numpy as np
import tensorflow as tf

ITEMS, DIM, BATCHES, STEPS = 300, 12, ((64, 9), (48, 14), (64, 11)), 24


def make_batches(rng):
    batches = []
    for step in range(STEPS):
        batch, length = BATCHES[step % len(BATCHES)]
        history = rng.randint(1, ITEMS, size=(batch, length)).astype(np.int64)
        lengths = rng.randint(1, length + 1, size=batch)
        history[np.arange(length)[None, :] >= lengths[:, None]] = 0
        ad = rng.randint(1, ITEMS, size=batch).astype(np.int64)
        clicked = (np.isin(ad[:, None] % 7, history % 7).any(axis=1)).astype(np.float32)
        batches.append((ad, history, lengths, clicked))
    return batches


def attention(query, keys, mask):
    queries = tf.reshape(tf.tile(query, [1, tf.shape(keys)[1]]), tf.shape(keys))
    din_all = tf.concat([queries, keys, queries - keys, queries * keys], axis=-1)
    hidden = tf.layers.dense(din_all, 80, activation=tf.nn.sigmoid, name="f1_att",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=61))
    hidden = tf.layers.dense(hidden, 40, activation=tf.nn.sigmoid, name="f2_att",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=62))
    scores = tf.layers.dense(hidden, 1, name="f3_att", kernel_initializer=tf.glorot_uniform_initializer(seed=63))
    scores = tf.reshape(scores, [-1, 1, tf.shape(keys)[1]])
    scores = tf.where(tf.expand_dims(mask, 1), scores, tf.ones_like(scores) * (-2 ** 32 + 1))
    return tf.reduce_sum(tf.matmul(tf.nn.softmax(scores), keys), 1), din_all


def main(work_dir):
    batches = make_batches(np.random.RandomState(6))
    tf.set_random_seed(60)
    ad = tf.placeholder(tf.int64, [None], name="ad")
    history = tf.placeholder(tf.int64, [None, None], name="history")
    lengths = tf.placeholder(tf.int32, [None], name="lengths")
    clicked = tf.placeholder(tf.float32, [None], name="clicked")
    items = tf.get_variable("items", [ITEMS, DIM], initializer=tf.truncated_normal_initializer(stddev=0.3, seed=64))
    query, keys = tf.nn.embedding_lookup(items, ad), tf.nn.embedding_lookup(items, history)
    interest, din_all = attention(query, keys, tf.sequence_mask(lengths, tf.shape(history)[1]))
    net = tf.layers.dense(tf.concat([query, interest, query * interest], 1), 24, activation=tf.nn.relu,
                          kernel_initializer=tf.glorot_uniform_initializer(seed=65))
    logit = tf.squeeze(tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=66)), 1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=clicked, logits=logit))
    optimizer = tf.train.AdamOptimizer(0.01)
    gradients = [(tf.clip_by_norm(grad, 5.0), var) for grad, var in optimizer.compute_gradients(loss)]
    train_op = optimizer.apply_gradients(gradients)

    runs, stack = set(), [loss.op, train_op]
    while stack:
        op = stack.pop()
        for above in [value.op for value in op.inputs] + list(op.control_inputs):
            if above not in runs:
                runs.add(above)
                stack.append(above)
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for batch_ad, batch_history, batch_lengths, batch_clicked in batches:
            value, _ = sess.run([loss, train_op], {ad: batch_ad, history: batch_history, lengths: batch_lengths,
                                                   clicked: batch_clicked})
            losses.append(float(value))
    print(json.dumps({"losses": losses, "concat_computed": din_all.op in runs,
                      "variables": sorted([v.op.name, v.shape.as_list()] for v in tf.trainable_variables())}))


if __name__ == "__main__":
    main(*sys.argv[1:])
