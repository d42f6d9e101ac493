"""Train, save, rebuild, restore, resume: what the checkpoint round-trip programs share (TF 1.15 style).

A program's build() makes its model in the default graph and returns a dict with "loss" and
"train_op" (and optionally "step", a function of the session running one step and returning its loss,
and "report", a function of the session and WORK_DIR adding to the JSON line). The
model trains BEFORE steps, is saved into WORK_DIR/ckpt, and trains AFTER more (the reference
continuation). A second, freshly built graph restores the latest checkpoint of FROM_DIR/ckpt
(one another TensorFlow wrote) or of WORK_DIR/ckpt, checks every variable against the file, and
trains AFTER steps: the resumed losses.
"""
import json
import os

import numpy as np
import tensorflow as tf

BEFORE, AFTER = 15, 10


def session_config():
    return tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def train(sess, model, steps):
    if "step" in model:  # a step of the program's own
        return [float(model["step"](sess)) for _ in range(steps)]
    return [float(sess.run([model["loss"], model["train_op"]])[0]) for _ in range(steps)]


def initialize(sess):
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer(), tf.tables_initializer()])


def run(build, work_dir, from_dir=None, seed=20):
    """Print the JSON line: losses, resumed_losses, checkpoint_variables, resumed_equal, restored_equal, build's report."""
    report = {}
    with tf.Graph().as_default():
        tf.set_random_seed(seed)
        model = build()
        saver = tf.train.Saver()
        with tf.Session(config=session_config()) as sess:
            initialize(sess)
            losses = train(sess, model, BEFORE)
            saver.save(sess, os.path.join(work_dir, "ckpt", "model"), global_step=tf.train.get_or_create_global_step())
            continued = train(sess, model, AFTER)
            if "report" in model:
                report.update(model["report"](sess, work_dir))

    with tf.Graph().as_default():
        tf.set_random_seed(seed)
        model = build()
        saver = tf.train.Saver()
        with tf.Session(config=session_config()) as sess:
            initialize(sess)
            latest = tf.train.latest_checkpoint(os.path.join(from_dir or work_dir, "ckpt"))
            saver.restore(sess, latest)
            variables = tf.global_variables()
            restored = dict(zip([v.op.name for v in variables], sess.run(variables)))
            resumed = train(sess, model, AFTER)

    reader = tf.train.load_checkpoint(latest)
    stored = sorted(reader.get_variable_to_shape_map())
    report.update(
        losses=losses + continued,
        resumed_losses=resumed,
        checkpoint_variables=stored,
        resumed_equal=resumed == continued if from_dir is None else None,
        restored_equal=sorted(restored) == stored and all(
            np.array_equal(reader.get_tensor(name), value) for name, value in restored.items()),
    )
    print(json.dumps(report))
