"""A TF 1.15 model with a recurrent layer (tf.nn.dynamic_rnn over a tf.nn.rnn_cell.GRUCell, DIEN's interest
extractor), trained with placeholders, then exported for a server.

    python gru_exports.py WORK_DIR

A user's recent prices, 1-6 of them, go through a 6-unit GRU (its sequence lengths given); its last state and
the current price through tf.layers.dense to a click probability; tf.train.AdamOptimizer. On the wheel both the
loop and its gradient are retf's kernels (fused_gru). After 20 steps, from the training session itself:
- simple/: tf.saved_model.simple_save of the whole training graph (the gradient's kernel in it);
- frozen/: graph_util.convert_variables_to_constants, written with tf.gfile as frozen.pb;
- model.meta: tf.train.export_meta_graph (the training graph, for resuming).
Then, in a graph of its own, a GRUCell's dynamic_rnn over an input of unknown depth, which TF 1.15 refuses.
Each served folder gets request.json (the inputs, and the probabilities the session computed for them).
Prints one JSON line: the losses, the folders, the meta graph, the op types of the training graph and the refusal.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

LONGEST = 6


def data(rng, count):
    lengths = rng.randint(1, LONGEST + 1, count).astype(np.int32)
    history = rng.uniform(0, 10, (count, LONGEST)).astype(np.float32)
    history[np.arange(LONGEST)[None, :] >= lengths[:, None]] = 0.0
    price = rng.uniform(0, 10, count).astype(np.float32)
    mean = history.sum(axis=1) / lengths
    label = (price < mean).astype(np.float32)
    return history, lengths, price, label


def request(folder, inputs, predictions, **extra):
    with open(os.path.join(folder, "request.json"), "w") as out:
        json.dump(dict(extra, inputs=inputs, predictions={"probability": [float(v) for v in predictions]}), out)


def main(work_dir):
    tf.logging.set_verbosity(tf.logging.ERROR)
    rng = np.random.RandomState(5)
    tf.set_random_seed(50)
    history = tf.placeholder(tf.float32, [None, LONGEST], name="history")
    lengths = tf.placeholder(tf.int32, [None], name="history_length")
    price = tf.placeholder(tf.float32, [None], name="price")
    label = tf.placeholder(tf.float32, [None], name="label")
    cell = tf.nn.rnn_cell.GRUCell(6, kernel_initializer=tf.glorot_uniform_initializer(seed=51))
    _, state = tf.nn.dynamic_rnn(cell, tf.expand_dims(history / 10.0, 2), sequence_length=lengths,
                                 dtype=tf.float32, scope="prices")
    net = tf.concat([state, tf.expand_dims(price / 10.0, 1)], axis=1)
    net = tf.layers.dense(net, 8, tf.nn.relu, kernel_initializer=tf.glorot_uniform_initializer(seed=52))
    logits = tf.reshape(tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=53)), [-1])
    probability = tf.sigmoid(logits, name="probability")
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=tf.train.get_or_create_global_step())

    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    served_history, served_lengths, served_price, _ = data(np.random.RandomState(6), 16)
    inputs = {"history": {"floats": served_history.tolist()}, "history_length": {"ints": served_lengths.tolist()},
              "price": {"floats": served_price.tolist()}}
    feeds = {history: served_history, lengths: served_lengths, price: served_price}
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(20):
            h, n, p, y = data(rng, 64)
            value, _ = sess.run([loss, train_op], {history: h, lengths: n, price: p, label: y})
            losses.append(float(value))
        predictions = sess.run(probability, feeds)

        simple = os.path.join(work_dir, "simple")
        tf.saved_model.simple_save(sess, os.path.join(simple, "saved_model"),
                                   {"history": history, "history_length": lengths, "price": price},
                                   {"probability": probability})
        request(simple, inputs, predictions, signature="serving_default")

        frozen = os.path.join(work_dir, "frozen")
        tf.gfile.MakeDirs(frozen)
        frozen_graph = tf.graph_util.convert_variables_to_constants(sess, sess.graph_def, ["probability"])
        with tf.gfile.GFile(os.path.join(frozen, "frozen.pb"), "wb") as out:
            out.write(frozen_graph.SerializeToString())
        request(frozen, {}, predictions, feeds={"history:0": inputs["history"],
                                                "history_length:0": inputs["history_length"],
                                                "price:0": inputs["price"]},
                fetches={"probability": "probability:0"})

        tf.train.export_meta_graph(filename=os.path.join(work_dir, "model.meta"))
        ops = sorted(set(node.op for node in sess.graph_def.node))
    with tf.Graph().as_default():  # an input of unknown depth: TF 1.15's own error, as its loop raises it
        try:
            tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2), tf.placeholder(tf.float32, [None, None, None]),
                              dtype=tf.float32)
            unknown_depth = "built"
        except ValueError as error:
            unknown_depth = "ValueError: " + str(error).split(",")[0]
    print(json.dumps({"losses": losses, "served": [simple, frozen], "ops": ops, "unknown_depth": unknown_depth,
                      "meta": os.path.join(work_dir, "model.meta")}))


if __name__ == "__main__":
    main(*sys.argv[1:])
