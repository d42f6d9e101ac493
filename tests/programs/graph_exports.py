"""A TF 1.15 model trained with placeholders, then exported the ways TF 1.x code ships a graph to a server.

    python graph_exports.py WORK_DIR

Feature columns (a hashed user id's embedding, a price), tf.layers.dense and tf.train.AdamOptimizer: on the
wheel the training step holds retf's fused sparse Adam and weight-gradient ops. After 20 steps, from the
training session itself:
- simple/: tf.saved_model.simple_save of the whole training graph;
- frozen/: graph_util.convert_variables_to_constants, written with tf.gfile as frozen.pb;
- model.meta: tf.train.export_meta_graph (the training graph, for resuming);
- raw.pb: sess.graph_def's bytes written directly, through no export API;
- frozen_2x/ (TF 2.x only): the frozen graph as TF 2.x's own function makes it, bypassing the 1.x API's.
Each served folder gets request.json (the inputs, and the probabilities the session computed for them).
Prints one JSON line: the losses, the folders and the op types of the training graph.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

USERS = ["u%d" % i for i in range(40)]


def data(rng, count):
    users = np.array([USERS[i] for i in rng.randint(0, len(USERS), count)], dtype=object)
    price = rng.uniform(0, 10, count).astype(np.float32)
    label = ((price > 5) ^ (np.array([int(u[1:]) % 3 == 0 for u in users]))).astype(np.float32)
    return users, price, label


def request(folder, inputs, predictions, **extra):
    with open(os.path.join(folder, "request.json"), "w") as out:
        json.dump(dict(extra, inputs=inputs, predictions={"probability": [float(v) for v in predictions]}), out)


def main(work_dir):
    tf.logging.set_verbosity(tf.logging.ERROR)
    rng = np.random.RandomState(3)
    tf.set_random_seed(30)
    user = tf.placeholder(tf.string, [None], name="user")
    price = tf.placeholder(tf.float32, [None], name="price")
    label = tf.placeholder(tf.float32, [None], name="label")
    columns = [tf.feature_column.embedding_column(tf.feature_column.categorical_column_with_hash_bucket("user", 50),
                                                  4, initializer=tf.truncated_normal_initializer(0.0, 0.1, seed=31)),
               tf.feature_column.numeric_column("price")]
    net = tf.feature_column.input_layer({"user": user, "price": price}, columns)
    net = tf.layers.dense(net, 8, tf.nn.relu, kernel_initializer=tf.glorot_uniform_initializer(seed=32))
    logits = tf.reshape(tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=33)), [-1])
    probability = tf.sigmoid(logits, name="probability")
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=tf.train.get_or_create_global_step())

    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    served_users, served_price, _ = data(np.random.RandomState(4), 16)
    inputs = {"user": {"strings": list(served_users)}, "price": {"floats": [float(p) for p in served_price]}}
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(20):
            users, prices, labels = data(rng, 64)
            value, _ = sess.run([loss, train_op], {user: users, price: prices, label: labels})
            losses.append(float(value))
        predictions = sess.run(probability, {user: served_users, price: served_price})

        simple = os.path.join(work_dir, "simple")
        tf.saved_model.simple_save(sess, os.path.join(simple, "saved_model"), {"user": user, "price": price},
                                   {"probability": probability})
        request(simple, inputs, predictions, signature="serving_default")

        frozen = os.path.join(work_dir, "frozen")
        tf.gfile.MakeDirs(frozen)
        frozen_graph = tf.graph_util.convert_variables_to_constants(sess, sess.graph_def, ["probability"])
        with tf.gfile.GFile(os.path.join(frozen, "frozen.pb"), "wb") as out:
            out.write(frozen_graph.SerializeToString())
        request(frozen, {}, predictions, feeds={"user:0": inputs["user"], "price:0": inputs["price"]},
                fetches={"probability": "probability:0"})

        report = {}
        from tensorflow.python.framework import convert_to_constants
        freeze_2x = getattr(convert_to_constants, "convert_variables_to_constants_from_session_graph", None)
        if freeze_2x is not None:  # TF 2.x
            folder = report["frozen_2x"] = os.path.join(work_dir, "frozen_2x")
            tf.gfile.MakeDirs(folder)
            with tf.gfile.GFile(os.path.join(folder, "frozen.pb"), "wb") as out:
                out.write(freeze_2x(sess, sess.graph_def, ["probability"]).SerializeToString())
            request(folder, {}, predictions, feeds={"user:0": inputs["user"], "price:0": inputs["price"]},
                    fetches={"probability": "probability:0"})

        tf.train.export_meta_graph(filename=os.path.join(work_dir, "model.meta"))
        with open(os.path.join(work_dir, "raw.pb"), "wb") as out:
            out.write(sess.graph_def.SerializeToString())
        ops = sorted(set(node.op for node in sess.graph_def.node))
    report.update(losses=losses, served=[simple, frozen], ops=ops, meta=os.path.join(work_dir, "model.meta"),
                  raw=os.path.join(work_dir, "raw.pb"))
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
