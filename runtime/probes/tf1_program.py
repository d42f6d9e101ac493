"""A TensorFlow 1.15 program, unchanged: run by `verify` on wheels built with the 1.x API.

Graph building, tf.placeholder, feature columns, tf.layers, Adam, tf.metrics, tf.Session, tf.logging,
and the tf.contrib message; with a folder argument, tf.saved_model.simple_save of the training session into
FOLDER/saved_model. Prints one JSON line. Python 3.6+.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf.logging.set_verbosity(tf.logging.ERROR)
tf.set_random_seed(7)
rng = np.random.RandomState(7)
count = 256
age = rng.uniform(18, 80, count).astype(np.float32)
city = np.array(["c%d" % i for i in rng.randint(0, 50, count)])
label = ((age > 45) ^ (rng.uniform(size=count) < 0.1)).astype(np.float32)

features = {"age": tf.placeholder(tf.float32, [None]), "city": tf.placeholder(tf.string, [None])}
labels = tf.placeholder(tf.float32, [None])
columns = [
    tf.feature_column.numeric_column("age", normalizer_fn=lambda x: (x - 49.0) / 18.0),
    tf.feature_column.embedding_column(tf.feature_column.categorical_column_with_hash_bucket("city", 100), 4),
]
net = tf.feature_column.input_layer(features, columns)
net = tf.layers.dense(net, 8, activation=tf.nn.relu)
logits = tf.squeeze(tf.layers.dense(net, 1), axis=1)
loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
train = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=tf.train.get_or_create_global_step())
auc, auc_update = tf.metrics.auc(labels, tf.sigmoid(logits))

report = {"executing_eagerly": tf.executing_eagerly(), "version": tf.__version__}
feed = {features["age"]: age, features["city"]: city, labels: label}
with tf.Session() as session:
    session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    losses = [float(session.run(loss, feed))]
    for _ in range(30):
        session.run(train, feed)
    losses.append(float(session.run(loss, feed)))
    session.run(auc_update, feed)
    report.update(losses=losses, auc=float(session.run(auc)))
    if len(sys.argv) > 1:
        report["export"] = os.path.join(sys.argv[1], "saved_model")
        tf.saved_model.simple_save(session, report["export"], features, {"probability": tf.sigmoid(logits)})
try:
    _ = tf.contrib.gan  # not provided: says what replaced it
except AttributeError as error:
    report["contrib"] = str(error)[:60]
print(json.dumps(report))
