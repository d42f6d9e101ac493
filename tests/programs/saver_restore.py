"""TF 1.15 checkpoints: train, tf.train.Saver.save, rebuild the graph, restore, resume.

    python saver_restore.py WORK_DIR [FROM_DIR]

Trains a small regression with Adam, saves a checkpoint into WORK_DIR/ckpt, then keeps training
(the reference continuation). A second, freshly built graph restores the latest checkpoint (of
FROM_DIR/ckpt when given, e.g. one another TensorFlow wrote) and trains on: every variable, the
Adam slots and beta powers included, must equal what the checkpoint holds (and, restoring its
own, what was saved), and the resumed losses then equal the reference continuation. Prints one
JSON line.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

BEFORE_SAVE = 15
AFTER_SAVE = 10


def make_data(rng, rows=256):
    x = rng.uniform(-1, 1, size=(rows, 4)).astype(np.float32)
    y = (np.sin(2 * x[:, :1]) + x[:, 1:2] * x[:, 2:3] - 0.5 * x[:, 3:4]).astype(np.float32)
    return x, y


def build():
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    with tf.variable_scope("regressor"):
        w1 = tf.get_variable("w1", [4, 32], initializer=tf.glorot_normal_initializer(seed=21))
        b1 = tf.get_variable("b1", [32], initializer=tf.zeros_initializer())
        w2 = tf.get_variable("w2", [32, 1], initializer=tf.glorot_normal_initializer(seed=22))
    prediction = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2)
    loss = tf.losses.mean_squared_error(y, prediction)
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
    return x, y, loss, train_op


def train(sess, graph, data, steps):
    x, y, loss, train_op = graph
    losses = []
    for _ in range(steps):
        value, _ = sess.run([loss, train_op], {x: data[0], y: data[1]})
        losses.append(float(value))
    return losses


def snapshot(sess):
    variables = tf.global_variables()
    return dict(zip([v.op.name for v in variables], sess.run(variables)))


def main(work_dir, from_dir=None):
    data = make_data(np.random.RandomState(3))
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    prefix = os.path.join(work_dir, "ckpt", "model")

    with tf.Graph().as_default():
        tf.set_random_seed(20)
        graph = build()
        saver = tf.train.Saver(max_to_keep=2)
        with tf.Session(config=config) as sess:
            sess.run(tf.global_variables_initializer())
            losses = train(sess, graph, data, BEFORE_SAVE)
            saved_path = saver.save(sess, prefix, global_step=tf.train.get_global_step())
            saved = snapshot(sess)
            continued = train(sess, graph, data, AFTER_SAVE)

    with tf.Graph().as_default():
        graph = build()
        saver = tf.train.Saver()
        with tf.Session(config=config) as sess:
            latest = tf.train.latest_checkpoint(os.path.join(from_dir or work_dir, "ckpt"))
            saver.restore(sess, latest)
            restored = snapshot(sess)
            resumed = train(sess, graph, data, AFTER_SAVE)

    reader = tf.train.load_checkpoint(latest)
    stored = sorted(reader.get_variable_to_shape_map())
    equal_to_file = sorted(restored) == stored and all(
        np.array_equal(reader.get_tensor(name), value) for name, value in restored.items())
    equal_to_saved = from_dir is not None or (sorted(saved) == sorted(restored) and all(
        np.array_equal(saved[name], restored[name]) for name in saved))
    print(json.dumps({
        "losses": losses + continued,
        "resumed_losses": resumed,
        "checkpoint": os.path.basename(latest),
        "saved_is_latest": from_dir is not None or saved_path == latest,
        "checkpoint_variables": stored,
        "restored_equal": equal_to_file and equal_to_saved,
        "resumed_equal": resumed == continued if from_dir is None else None,
    }))


if __name__ == "__main__":
    main(*sys.argv[1:])
