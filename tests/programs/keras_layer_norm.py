"""Keras's LayerNormalization as TF 1.15 programs use it: a transformer's add & norm over a behaviour sequence, as
public BST code writes it (tf.keras.layers.LayerNormalization(axis=2) in a tf.variable_scope), and a layer of the
Keras that TF 1.x-era libraries import (`from tensorflow.python.keras.layers import LayerNormalization`) over the
pooled vector, trained with Adam from op-seeded weights on one thread.

    python keras_layer_norm.py WORK_DIR

TF 1.15's Keras computes tf.nn.moments and tf.nn.batch_normalization; TF 2.x's Keras runs FusedBatchNormV3 over
the rows as the channels of one image, and the 1.x API's wheel builds TF 1.15's form (layer_norm_moments), in retf's
kernels (layer_norm_kernels). A TensorFlow without the legacy Keras copy (2.11) runs tf.keras's layer in its place.
Prints one JSON line: the losses, the variables, how many FusedBatchNorm, moments and retf's moments ops the graph has,
and whether the legacy copy ran.
"""
import json
import sys

import numpy as np
import tensorflow as tf

try:
    from tensorflow.python.keras.layers import LayerNormalization as LegacyLayerNormalization
    LEGACY = True
except ImportError:
    LegacyLayerNormalization, LEGACY = tf.keras.layers.LayerNormalization, False

BATCH, LONGEST, WIDTH, ITEMS, STEPS = 32, 6, 16, 40, 10


def model(history, labels):
    items = tf.get_variable("items", [ITEMS, WIDTH], initializer=tf.truncated_normal_initializer(stddev=0.5, seed=11))
    sequence = tf.nn.embedding_lookup(items, history)
    hidden = tf.layers.dense(sequence, WIDTH, activation=tf.nn.relu, name="feed_forward",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=12))
    with tf.variable_scope("add_and_norm"):
        normed = tf.keras.layers.LayerNormalization(axis=2)(tf.add(sequence, hidden))
    pooled = tf.layers.dense(tf.reduce_mean(normed, axis=1), 8, name="pool",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=13))
    pooled = LegacyLayerNormalization(axis=-1)(pooled)
    logits = tf.squeeze(tf.layers.dense(pooled, 1, name="logit", kernel_initializer=tf.glorot_uniform_initializer(
        seed=14)), 1)
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))


def main(work_dir):
    rng = np.random.RandomState(0)
    history_batches = rng.randint(0, ITEMS, (STEPS, BATCH, LONGEST))
    label_batches = (history_batches.sum(axis=2) % 2).astype(np.float32)
    with tf.Graph().as_default() as graph:
        tf.set_random_seed(1)
        history = tf.placeholder(tf.int64, [None, LONGEST])
        labels = tf.placeholder(tf.float32, [None])
        loss = model(history, labels)
        train = tf.train.AdamOptimizer(0.01).minimize(loss)
        types = [op.type for op in graph.get_operations()]
        config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
        with tf.Session(config=config) as session:
            session.run(tf.global_variables_initializer())
            losses = [float(session.run([loss, train], {history: h, labels: y})[0])
                      for h, y in zip(history_batches, label_batches)]
        print(json.dumps({"losses": losses, "legacy_copy": LEGACY,
                          "variables": sorted(v.name for v in tf.trainable_variables()),
                          "fused_ops": sum(t.startswith("FusedBatchNorm") for t in types),
                          "layer_kernels": types.count("Retf>LayerMoments"),
                          "moments": len({op.name.split("/moments/")[0] for op in graph.get_operations()
                                          if "/moments/" in op.name and "gradients" not in op.name})}))


if __name__ == "__main__":
    main(*sys.argv[1:])
