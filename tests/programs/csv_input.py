"""A TF 1.15 input pipeline over CSV files: TextLineDataset, tf.decode_csv, a reinitializable iterator.

    python csv_input.py WORK_DIR

Writes train.csv and eval.csv (a header, the label, three numbers and two strings per line) into
WORK_DIR, trains an Adam model for a few epochs through tf.data.Iterator.from_structure, then
evaluates with tf.metrics.auc and tf.metrics.accuracy. Prints one JSON line: the loss after every
step, the steps per epoch, the AUC and accuracy.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

COLUMNS = ["label", "x1", "x2", "x3", "colour", "shape"]
DEFAULTS = [[0.0], [0.0], [0.0], [0.0], [""], [""]]
COLOURS = ["red", "green", "blue", "black"]
SHAPES = ["circle", "square", "triangle"]
EPOCHS = 3
BATCH = 32


def write_csv(path, rng, rows):
    x = rng.normal(size=(rows, 3))
    colour = rng.randint(len(COLOURS), size=rows)
    shape = rng.randint(len(SHAPES), size=rows)
    score = x[:, 0] - 0.5 * x[:, 1] + 0.8 * (colour == 2) - 0.6 * (shape == 1) + 0.3 * rng.normal(size=rows)
    with open(path, "w") as out:
        out.write(",".join(COLUMNS) + "\n")
        for i in range(rows):
            # An empty field now and then: decode_csv fills in the column's default.
            x3 = "" if i % 17 == 0 else "%.5f" % x[i, 2]
            out.write("%d,%.5f,%.5f,%s,%s,%s\n" % (score[i] > 0, x[i, 0], x[i, 1], x3, COLOURS[colour[i]],
                                                    SHAPES[shape[i]]))


def dataset(path, batch):
    def parse(line):
        fields = tf.decode_csv(line, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, fields))
        label = tf.reshape(features.pop("label"), [-1, 1])
        return features, label

    return tf.data.TextLineDataset(path).skip(1).batch(batch).map(parse)


def feature_columns():
    numeric = [tf.feature_column.numeric_column(name) for name in ("x1", "x2", "x3")]
    colour = tf.feature_column.categorical_column_with_vocabulary_list("colour", COLOURS)
    shape = tf.feature_column.categorical_column_with_hash_bucket("shape", hash_bucket_size=10)
    return numeric + [tf.feature_column.indicator_column(colour), tf.feature_column.indicator_column(shape)]


def main(work_dir):
    rng = np.random.RandomState(2)
    train_path = os.path.join(work_dir, "train.csv")
    eval_path = os.path.join(work_dir, "eval.csv")
    write_csv(train_path, rng, 320)
    write_csv(eval_path, rng, 200)
    tf.set_random_seed(11)

    train_data = dataset(train_path, BATCH)
    eval_data = dataset(eval_path, 64)
    iterator = tf.data.Iterator.from_structure(train_data.output_types, train_data.output_shapes)
    train_init = iterator.make_initializer(train_data)
    eval_init = iterator.make_initializer(eval_data)
    features, label = iterator.get_next()

    net = tf.feature_column.input_layer(features, feature_columns())
    net = tf.layers.dense(net, 8, activation=tf.nn.tanh, kernel_initializer=tf.glorot_uniform_initializer(seed=12))
    logits = tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=13))
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
    train_op = tf.train.AdamOptimizer(0.02).minimize(loss)
    probability = tf.sigmoid(logits)
    auc, auc_update = tf.metrics.auc(label, probability)
    accuracy, accuracy_update = tf.metrics.accuracy(label, tf.round(probability))

    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    losses, steps_per_epoch = [], []
    with tf.Session(config=config) as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer(), tf.tables_initializer()])
        for _ in range(EPOCHS):
            sess.run(train_init)
            steps = 0
            while True:
                try:
                    value, _ = sess.run([loss, train_op])
                except tf.errors.OutOfRangeError:
                    break
                losses.append(float(value))
                steps += 1
            steps_per_epoch.append(steps)
        sess.run(eval_init)
        while True:
            try:
                sess.run([auc_update, accuracy_update])
            except tf.errors.OutOfRangeError:
                break
        final_auc, final_accuracy = sess.run([auc, accuracy])
    print(json.dumps({"losses": losses, "steps_per_epoch": steps_per_epoch, "auc": float(final_auc),
                      "accuracy": float(final_accuracy)}))


if __name__ == "__main__":
    main(sys.argv[1])
