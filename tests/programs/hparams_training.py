"""Hyper-parameters the TF 1.x research way: tf.contrib.training.HParams, overridden from a string, driving training.

    python hparams_training.py WORK_DIR

Defaults in HParams, overridden by parse() as a --hparams flag would be, then the model (a tf.contrib.layers MLP on
synthetic data, tf.contrib.metrics.streaming_auc, tf.contrib.lookup for a vocabulary) trained with them. Prints one
JSON line: the losses, the AUC, and what HParams answers and raises for the usual calls (values, JSON, repr, bad
types, unknown names), for comparison with TF 1.15.5's.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf


def defaults():
    return tf.contrib.training.HParams(learning_rate=0.01, hidden=[16, 8], activation="relu", use_dropout=False,
                                       steps=10, batch_size=32, vocabulary=["a", "b", "c"])


def behaviours():
    """What HParams returns or raises, call by call."""
    calls = [
        ("parse", lambda h: h.parse("learning_rate=0.05,hidden=[12,6],use_dropout=true,steps=20").values()),
        ("parse_int_as_float", lambda h: h.parse("learning_rate=1").learning_rate),
        ("parse_float_as_int", lambda h: h.parse("steps=1.5")),
        ("parse_unknown", lambda h: h.parse("nope=1")),
        ("parse_index", lambda h: h.parse("hidden[1]=3")),
        ("parse_bool_word", lambda h: h.parse("use_dropout=False").use_dropout),
        ("parse_list_into_scalar", lambda h: h.parse("steps=[1,2]")),
        ("set_bool_from_int", lambda h: h.set_hparam("use_dropout", 1)),
        ("set_float_from_int", lambda h: (h.set_hparam("learning_rate", 2), h.learning_rate)[1]),
        ("add_existing", lambda h: h.add_hparam("steps", 3)),
        ("add_new", lambda h: (h.add_hparam("momentum", 0.9), h.values()["momentum"])[1]),
        ("del", lambda h: (h.del_hparam("steps"), "steps" in h)[1]),
        ("json", lambda h: h.to_json(sort_keys=True)),
        ("parse_json", lambda h: h.parse_json('{"steps": 7, "hidden": [1]}').values()),
        ("override", lambda h: h.override_from_dict({"batch_size": 64}).batch_size),
        ("get_default", lambda h: h.get("missing", "x")),
        ("get_bad_default", lambda h: h.get("steps", "x")),
        ("values_order", lambda h: list(h.values())),
        ("str", lambda h: str(h)),
        ("repr", lambda h: repr(h)),
    ]
    answers = {}
    for name, call in calls:
        try:
            answers[name] = ["ok", call(defaults())]
        except Exception as error:  # the kind of error is part of the behaviour compared
            answers[name] = [type(error).__name__, str(error)]
    return answers


def main(work_dir):
    hparams = defaults().parse("learning_rate=0.05,hidden=[12,6],steps=25")
    rng = np.random.RandomState(9)
    tf.set_random_seed(90)
    features = rng.normal(size=(512, 6)).astype(np.float32)
    words = np.array([hparams.vocabulary[i] for i in rng.randint(0, 3, 512)] + [], dtype=object)
    labels = ((features[:, 0] + (words == "b") > 0.3)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 6])
    word = tf.placeholder(tf.string, [None])
    y = tf.placeholder(tf.float32, [None])
    table = tf.contrib.lookup.index_table_from_tensor(tf.constant(hparams.vocabulary), num_oov_buckets=1)
    net = tf.concat([x, tf.one_hot(table.lookup(word), len(hparams.vocabulary) + 1)], axis=1)
    for i, width in enumerate(hparams.hidden):
        net = tf.contrib.layers.fully_connected(net, width, activation_fn=getattr(tf.nn, hparams.activation),
                                                weights_initializer=tf.glorot_uniform_initializer(seed=91 + i),
                                                scope="hidden%d" % i)
    logits = tf.squeeze(tf.contrib.layers.fully_connected(
        net, 1, activation_fn=None, weights_initializer=tf.glorot_uniform_initializer(seed=99), scope="logits"), 1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf.train.GradientDescentOptimizer(hparams.learning_rate * 10).minimize(loss)
    auc, auc_update = tf.contrib.metrics.streaming_auc(tf.sigmoid(logits), y)
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    losses = []
    with tf.Session(config=config) as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer(), tf.tables_initializer()])
        for step in range(hparams.steps):
            rows = slice((step * hparams.batch_size) % 480, (step * hparams.batch_size) % 480 + hparams.batch_size)
            value, _ = sess.run([loss, train_op], {x: features[rows], word: words[rows], y: labels[rows]})
            losses.append(float(value))
        sess.run(auc_update, {x: features, word: words, y: labels})
        result_auc = float(sess.run(auc))
        variables = sorted("%s %s" % (v.op.name, v.shape.as_list()) for v in tf.global_variables())
    with open(os.path.join(work_dir, "hparams.json"), "w") as out:
        out.write(hparams.to_json(sort_keys=True))
    print(json.dumps({"losses": losses, "auc": result_auc, "variables": variables, "behaviours": behaviours()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
