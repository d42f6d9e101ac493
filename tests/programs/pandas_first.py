"""A TF 1.x script that opens as most do: pandas and numpy, then tensorflow. It reads a CSV of ids and
labels with pandas, trains an embedding model with Adam and prints one JSON line: the losses."""
import json
import os
import sys

import numpy as np
import pandas as pd
import tensorflow as tf

work = sys.argv[1]
rng = np.random.RandomState(7)
path = os.path.join(work, "clicks.csv")
pd.DataFrame({"user": rng.randint(0, 500, 2048), "item": rng.randint(0, 300, 2048),
              "label": rng.randint(0, 2, 2048)}).to_csv(path, index=False)
frame = pd.read_csv(path)

tf.set_random_seed(7)
user = tf.placeholder(tf.int64, [None])
item = tf.placeholder(tf.int64, [None])
label = tf.placeholder(tf.float32, [None])
users = tf.get_variable("users", [500, 8], initializer=tf.random_normal_initializer(0.0, 0.1, seed=1))
items = tf.get_variable("items", [300, 8], initializer=tf.random_normal_initializer(0.0, 0.1, seed=2))
logits = tf.reduce_sum(tf.nn.embedding_lookup(users, user) * tf.nn.embedding_lookup(items, item), axis=1)
loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
train = tf.train.AdamOptimizer(0.05).minimize(loss)

config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
losses = []
with tf.Session(config=config) as session:
    session.run(tf.global_variables_initializer())
    for step in range(20):
        batch = frame.iloc[(step * 256) % 2048:(step * 256) % 2048 + 256]
        feed = {user: batch["user"].values, item: batch["item"].values, label: batch["label"].values}
        losses.append(float(session.run([train, loss], feed)[1]))
print(json.dumps({"losses": losses, "pandas": pd.__version__}))
