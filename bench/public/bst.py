"""BST (behaviour sequence transformer) written the way public TF 1.x model zoos write it (DeepRec's modelzoo/bst/train.py
in its stock-TensorFlow mode, `--tf`): that recipe's shapes and API calls, on the Taobao-like CSV of
bench/models/make_taobao_data.py.

    python bst.py --data taobao.csv [--steps N] [--warmup N] [--batch-size 512] [--seed S]

As the public recipe: every profile and ad column a string hashed into its recipe's buckets (100,000 for the ids,
10-100 for the small ones) and embedded 16-wide with the mean combiner through `input_layer` (its
`cols_to_output_tensors` giving the target's category and brand); the behaviour sequence's categories and items
(the recipe's tag lists; the CSV has no gender column, which the recipe also reads) as sequence columns over
100,000 buckets, split with `tf.strings.split`, cut to 49 with `tf.sparse.slice` and embedded by
`tf.contrib.feature_column.sequence_input_layer`; one transformer block over the 49 padded steps and the target
(four heads of ReLU dense projections, scores masked by the lengths, softmax, a ReLU output projection; Keras's
`LayerNormalization` after each residual; a 32-32 feed-forward); a 512-256-64 MLP with batch normalization in
training mode; Keras's `CategoricalCrossentropy` of the squeezed probability, as the recipe computes its loss; one
Adam (learning rate 0.01) after the update ops. Input, session and JSON line as bench/public/recipe.py;
initializers without op seeds.
"""
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipe import Model, main  # noqa: E402

CSV_COLUMNS = ["clk", "buy", "user_id", "cms_segid", "cms_group_id", "age_level", "pvalue_level", "shopping_level",
               "occupation", "new_user_class_level", "adgroup_id", "cate_id", "campaign_id", "customer", "brand",
               "price", "pid", "hist_item", "hist_cate"]
RECIPE_NAMES = {"hist_cate": "tag_category_list", "hist_item": "tag_brand_list"}
USER_COLUMN = ["user_id", "cms_segid", "cms_group_id", "age_level", "pvalue_level", "shopping_level", "occupation",
               "new_user_class_level"]
ITEM_COLUMN = ["adgroup_id", "cate_id", "campaign_id", "customer", "brand", "price", "pid"]
TAG_COLUMN = ["tag_category_list", "tag_brand_list"]
KEY_COLUMN = ["cate_id", "brand"]
INPUT_FEATURES = ["pid", "adgroup_id", "cate_id", "campaign_id", "customer", "brand", "user_id", "cms_segid",
                  "cms_group_id", "age_level", "pvalue_level", "shopping_level", "occupation", "new_user_class_level",
                  "tag_category_list", "tag_brand_list", "price"]
EMBEDDING_DIM = 16
HASH_BUCKET_SIZES = {"pid": 10, "adgroup_id": 100000, "cate_id": 10000, "campaign_id": 100000, "customer": 100000,
                     "brand": 100000, "user_id": 100000, "cms_segid": 100, "cms_group_id": 100, "age_level": 10,
                     "pvalue_level": 10, "shopping_level": 10, "occupation": 10, "new_user_class_level": 10,
                     "tag_category_list": 100000, "tag_brand_list": 100000, "price": 50}
MAX_SEQ_LENGTH = 50
HEADS = 4
HIDDEN_UNITS = [512, 256, 64]
LEARNING_RATE = 0.01


def parse_csv(value):
    defaults = [[0], [0]] + [[" "] for _ in CSV_COLUMNS[2:]]
    columns = dict(zip(CSV_COLUMNS, tf.io.decode_csv(value, record_defaults=defaults)))
    labels = columns.pop("clk")
    columns.pop("buy")
    return dict((RECIPE_NAMES.get(name, name), column) for name, column in columns.items()), labels


def build_feature_columns():
    user_column, item_column, tag_column, key_column = [], [], [], []
    for name in INPUT_FEATURES:
        if name in TAG_COLUMN:
            categorical = tf.feature_column.sequence_categorical_column_with_hash_bucket(
                name, hash_bucket_size=HASH_BUCKET_SIZES[name], dtype=tf.string)
        else:
            categorical = tf.feature_column.categorical_column_with_hash_bucket(
                name, hash_bucket_size=HASH_BUCKET_SIZES[name], dtype=tf.string)
        embedding = tf.feature_column.embedding_column(categorical, dimension=EMBEDDING_DIM, combiner="mean")
        if name in USER_COLUMN:
            user_column.append(embedding)
        elif name in ITEM_COLUMN:
            item_column.append(embedding)
            if name in KEY_COLUMN:
                key_column.append(embedding)
        elif name in TAG_COLUMN:
            tag_column.append(embedding)
    return user_column, item_column, tag_column, key_column


