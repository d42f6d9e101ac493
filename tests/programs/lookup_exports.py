"""A TF 1.15 model whose embeddings are looked up in every form public code writes, trained, then exported for a
server.

    python lookup_exports.py WORK_DIR

Three id columns of one example each ([batch, 3] int64, -1 where a slot is empty; some rows empty altogether):
- `embedding_column` over `categorical_column_with_identity` (mean combiner, through safe_embedding_lookup_sparse,
  whose empty rows come out as zeros), and one over a `weighted_categorical_column` (sqrtn);
- `tf.nn.embedding_lookup_sparse` by hand over the ids and their weights (sum) and over the ids alone (mean), the
  second from a resource variable (use_resource=True);
then a dense layer to a click probability, tf.train.AdagradOptimizer. On the wheel with fused_embedding the lookups
are retf's op. After 10 steps, from the training session itself:
- simple/: tf.saved_model.simple_save (the ids and the weights in, the probability out);
- frozen/: graph_util.convert_variables_to_constants of the same model, its resource table a variable, as
  frozen.pb.
Each served folder gets request.json (the inputs, and the probabilities the session computed for them).
Prints one JSON line: the losses, the folders, and the forward graph's lookup op types.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

BUCKETS = 30
SLOTS = 3


def data(rng, count):
    ids = rng.randint(0, BUCKETS, (count, SLOTS)).astype(np.int64)
    ids[rng.rand(count, SLOTS) < 0.4] = -1
    ids[::5] = -1  # every fifth row has no id
    weights = np.where(ids >= 0, rng.uniform(0.5, 2.0, (count, SLOTS)), 0.0).astype(np.float32)  # 0: no weight
    label = (np.where(ids >= 0, ids % 3, 0).sum(axis=1) > 2).astype(np.float32)
    return ids, weights, label


def request(folder, inputs, predictions, **extra):
    with open(os.path.join(folder, "request.json"), "w") as out:
        json.dump(dict(extra, inputs=inputs, predictions={"probability": [float(v) for v in predictions]}), out)


def sparse(dense, weights):
    """The ids >= 0 of ``dense`` as a SparseTensor, and their weights as one."""
    where = tf.where(dense >= 0)
    shape = tf.shape(dense, out_type=tf.int64)
    return (tf.SparseTensor(where, tf.gather_nd(dense, where), shape),
            tf.SparseTensor(where, tf.gather_nd(weights, where), shape))


def model(ids, weights, resource):
    item = tf.feature_column.categorical_column_with_identity("item", BUCKETS)
    weighted = tf.feature_column.weighted_categorical_column(
        tf.feature_column.categorical_column_with_identity("tag", BUCKETS), "tag_weight")
    columns = [tf.feature_column.embedding_column(item, 4, initializer=tf.truncated_normal_initializer(seed=61)),
               tf.feature_column.embedding_column(weighted, 4, combiner="sqrtn",
                                                  initializer=tf.truncated_normal_initializer(seed=62))]
    parts = [tf.feature_column.input_layer({"item": ids, "tag": ids, "tag_weight": weights}, columns)]
    sp_ids, sp_weights = sparse(ids, weights)
    table = tf.get_variable("table", [BUCKETS, 4], initializer=tf.truncated_normal_initializer(seed=63))
    parts.append(tf.nn.embedding_lookup_sparse(table, sp_ids, sp_weights, combiner="sum"))
    shared = tf.get_variable("resource_table", [BUCKETS, 4], use_resource=resource,
                             initializer=tf.truncated_normal_initializer(seed=64))
    parts.append(tf.nn.embedding_lookup_sparse(shared, sp_ids, None, combiner="mean"))
    # embedding_lookup_sparse has a row per id up to the last non-empty one: padded to the batch, as code does
    rows = tf.shape(ids)[0]
    parts = [parts[0]] + [tf.pad(part, [[0, rows - tf.shape(part)[0]], [0, 0]]) for part in parts[1:]]
    net = tf.concat(parts, 1)
    logits = tf.reshape(tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=65)), [-1])
    return tf.sigmoid(logits, name="probability"), logits


def main(work_dir):
    tf.logging.set_verbosity(tf.logging.ERROR)
    rng = np.random.RandomState(7)
    tf.set_random_seed(70)
    ids = tf.placeholder(tf.int64, [None, SLOTS], name="ids")
    weights = tf.placeholder(tf.float32, [None, SLOTS], name="weights")
    label = tf.placeholder(tf.float32, [None], name="label")
    probability, logits = model(ids, weights, resource=True)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
    train_op = tf.train.AdagradOptimizer(0.5).minimize(loss)
    lookups = sorted(set(op.type for op in tf.get_default_graph().get_operations()
                         if "EmbeddingLookupSparse" in op.type and "Grad" not in op.type
                         or op.type.startswith(("SparseSegment", "SegmentSum"))))

    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    served_ids, served_weights, _ = data(np.random.RandomState(8), 16)
    served_ids[-1], served_weights[-1] = -1, 0.0  # the last row empty too: the lookups' rows stop before the batch's
    inputs = {"ids": {"ints": served_ids.tolist()}, "weights": {"floats": served_weights.tolist()}}
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(10):
            batch_ids, batch_weights, labels = data(rng, 64)
            value, _ = sess.run([loss, train_op], {ids: batch_ids, weights: batch_weights, label: labels})
            losses.append(float(value))
        feeds = {ids: served_ids, weights: served_weights}
        predictions = sess.run(probability, feeds)
        simple = os.path.join(work_dir, "simple")
        tf.saved_model.simple_save(sess, os.path.join(simple, "saved_model"), {"ids": ids, "weights": weights},
                                   {"probability": probability})
        request(simple, inputs, predictions, signature="serving_default")
        trained = {v.op.name: sess.run(v) for v in tf.global_variables()}

    # The frozen graph: the same model with its resource table a variable, every variable holding the trained values.
    with tf.Graph().as_default():
        ids = tf.placeholder(tf.int64, [None, SLOTS], name="ids")
        weights = tf.placeholder(tf.float32, [None, SLOTS], name="weights")
        probability, _ = model(ids, weights, resource=False)
        with tf.Session(config=config) as sess:
            sess.run([v.assign(trained[v.op.name]) for v in tf.global_variables()])
            predictions = sess.run(probability, {ids: served_ids, weights: served_weights})
            frozen = os.path.join(work_dir, "frozen")
            tf.gfile.MakeDirs(frozen)
            graph = tf.graph_util.convert_variables_to_constants(sess, sess.graph_def, ["probability"])
            with tf.gfile.GFile(os.path.join(frozen, "frozen.pb"), "wb") as out:
                out.write(graph.SerializeToString())
            request(frozen, {}, predictions, feeds={"ids:0": inputs["ids"], "weights:0": inputs["weights"]},
                    fetches={"probability": "probability:0"})
    print(json.dumps({"losses": losses, "served": [simple, frozen], "lookups": lookups}))


if __name__ == "__main__":
    main(*sys.argv[1:])
