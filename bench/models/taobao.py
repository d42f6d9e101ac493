"""What the Taobao-like models share: the CSV input, the feature columns, the behaviour sequence, DIN attention.

Written for TensorFlow 1.15 (`import tensorflow as tf` being the 1.x API), Python 3.6, over the CSV
of make_taobao_data.py. Hash buckets are those of the public DSSM/MMoE recipes on Taobao's ad display
data (100,000 rows for ids, 10 for small profile fields); the sequence models' item table holds
400,000 rows (an Amazon-Books-sized vocabulary, as public DIN/DIEN recipes use). The loop is common.py's.
"""
import collections
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

LABELS = ["clk", "buy"]
USER = ["user_id", "cms_segid", "cms_group_id", "age_level", "pvalue_level", "shopping_level", "occupation",
        "new_user_class_level"]
ITEM = ["adgroup_id", "cate_id", "campaign_id", "customer", "brand", "price", "pid"]
HISTORY = ["hist_item", "hist_cate"]
COLUMNS = LABELS + USER + ITEM + HISTORY
DEFAULTS = [[0.0]] * len(LABELS) + [[""]] * (len(USER) + len(ITEM) + len(HISTORY))
HASH_BUCKETS = {"user_id": 100000, "cms_segid": 100, "cms_group_id": 100, "age_level": 10, "pvalue_level": 10,
                "shopping_level": 10, "occupation": 10, "new_user_class_level": 10, "adgroup_id": 100000,
                "cate_id": 10000, "campaign_id": 100000, "customer": 100000, "brand": 100000, "price": 50,
                "pid": 10}
SEQUENCE_ITEM_BUCKETS, SEQUENCE_CATEGORY_BUCKETS = 400000, 10000
buckets, dense, mlp = common.buckets, common.dense, common.mlp


def input_fn(path, batch_size, skip=0):
    def parse(lines):
        features = dict(zip(COLUMNS, tf.decode_csv(lines, record_defaults=DEFAULTS)))
        labels = {name: tf.reshape(features.pop(name), [-1, 1]) for name in LABELS}
        return features, labels

    dataset = tf.data.TextLineDataset(path).repeat().batch(batch_size, drop_remainder=True).skip(skip)
    dataset = dataset.map(parse, num_parallel_calls=2).prefetch(2)
    features, labels = dataset.make_one_shot_iterator().get_next()
    return features, collections.OrderedDict((name, labels[name]) for name in LABELS)


def embedding_columns(names, dimension=16):
    return [tf.feature_column.embedding_column(
        tf.feature_column.categorical_column_with_hash_bucket(name, hash_bucket_size=buckets(HASH_BUCKETS[name])),
        dimension=dimension, combiner="mean",
        initializer=tf.truncated_normal_initializer(stddev=0.01, seed=common.seed(300 + COLUMNS.index(name))))
        for name in names]


def table(name, rows, dimension, seed_offset):
    return tf.get_variable(name, [buckets(rows), dimension],
                           initializer=tf.truncated_normal_initializer(stddev=0.01, seed=common.seed(seed_offset)))


def sequence_inputs(features, dimension):
    """The user's embedding, the ad's [item; category] embedding and the history's, its lengths and mask.

    The ad and the history share one item and one category table, as DIN and DIEN do. The history is
    padded to the batch's longest with "" (masked out).
    """
    user = tf.feature_column.input_layer(features, embedding_columns(USER, dimension))
    items = table("item_embedding", SEQUENCE_ITEM_BUCKETS, dimension, 400)
    categories = table("category_embedding", SEQUENCE_CATEGORY_BUCKETS, dimension, 401)

    def lookup(strings, embeddings):
        return tf.nn.embedding_lookup(embeddings, tf.string_to_hash_bucket_fast(strings, embeddings.shape[0].value))

    ad = tf.concat([lookup(features["adgroup_id"], items), lookup(features["cate_id"], categories)], axis=1)
    history_items = tf.sparse.to_dense(tf.string_split(features["hist_item"], "|"), default_value="")
    history_categories = tf.sparse.to_dense(tf.string_split(features["hist_cate"], "|"), default_value="")
    history = tf.concat([lookup(history_items, items), lookup(history_categories, categories)], axis=2)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(history_items, ""), tf.int32), axis=1)
    mask = tf.sequence_mask(lengths, tf.shape(history_items)[1])
    return user, ad, history, lengths, mask


def attention(query, keys, mask, name):
    """DIN's activation unit: an MLP over [q, k, q - k, q * k] scores each step; masked softmax over steps.

    Returns the weights, [batch, steps].
    """
    with tf.variable_scope(name):
        queries = tf.tile(tf.expand_dims(query, 1), [1, tf.shape(keys)[1], 1])
        net = tf.concat([queries, keys, queries - keys, queries * keys], axis=2)
        net = dense(net, 80, "layer0", tf.nn.sigmoid, 500)
        net = dense(net, 40, "layer1", tf.nn.sigmoid, 501)
        scores = tf.squeeze(dense(net, 1, "scores", seed_offset=502), 2)
        scores = tf.where(mask, scores, tf.fill(tf.shape(scores), -2.0 ** 32 + 1))
        return tf.nn.softmax(scores)


def main(logits_fn, description, batch_size, sequence=False):
    """sequence: the model embeds the user's columns and the item/category tables (not the ad's columns)."""
    def rows():
        if sequence:
            return sum(buckets(HASH_BUCKETS[name]) for name in USER) + sum(
                buckets(size) for size in (SEQUENCE_ITEM_BUCKETS, SEQUENCE_CATEGORY_BUCKETS))
        return sum(buckets(size) for size in HASH_BUCKETS.values())

    common.main(logits_fn, description, input_fn, "Taobao-like CSV (make_taobao_data.py)", batch_size, rows,
                list(zip(COLUMNS, DEFAULTS)))
