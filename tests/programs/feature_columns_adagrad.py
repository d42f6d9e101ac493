"""A TF 1.15 model over tf.feature_column: numeric, bucketized, hashed + embedding, crossed, vocabulary.

    python feature_columns_adagrad.py WORK_DIR

Features come from tf.data (make_initializable_iterator over placeholders, fed at initialization), go through
tf.feature_column.input_layer into tf.layers.dense, and train with Adagrad. Prints one JSON line:
the loss after every step and the streaming AUC (tf.metrics.auc) over the data afterwards.
"""
import json
import sys

import numpy as np
import tensorflow as tf

STEPS = 40
BATCH = 64
CITIES = ["city%d" % i for i in range(40)]
DEVICES = ["phone", "tablet", "desktop"]


def make_data(rng, rows=1024):
    age = rng.uniform(18, 80, size=rows).astype(np.float32)
    income = rng.lognormal(3.0, 0.5, size=rows).astype(np.float32)
    city = rng.randint(len(CITIES), size=rows)
    device = rng.randint(len(DEVICES), size=rows)
    city_effect = np.sin(np.arange(len(CITIES)))[city]
    score = 0.04 * (age - 45) + 0.8 * city_effect + 0.5 * (device == 0) - 0.01 * (income - 20)
    label = (score + 0.3 * rng.normal(size=rows) > 0).astype(np.float32)
    features = {
        "age": age.reshape(-1, 1),
        "income": income.reshape(-1, 1),
        "city": np.array([CITIES[i] for i in city]).reshape(-1, 1),
        "device": np.array([DEVICES[i] for i in device]).reshape(-1, 1),
    }
    return features, label.reshape(-1, 1)


def columns():
    age = tf.feature_column.numeric_column("age", normalizer_fn=lambda x: (x - 45.0) / 20.0)
    income = tf.feature_column.numeric_column("income", normalizer_fn=lambda x: tf.log1p(x))
    age_buckets = tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("age"), boundaries=[25.0, 35.0, 45.0, 55.0, 65.0])
    city = tf.feature_column.categorical_column_with_hash_bucket("city", hash_bucket_size=100)
    device = tf.feature_column.categorical_column_with_vocabulary_list("device", DEVICES)
    age_x_device = tf.feature_column.crossed_column([age_buckets, "device"], hash_bucket_size=30)
    return [
        age,
        income,
        age_buckets,
        tf.feature_column.embedding_column(
            city, dimension=6, initializer=tf.truncated_normal_initializer(stddev=0.1, seed=3)),
        tf.feature_column.indicator_column(device),
        tf.feature_column.embedding_column(
            age_x_device, dimension=4, initializer=tf.truncated_normal_initializer(stddev=0.1, seed=4)),
    ]


def build(features, label):
    net = tf.feature_column.input_layer(features, columns())
    net = tf.layers.dense(net, 16, activation=tf.nn.relu,
                          kernel_initializer=tf.glorot_uniform_initializer(seed=5))
    logits = tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=6))
    loss = tf.losses.sigmoid_cross_entropy(label, logits)
    train_op = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
    auc, auc_update = tf.metrics.auc(label, tf.sigmoid(logits), num_thresholds=200)
    return dict(loss=loss, train_op=train_op, auc=auc, auc_update=auc_update)


def with_sizes(feed, batch_size, batch, epochs, count):
    feed = dict(feed)
    feed[batch_size] = batch
    feed[epochs] = count
    return feed


def main(work_dir):
    rng = np.random.RandomState(1)
    data, labels = make_data(rng)
    tf.set_random_seed(7)
    # The classic 1.x pattern: a dataset over placeholders, fed once per (re)initialization.
    feature_inputs = {name: tf.placeholder(tf.as_dtype(value.dtype) if value.dtype.kind != "U" else tf.string,
                                           [None, 1], name=name)
                      for name, value in data.items()}
    label_input = tf.placeholder(tf.float32, [None, 1], name="label")
    batch_size = tf.placeholder(tf.int64, [], name="batch_size")
    epochs = tf.placeholder(tf.int64, [], name="epochs")
    dataset = tf.data.Dataset.from_tensor_slices((feature_inputs, label_input)).repeat(epochs).batch(batch_size)
    iterator = dataset.make_initializable_iterator()
    features, label = iterator.get_next()
    model = build(features, label)
    feed = {feature_inputs[name]: value for name, value in data.items()}
    feed[label_input] = labels
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    losses = []
    with tf.Session(config=config) as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer(), tf.tables_initializer()])
        sess.run(iterator.initializer, with_sizes(feed, batch_size, BATCH, epochs, -1))
        for _ in range(STEPS):
            loss, _ = sess.run([model["loss"], model["train_op"]])
            losses.append(float(loss))
        sess.run(iterator.initializer, with_sizes(feed, batch_size, 256, epochs, 1))
        while True:
            try:
                sess.run(model["auc_update"])
            except tf.errors.OutOfRangeError:
                break
        auc = sess.run(model["auc"])
        trainable = sorted(v.name for v in tf.trainable_variables())
    print(json.dumps({"losses": losses, "auc": float(auc), "trainable_variables": trainable}))


if __name__ == "__main__":
    main(sys.argv[1])
