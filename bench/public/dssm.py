"""DSSM written the way public TF 1.x model zoos write it (DeepRec's modelzoo/dssm/train.py in its stock-TensorFlow
mode, `--tf`): that recipe's shapes and API calls, on the Taobao-like CSV of bench/models/make_taobao_data.py.

    python dssm.py --data taobao.csv [--steps N] [--warmup N] [--batch-size 4096] [--seed S]

As the public recipe: the click as the label; two towers over hashed columns, each column a string hashed into its
recipe's buckets (100,000 for the ids, 10-100 for the small ones, 50 for the price) and embedded 16-wide with the
mean combiner: the user's eight profile columns and the behaviour sequence's categories and items (the recipe's
tag lists, split with `tf.strings.split` into multivalent columns) through one `input_layer`, the ad's seven
columns through another; each tower a 256-128-64 MLP, batch normalization in training mode then ReLU after each
layer, and a linear 32-wide output; the towers' outputs L2-normalized, their cosine scaled by the absolute value of
a learned weight and shifted by a learned bias; Keras's `CategoricalCrossentropy` of the click and the sigmoid of
that logit over the batch, as the recipe computes its loss; one Adam (learning rate 0.001) after the update ops;
batches of 4,096. Input, session and JSON line as bench/public/recipe.py; initializers without op seeds.
"""
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bst import HASH_BUCKET_SIZES, TAG_COLUMN, parse_csv  # noqa: E402  (the click, every column a string)
from recipe import Model, main  # noqa: E402

USER_COLUMN = ["user_id", "cms_segid", "cms_group_id", "age_level", "pvalue_level", "shopping_level", "occupation",
               "new_user_class_level", "tag_category_list", "tag_brand_list"]
ITEM_COLUMN = ["adgroup_id", "cate_id", "campaign_id", "customer", "brand", "price", "pid"]
EMBEDDING_DIM = 16
TOWER_UNITS = [256, 128, 64]
OUTPUT_UNITS = 32
LEARNING_RATE = 0.001


def build_feature_columns():
    def embedded(name):
        categorical = tf.feature_column.categorical_column_with_hash_bucket(
            name, hash_bucket_size=HASH_BUCKET_SIZES[name], dtype=tf.string)
        return tf.feature_column.embedding_column(categorical, dimension=EMBEDDING_DIM, combiner="mean")
    return [embedded(name) for name in USER_COLUMN], [embedded(name) for name in ITEM_COLUMN]


class DSSM(Model):
    def __init__(self, columns, inputs, labels):
        self._user_column, self._item_column = columns
        super(DSSM, self).__init__(inputs, labels)

    def _tower(self, net, name):
        with tf.variable_scope(name, partitioner=self._dense_layer_partitioner, reuse=tf.AUTO_REUSE):
            for layer_id, units in enumerate(TOWER_UNITS):
                with tf.variable_scope("%s_%d" % (name, layer_id), reuse=tf.AUTO_REUSE) as scope:
                    net = tf.layers.dense(net, units=units, activation=None, name=scope)
                    net = tf.layers.batch_normalization(net, training=True, trainable=True)
                    net = tf.nn.relu(net)
            return tf.layers.dense(net, units=OUTPUT_UNITS, activation=None, name="%s_output" % name)

    def _create_model(self):
        for key in TAG_COLUMN:
            self._feature[key] = tf.strings.split(self._feature[key], "|")
        with tf.variable_scope("input_layer", partitioner=self._input_layer_partitioner, reuse=tf.AUTO_REUSE):
            user = tf.feature_column.input_layer(self._feature, self._user_column)
            item = tf.feature_column.input_layer(self._feature, self._item_column)
        user = tf.nn.l2_normalize(self._tower(user, "user_dnn"), axis=1)
        item = tf.nn.l2_normalize(self._tower(item, "item_dnn"), axis=1)
        with tf.variable_scope("similarity"):
            weight = tf.get_variable("sim_w", initializer=tf.constant(1.0))
            bias = tf.get_variable("sim_b", initializer=tf.constant(0.0))
            cosine = tf.reduce_sum(user * item, axis=1)
            self._logits = cosine * tf.abs(weight) + bias
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_loss(self):
        self.loss = tf.math.reduce_mean(tf.keras.losses.CategoricalCrossentropy()(self._label, self.probability))

    def _create_optimizer(self):
        self._train_with_adam(LEARNING_RATE)


def build_model(features, labels, args, work_dir):
    del args, work_dir
    return DSSM(build_feature_columns(), features, labels)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=4096, parse_csv=parse_csv)
