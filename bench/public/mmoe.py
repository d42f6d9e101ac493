"""MMoE written the way public TF 1.x model zoos write it (DeepRec's modelzoo/mmoe/train.py in its stock-TensorFlow
mode, `--tf`): that recipe's shapes and API calls, on the Taobao-like CSV of bench/models/make_taobao_data.py.

    python mmoe.py --data taobao.csv [--steps N] [--warmup N] [--batch-size 512] [--seed S]

As the public recipe: two tasks, the click and the buy, their labels stacked; every profile and ad column a string
hashed into its recipe's buckets (100,000 for the ids, 10-100 for the small ones), the behaviour sequence's
categories and items (the recipe's tag lists) split with `tf.strings.split` and hashed into 100,000 buckets as
multivalent columns, the price an identity column over 50 values; all embedded 16-wide with the mean combiner
through one `input_layer` (272 values); four experts, each a 256-192-128-64 ReLU MLP; per task a softmax gate (one
dense layer over the input, four weights) mixing the experts' outputs, then a 256-192-128-64 ReLU tower and one logit;
the sigmoid cross-entropy of both tasks' logits, averaged over the batch and the tasks; one Adam with the recipe's
learning rate of 0.1 (its model's default, which the recipe's option never reaches); the input shuffled over
400,000 lines, batches of 512. Input, session and JSON line as bench/public/recipe.py; initializers without op
seeds.
"""
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bst import CSV_COLUMNS, HASH_BUCKET_SIZES, RECIPE_NAMES, TAG_COLUMN  # noqa: E402
from recipe import Model, main  # noqa: E402

INPUT_FEATURES = ["pid", "adgroup_id", "cate_id", "campaign_id", "customer", "brand", "user_id", "cms_segid",
                  "cms_group_id", "age_level", "pvalue_level", "shopping_level", "occupation", "new_user_class_level",
                  "tag_category_list", "tag_brand_list", "price"]
EMBEDDING_DIM = 16
EXPERTS = 4
EXPERT_UNITS = [256, 192, 128, 64]
TOWER_UNITS = [256, 192, 128, 64]
TASKS = ["ctr", "cvr"]
LEARNING_RATE = 0.1
SHUFFLE_BUFFER = 400000


def parse_csv(value):
    defaults = [[0], [0]] + [[0] if name == "price" else [" "] for name in CSV_COLUMNS[2:]]
    columns = dict(zip(CSV_COLUMNS, tf.io.decode_csv(value, record_defaults=defaults)))
    labels = tf.stack([columns.pop("clk"), columns.pop("buy")], axis=1)
    return dict((RECIPE_NAMES.get(name, name), column) for name, column in columns.items()), labels


def build_feature_columns():
    columns = []
    for name in INPUT_FEATURES:
        if name == "price":
            categorical = tf.feature_column.categorical_column_with_identity(name, HASH_BUCKET_SIZES[name])
        else:
            categorical = tf.feature_column.categorical_column_with_hash_bucket(
                name, hash_bucket_size=HASH_BUCKET_SIZES[name], dtype=tf.string)
        columns.append(tf.feature_column.embedding_column(categorical, dimension=EMBEDDING_DIM, combiner="mean"))
    return columns


class MMOE(Model):
    def __init__(self, columns, inputs, labels):
        self._columns = columns
        super(MMOE, self).__init__(inputs, labels)

    @staticmethod
    def _mlp(net, units, scope):
        with tf.variable_scope(scope, reuse=tf.AUTO_REUSE):
            for layer_id, width in enumerate(units):
                net = tf.layers.dense(net, units=width, activation=tf.nn.relu, name="dnn_%d" % layer_id)
        return net

    def _create_model(self):
        for key in TAG_COLUMN:
            self._feature[key] = tf.strings.split(self._feature[key], "|")
        with tf.variable_scope("input_layer", reuse=tf.AUTO_REUSE):
            net = tf.feature_column.input_layer(self._feature, self._columns)
        experts = tf.stack([self._mlp(net, EXPERT_UNITS, "expert_%d" % index) for index in range(EXPERTS)], axis=1)
        logits = []
        for task in TASKS:
            with tf.variable_scope("%s_gate" % task, reuse=tf.AUTO_REUSE):
                gate = tf.nn.softmax(tf.layers.dense(net, units=EXPERTS, name="gate"))
                mixed = tf.reduce_sum(experts * tf.expand_dims(gate, -1), axis=1)
            tower = self._mlp(mixed, TOWER_UNITS, "%s_tower" % task)
            with tf.variable_scope("%s_logits" % task, reuse=tf.AUTO_REUSE):
                logits.append(tf.layers.dense(tower, units=1, name="logits"))
        self._logits = tf.concat(logits, axis=1)
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_loss(self):
        self.loss = tf.losses.sigmoid_cross_entropy(self._label, self._logits, scope="loss",
                                                    reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE)

    def _create_optimizer(self):
        self._train_with_adam(LEARNING_RATE, after_update_ops=False)


def build_model(features, labels, args, work_dir):
    del args, work_dir
    return MMOE(build_feature_columns(), features, labels)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=512, parse_csv=parse_csv, shuffle_buffer=SHUFFLE_BUFFER)
