"""A TF 1.15 model with batch normalization after its dense layers (public DeepFM, DLRM and DSSM code), trained with
placeholders, then exported for a server.

    python batch_norm_exports.py WORK_DIR

Six numeric features through two tf.layers.dense layers (no bias), each followed by tf.layers.batch_normalization whose
`training` is a placeholder that defaults to False (the batch's moments while training, the moving averages when
served), to a click probability; the moving averages' update ops run with each step; tf.train.AdamOptimizer. On
the wheel the moments, the normalization and their gradients are retf's kernels (batch_moments). After 20 steps,
from the training session itself:
- simple/: tf.saved_model.simple_save of the whole training graph (both branches of the batch normalization);
- frozen/: graph_util.convert_variables_to_constants, written with tf.gfile as frozen.pb;
- model.meta: tf.train.export_meta_graph (the training graph, for resuming).
Each served folder gets request.json (the inputs, and the probabilities the session computed for them).
Prints one JSON line: the losses, the moving averages, the folders, the meta graph and the training graph's op types.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

FEATURES = 6


def data(rng, count):
    x = rng.normal(2.0, 3.0, (count, FEATURES)).astype(np.float32)
    label = ((x[:, 0] * x[:, 1] - x[:, 2] + 0.5 * x[:, 3]) > 1.0).astype(np.float32)
    return x, label


def request(folder, inputs, predictions, **extra):
    with open(os.path.join(folder, "request.json"), "w") as out:
        json.dump(dict(extra, inputs=inputs, predictions={"probability": [float(v) for v in predictions]}), out)


def main(work_dir):
    tf.logging.set_verbosity(tf.logging.ERROR)
    rng = np.random.RandomState(5)
    tf.set_random_seed(50)
    x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
    label = tf.placeholder(tf.float32, [None], name="label")
    training = tf.placeholder_with_default(False, [], name="training")
    net = x
    for index, units in enumerate([16, 8]):
        # no bias before the normalization, which takes out its gradient: what is left of that gradient is float
        # noise, which Adam scales up to steps of its learning rate, so the bias and the moving mean would follow it
        net = tf.layers.dense(net, units, use_bias=False, name="dense_%d" % index,
                              kernel_initializer=tf.glorot_uniform_initializer(seed=51 + index))
        net = tf.nn.relu(tf.layers.batch_normalization(net, training=training, name="bn_%d" % index))
    logits = tf.reshape(tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=53)), [-1])
    probability = tf.sigmoid(logits, name="probability")
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=tf.train.get_or_create_global_step())

    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    served_x, _ = data(np.random.RandomState(6), 16)
    inputs = {"x": {"floats": served_x.tolist()}}
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(20):
            features, labels = data(rng, 64)
            value, _ = sess.run([loss, train_op], {x: features, label: labels, training: True})
            losses.append(float(value))
        predictions = sess.run(probability, {x: served_x})
        averages = {variable.op.name: sess.run(variable).tolist() for variable in tf.global_variables()
                    if "moving_" in variable.op.name}

        simple = os.path.join(work_dir, "simple")
        tf.saved_model.simple_save(sess, os.path.join(simple, "saved_model"), {"x": x}, {"probability": probability})
        request(simple, inputs, predictions, signature="serving_default")

        frozen = os.path.join(work_dir, "frozen")
        tf.gfile.MakeDirs(frozen)
        frozen_graph = tf.graph_util.convert_variables_to_constants(sess, sess.graph_def, ["probability"])
        with tf.gfile.GFile(os.path.join(frozen, "frozen.pb"), "wb") as out:
            out.write(frozen_graph.SerializeToString())
        request(frozen, {}, predictions, feeds={"x:0": inputs["x"]}, fetches={"probability": "probability:0"})

        tf.train.export_meta_graph(filename=os.path.join(work_dir, "model.meta"))
        ops = sorted(set(node.op for node in sess.graph_def.node))
    print(json.dumps({"losses": losses, "moving_averages": averages, "served": [simple, frozen], "ops": ops,
                      "meta": os.path.join(work_dir, "model.meta")}))


if __name__ == "__main__":
    main(*sys.argv[1:])
