"""TF 1.15 Adam on sparse gradients: embedding tables trained through tf.nn.embedding_lookup.

    python embedding_adam.py WORK_DIR [adam|lazyadam]

tf.train.AdamOptimizer applies a sparse (IndexedSlices) gradient densely: the moments of every
row decay each step, so rows absent from a batch keep moving. Each batch here draws ids from one
half of the table, alternating, so that difference shows in the losses. `lazyadam`
(tf.contrib.opt.LazyAdamOptimizer, TF 1.15 only) updates only the rows present, for comparison.
Prints one JSON line: the losses and how far a row moved while absent from the batches.
"""
import json
import sys

import numpy as np
import tensorflow as tf

ROWS = 64
DIM = 8
BATCH = 32
STEPS = 30


def make_batches(rng):
    target = rng.normal(size=(ROWS,)).astype(np.float32)
    batches = []
    for step in range(STEPS):
        low = 0 if step % 2 == 0 else ROWS // 2
        ids = rng.randint(low, low + ROWS // 2, size=(BATCH, 3)).astype(np.int64)
        batches.append((ids, target[ids].sum(axis=1, keepdims=True)))
    return batches


def optimizer(name):
    if name == "lazyadam":
        return tf.contrib.opt.LazyAdamOptimizer(0.05)
    return tf.train.AdamOptimizer(0.05)


def main(work_dir, name="adam"):
    batches = make_batches(np.random.RandomState(5))
    tf.set_random_seed(50)
    ids = tf.placeholder(tf.int64, [None, 3], name="ids")
    target = tf.placeholder(tf.float32, [None, 1], name="target")
    table = tf.get_variable("table", [ROWS, DIM], initializer=tf.random_uniform_initializer(-0.1, 0.1, seed=51))
    vectors = tf.nn.embedding_lookup(table, ids)
    prediction = tf.layers.dense(tf.reduce_sum(vectors, axis=1), 1,
                                 kernel_initializer=tf.glorot_uniform_initializer(seed=52))
    loss = tf.losses.mean_squared_error(target, prediction)
    train_op = optimizer(name).minimize(loss)

    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        # Row 0 is in the first batch's half only: watch it across a step that never sees it.
        before = after = None
        for step, (batch_ids, batch_target) in enumerate(batches):
            if step == 1:
                before = sess.run(table)[0]
            value, _ = sess.run([loss, train_op], {ids: batch_ids, target: batch_target})
            if step == 1:
                after = sess.run(table)[0]
            losses.append(float(value))
    print(json.dumps({"losses": losses, "absent_row_moved": float(np.abs(after - before).max())}))


if __name__ == "__main__":
    main(*sys.argv[1:])
