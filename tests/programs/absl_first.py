"""A TF 1.x training script that starts the way countless ones do: absl's app and flags, and six,
imported before tensorflow. Prints one JSON line: where absl and six came from, and the losses."""
import json

import numpy as np
import six
import tensorflow as tf
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 30, "training steps")
flags.DEFINE_float("learning_rate", 0.05, "Adam's learning rate")


def main(argv):
    del argv
    tf.set_random_seed(3)
    rng = np.random.RandomState(3)
    ids = tf.placeholder(tf.int64, [None, 4])
    labels = tf.placeholder(tf.float32, [None])
    table = tf.get_variable("table", [1000, 8], initializer=tf.random_normal_initializer(0.0, 0.1, seed=1))
    logits = tf.reduce_sum(tf.nn.embedding_lookup(table, ids), axis=[1, 2])
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    train = tf.train.AdamOptimizer(FLAGS.learning_rate).minimize(loss)
    batch = rng.randint(0, 1000, (256, 4))
    target = (batch.sum(axis=1) % 2).astype(np.float32)
    losses = []
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        for _ in six.moves.range(FLAGS.steps):
            losses.append(float(session.run([loss, train], {ids: batch, labels: target})[0]))
    import absl
    print(json.dumps({"absl": absl.__file__, "six": six.__file__, "six_version": six.__version__, "losses": losses}))


if __name__ == "__main__":
    app.run(main)
