"""What the Criteo models share: the CSV input and the feature columns (the loop is common.py's).

Written for TensorFlow 1.15 (`import tensorflow as tf` being the 1.x API), Python 3.6. A model
module supplies `logits(features)` and calls `main`. Each run prints one JSON line.
"""
import collections
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NUMERIC = ["I%d" % i for i in range(1, 14)]
CATEGORICAL = ["C%d" % i for i in range(1, 27)]
COLUMNS = ["label"] + NUMERIC + CATEGORICAL
DEFAULTS = [[0.0]] + [[0.0]] * len(NUMERIC) + [[""]] * len(CATEGORICAL)
# Hash buckets per categorical column, sized like the columns' cardinalities (make_criteo_data.py):
# the biggest embedding table holds a million rows (and wide_deep crosses C1 x C2 into a million more).
HASH_BUCKETS = [1000000, 300000, 100000, 50000, 50000, 20000, 20000, 10000, 10000, 5000, 5000, 5000,
                2000, 2000, 1000, 1000, 1000, 500, 500, 200, 200, 100, 50, 20, 10, 4]
EMBEDDING_DIM = 16
buckets, dense = common.buckets, common.dense


def input_fn(path, batch_size, skip=0):
    def parse(lines):
        fields = tf.decode_csv(lines, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, fields))
        label = tf.reshape(features.pop("label"), [-1, 1])
        return features, {"label": label}

    dataset = tf.data.TextLineDataset(path).repeat().batch(batch_size, drop_remainder=True).skip(skip)
    dataset = dataset.map(parse, num_parallel_calls=2).prefetch(2)
    features, labels = dataset.make_one_shot_iterator().get_next()
    return features, collections.OrderedDict(labels)


def numeric_columns(scale=1.0):
    # Counts are heavy-tailed: log1p, as the Criteo recipes do (then times `scale`).
    return [tf.feature_column.numeric_column(name, normalizer_fn=lambda x: scale * tf.log1p(tf.maximum(x, 0.0)))
            for name in NUMERIC]


def categorical_columns():
    return [tf.feature_column.categorical_column_with_hash_bucket(name, hash_bucket_size=buckets(size))
            for name, size in zip(CATEGORICAL, HASH_BUCKETS)]


def embedding_columns(dimension=EMBEDDING_DIM):
    columns = categorical_columns()
    if common.EV[0]:  # DeepRec's way: the same columns' ids in EmbeddingVariables, no buckets
        columns = [tf.feature_column.categorical_column_with_embedding(c.key, dtype=tf.string) for c in columns]
    return [tf.feature_column.embedding_column(
        column, dimension=dimension, combiner="mean",
        initializer=tf.truncated_normal_initializer(stddev=0.01, seed=common.seed(i)))
        for i, column in enumerate(columns)]


def mlp(net, units, name):
    return common.mlp(net, units, name)


def main(logits_fn, description):
    common.main(logits_fn, description, input_fn, "Criteo-format CSV (make_criteo_data.py)", 1024,
                lambda: sum(buckets(size) for size in HASH_BUCKETS), list(zip(COLUMNS, DEFAULTS)))
