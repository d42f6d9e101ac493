"""TF 1.15 summaries: tf.summary.scalar / histogram, merge_all, FileWriter, read back.

    python summaries.py WORK_DIR

Trains a linear model with Adagrad, writing the merged summary every step to WORK_DIR/logs, then
reads the event files back with tf.train.summary_iterator. Prints one JSON line: the losses, how
many scalar values were read per tag, the histogram count, whether the graph was written, and
whether the logged losses equal the fetched ones.
"""
import glob
import json
import os
import sys

import numpy as np
import tensorflow as tf

STEPS = 25


def main(work_dir):
    rng = np.random.RandomState(4)
    data_x = rng.normal(size=(128, 5)).astype(np.float32)
    data_y = (data_x.dot(rng.normal(size=(5, 1))) + 0.1 * rng.normal(size=(128, 1))).astype(np.float32)
    tf.set_random_seed(30)

    x = tf.placeholder(tf.float32, [None, 5])
    y = tf.placeholder(tf.float32, [None, 1])
    weights = tf.Variable(tf.random_normal([5, 1], stddev=0.1, seed=31), name="weights")
    bias = tf.Variable(0.0, name="bias")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) + bias - y))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdagradOptimizer(0.5).minimize(loss, global_step=global_step)
    tf.summary.scalar("loss", loss)
    tf.summary.scalar("bias_value", bias)
    tf.summary.histogram("weights", weights)
    merged = tf.summary.merge_all()

    log_dir = os.path.join(work_dir, "logs")
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    losses = []
    with tf.Session(config=config) as sess:
        writer = tf.summary.FileWriter(log_dir, sess.graph)
        sess.run(tf.global_variables_initializer())
        for _ in range(STEPS):
            summary, value, step = sess.run([merged, loss, global_step], {x: data_x, y: data_y})
            sess.run(train_op, {x: data_x, y: data_y})
            writer.add_summary(summary, step)
            losses.append(float(value))
        writer.close()

    scalars, histograms, graphs, logged = {}, 0, 0, {}
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
        for event in tf.train.summary_iterator(path):
            if event.graph_def:
                graphs += 1
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars[value.tag] = scalars.get(value.tag, 0) + 1
                    if value.tag == "loss":
                        logged[event.step] = value.simple_value
                elif value.HasField("histo"):
                    histograms += 1
    print(json.dumps({
        "losses": losses,
        "summary_events": sum(scalars.values()),
        "scalars": scalars,
        "histograms": histograms,
        "graph_written": graphs == 1,
        "logged_losses_match": [logged.get(step) for step in range(STEPS)]
        == [float(np.float32(v)) for v in losses],
    }))


if __name__ == "__main__":
    main(sys.argv[1])