class BST(Model):
    def __init__(self, columns, inputs, labels):
        self._unseq_column = columns[0] + columns[1]
        self._tag_column, self._key_column = columns[2], columns[3]
        self._batch_size = tf.shape(labels)[0]
        super(BST, self).__init__(inputs, labels)

    def _add_and_norm(self, net_1, net_2, name):
        with tf.variable_scope(name):
            return tf.keras.layers.LayerNormalization(axis=2)(tf.add(net_1, net_2))

    def _multihead_attention(self, ids, head_count, emb_dim, seq_len, seq_size, name="multi_head_att_net"):
        with tf.variable_scope(name):
            query = tf.layers.dense(ids, units=emb_dim, activation=tf.nn.relu, name=name + "_query")
            key = tf.layers.dense(ids, units=emb_dim, activation=tf.nn.relu, name=name + "_key")
            value = tf.layers.dense(ids, units=emb_dim, activation=tf.nn.relu, name=name + "_value")
            query, key, value = (tf.concat(tf.split(net, head_count, axis=-1), axis=0) for net in (query, key, value))
            scores = tf.matmul(query, key, transpose_b=True)
            hist_mask = tf.sequence_mask(seq_len, maxlen=seq_size - 1)
            mask = tf.concat([tf.ones([tf.shape(hist_mask)[0], 1], dtype=tf.bool), hist_mask], axis=1)
            masks = tf.reshape(tf.tile(mask, [head_count, seq_size]), (-1, seq_size, seq_size))
            scores -= 1.e9 * tf.cast(tf.math.logical_not(masks), dtype=scores.dtype)
            attention = tf.matmul(tf.nn.softmax(scores), value)
            attention = tf.concat(tf.split(attention, head_count, axis=0), axis=2)
            return tf.layers.dense(attention, units=emb_dim, activation=tf.nn.relu, name="multi_head_attention")

    def _bst_tower(self, current, history, seq_len, seq_size, head_count):
        longest = tf.shape(history)[1]
        history = tf.cond(tf.constant(seq_size) > longest,
                          lambda: tf.pad(history, [[0, 0], [0, seq_size - longest - 1], [0, 0]], "CONSTANT"),
                          lambda: tf.slice(history, [0, 0, 0], [-1, seq_size - 1, -1]))
        all_ids = tf.concat([history, tf.expand_dims(current, 1)], axis=1)
        emb_dim = int(all_ids.shape[2])
        attention = self._multihead_attention(all_ids, head_count, emb_dim, seq_len, seq_size)
        net = self._add_and_norm(all_ids, attention, "add_and_norm_1")
        forward = tf.layers.dense(net, units=emb_dim, activation=tf.nn.relu, name="feed_forward_net_1")
        forward = tf.layers.dense(forward, units=emb_dim, activation=None, name="feed_forward_net_2")
        net = self._add_and_norm(net, forward, "add_and_norm_2")
        return tf.reshape(net, [-1, seq_size * emb_dim])

    def _create_model(self):
        for key in TAG_COLUMN:
            self._feature[key] = tf.strings.split(self._feature[key], "|")
            self._feature[key] = tf.sparse.slice(self._feature[key], [0, 0],
                                                 tf.cast([self._batch_size, MAX_SEQ_LENGTH - 1], tf.int64))
        with tf.variable_scope("input_layer", partitioner=self._input_layer_partitioner):
            key_dict = {}
            with tf.variable_scope("unseq_input_layer", reuse=tf.AUTO_REUSE):
                unseq_emb = tf.feature_column.input_layer(self._feature, self._unseq_column,
                                                          cols_to_output_tensors=key_dict)
            with tf.variable_scope("bst_input_layer", reuse=tf.AUTO_REUSE):
                with tf.variable_scope("tag_input_layer", reuse=tf.AUTO_REUSE):
                    tag_emb, tag_len = tf.contrib.feature_column.sequence_input_layer(self._feature,
                                                                                      self._tag_column)
                with tf.variable_scope("key_input_layer", reuse=tf.AUTO_REUSE):
                    key_emb = tf.concat([key_dict[key] for key in self._key_column], axis=-1)
        with tf.variable_scope("bst_tower", partitioner=self._dense_layer_partitioner, reuse=tf.AUTO_REUSE):
            bst_output = self._bst_tower(key_emb, tag_emb, tag_len, MAX_SEQ_LENGTH, HEADS)
        net = tf.concat([unseq_emb, bst_output], axis=1)
        with tf.variable_scope("final_dnn_layer", partitioner=self._dense_layer_partitioner, reuse=tf.AUTO_REUSE):
            for index, units in enumerate(HIDDEN_UNITS):
                with tf.variable_scope("final_dnn_%d" % index, reuse=tf.AUTO_REUSE):
                    net = tf.layers.dense(net, units=units, activation=None)
                    net = tf.layers.batch_normalization(net, training=True, trainable=True)
                    net = tf.nn.relu(net)
        self._logits = tf.layers.dense(inputs=net, units=1)
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_loss(self):
        self.probability = tf.squeeze(self.probability)
        self.loss = tf.math.reduce_mean(tf.keras.losses.CategoricalCrossentropy()(self._label, self.probability))

    def _create_optimizer(self):
        self._train_with_adam(LEARNING_RATE)


def build_model(features, labels, args, work_dir):
    del args, work_dir
    return BST(build_feature_columns(), features, labels)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=512, parse_csv=parse_csv)
