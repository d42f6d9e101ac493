"""A TF 1.15 model with a self-attention block over a behaviour sequence (as public BST code writes it: ReLU
projections split into heads, scores masked by the lengths, softmax, a weighted sum, an add & norm), trained with
placeholders, then exported for a server.

    python attention_exports.py WORK_DIR

A user's recent prices, 1-10 of them, embedded 16-wide, go through two heads of attention (tf.matmul of the
queries by the keys' transpose, then of the probabilities by the values), added to the steps and normalized over
the last axis (tf.contrib.layers.layer_norm, as BERT's code calls it); the mean of the attended steps and the
current price through tf.layers.dense to a click probability; tf.train.AdamOptimizer. On the wheel the products
and their gradients run retf's BatchMatMulV2 kernel (small_batch_matmul: the nodes carry its kernel label), and the
layer normalization retf's kernels (layer_norm_kernels).
After 20 steps, from the training session itself:
- simple/: tf.saved_model.simple_save of the whole training graph;
- frozen/: graph_util.convert_variables_to_constants, written with tf.gfile as frozen.pb.
Each served folder gets request.json (the inputs, and the probabilities the session computed for them).
Prints one JSON line: the losses, the folders, the kernel label of each BatchMatMulV2 of the training graph, and
its ops of retf's layer normalization.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

LONGEST = 10
WIDTH = 16
HEADS = 2


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
    init = [tf.glorot_uniform_initializer(seed=s) for s in range(51, 58)]
    steps = tf.layers.dense(tf.expand_dims(history / 10.0, 2), WIDTH, tf.nn.relu, kernel_initializer=init[0])
    query, key, value = (tf.layers.dense(steps, WIDTH, tf.nn.relu, kernel_initializer=init[1 + i], name=name)
                         for i, name in enumerate(("query", "key", "value")))
    query, key, value = (tf.concat(tf.split(t, HEADS, axis=-1), axis=0) for t in (query, key, value))
    mask = tf.tile(tf.sequence_mask(lengths, LONGEST), [HEADS, 1])
    scores = tf.matmul(query, key, transpose_b=True) / np.sqrt(WIDTH // HEADS)
    scores -= 1e9 * tf.cast(tf.logical_not(tf.expand_dims(mask, 1)), tf.float32)
    attended = tf.matmul(tf.nn.softmax(scores), value)
    attended = tf.concat(tf.split(attended, HEADS, axis=0), axis=2)
    attended = tf.contrib.layers.layer_norm(inputs=attended + steps, begin_norm_axis=-1, begin_params_axis=-1)
    weights = tf.cast(tf.expand_dims(tf.sequence_mask(lengths, LONGEST), 2), tf.float32)
    pooled = tf.reduce_sum(attended * weights, axis=1) / tf.cast(tf.expand_dims(lengths, 1), tf.float32)
    net = tf.concat([pooled, tf.expand_dims(price / 10.0, 1)], axis=1)
    net = tf.layers.dense(net, 8, tf.nn.relu, kernel_initializer=init[4])
    logits = tf.reshape(tf.layers.dense(net, 1, kernel_initializer=init[5]), [-1])
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
        labels = sorted(node.attr["_kernel"].s.decode() if "_kernel" in node.attr else ""
                        for node in sess.graph_def.node if node.op == "BatchMatMulV2")
        layer_kernels = sorted(node.op for node in sess.graph_def.node if node.op.startswith("Retf>Layer"))
    print(json.dumps({"losses": losses, "served": [simple, frozen], "labels": labels, "layer_kernels": layer_kernels}))


if __name__ == "__main__":
    main(*sys.argv[1:])
