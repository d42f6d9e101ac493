"""tf.contrib.data, tf.contrib.summary and tf.contrib.distribute as TF 1.15 programs used them.

    python contrib_pipelines.py WORK_DIR

- data: files read by tf.contrib.data.parallel_interleave, bad records dropped by ignore_errors,
  then map_and_batch; every batch collected.
- summary: a graph-mode tf.contrib.summary file writer recording a scalar and a histogram every
  step (always_record_summaries, all_summary_ops, initialize); the event file read back.
- distribute: an Estimator trained with tf.contrib.distribute.MirroredStrategy on the CPU.
Prints one JSON line.
"""
import glob
import json
import os
import sys

import numpy as np
import tensorflow as tf


def data(work_dir):
    for index in range(3):
        with open(os.path.join(work_dir, "part-%d.txt" % index), "w") as out:
            out.write("\n".join(["%d" % (10 * index + i) if i != 2 else "bad" for i in range(5)]) + "\n")
    files = tf.data.Dataset.list_files(os.path.join(work_dir, "part-*.txt"), shuffle=False)
    dataset = files.apply(tf.contrib.data.parallel_interleave(tf.data.TextLineDataset, cycle_length=2))
    dataset = dataset.map(lambda line: tf.strings.to_number(line, tf.float32))
    dataset = dataset.apply(tf.contrib.data.ignore_errors())
    dataset = dataset.apply(tf.contrib.data.map_and_batch(lambda x: x * 2.0, 4))
    batch = dataset.make_one_shot_iterator().get_next()
    batches = []
    with tf.Session() as sess:
        while True:
            try:
                batches.append(sess.run(batch).tolist())
            except tf.errors.OutOfRangeError:
                return batches


def summary(work_dir):
    logdir = os.path.join(work_dir, "logs")
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        value = tf.cast(step, tf.float32) * 0.5
        writer = tf.contrib.summary.create_file_writer(logdir, flush_millis=100)
        with writer.as_default(), tf.contrib.summary.always_record_summaries():
            tf.contrib.summary.scalar("half_step", value)
            tf.contrib.summary.histogram("values", tf.stack([value, value + 1.0]))
            increment = tf.assign_add(step, 1)
            flush = tf.contrib.summary.flush()
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                tf.contrib.summary.initialize(graph=tf.get_default_graph(), session=sess)
                for _ in range(3):
                    sess.run(tf.contrib.summary.all_summary_ops())
                    sess.run(increment)
                sess.run(flush)
    events = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.*"))):
        for event in tf.train.summary_iterator(path):
            for item in event.summary.value:
                kind = item.WhichOneof("value")
                number = item.simple_value if kind == "simple_value" else (
                    float(tf.make_ndarray(item.tensor)) if kind == "tensor" and item.tag == "half_step" else None)
                events.append([event.step, item.tag, number])
    return sorted(events, key=lambda e: (e[0], e[1]))  # one run writes both summaries, in either order


def distribute(work_dir):
    def input_fn():
        rng = np.random.RandomState(4)
        x = rng.uniform(-1, 1, (256, 3)).astype(np.float32)
        y = (x.sum(axis=1, keepdims=True) > 0).astype(np.float32)
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(32)

    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 1, kernel_initializer=tf.glorot_uniform_initializer(seed=91))
        loss = tf.losses.sigmoid_cross_entropy(labels, logits)
        train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    strategy = tf.contrib.distribute.MirroredStrategy(devices=["/cpu:0"])
    config = tf.estimator.RunConfig(model_dir=os.path.join(work_dir, "model"), train_distribute=strategy,
                                    tf_random_seed=90, log_step_count_steps=1000)
    estimator = tf.estimator.Estimator(model_fn, config=config)
    estimator.train(input_fn, steps=10)
    return {"strategy": type(strategy).__name__.replace("V1", ""), "global_step": int(estimator.get_variable_value("global_step")),
            "kernel": estimator.get_variable_value("dense/kernel").ravel().tolist()}


def main(work_dir):
    tf.logging.set_verbosity(tf.logging.ERROR)
    print(json.dumps({"batches": data(work_dir), "summary_events": summary(work_dir),
                      "distribute": distribute(work_dir)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
