"""Wide & Deep written the way public TF 1.x model zoos write it (DeepRec's modelzoo/wide_and_deep/train.py
in its stock-TensorFlow mode, `--tf`): that recipe's shapes and API calls, on Criteo-format data.

    python wide_and_deep.py --data train.csv [--steps N] [--warmup N] [--batch-size 2048] [--seed S]

As the public recipe: every categorical column hashed into 10,000 buckets, embedded in 64 dimensions (128
for the eight widest columns) with the mean combiner; the numeric columns min-max scaled by constants; a
linear part over the hashed and numeric columns (`linear_model`, FTRL) and a 1024-512-256 MLP over the
embeddings and numerics (`input_layer`, Adam), each under a min-max variable partitioner (one part on a
single machine, as the recipe runs there); `tf.data` input that shuffles, batches 2048 lines, then decodes
them; a `MonitoredTrainingSession` with a stop hook, a logging hook and checkpoints at its start and end
(bench/public/recipe.py).
Initializers carry no op seeds, as the recipe writes them. `--optimizer adam` (the only one) names the
recipe's pair. Prints one JSON line (bench/public/recipe.py).
"""
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipe import (  # noqa: E402
    CATEGORICAL_COLUMNS,
    CONTINUOUS_COLUMNS,
    HASH_BUCKET_SIZE,
    WIDE_COLUMNS,
    Model,
    adam_label,
    main,
    minmaxscaler,
)

LINEAR_LEARNING_RATE = 0.2
DEEP_LEARNING_RATE = 0.01


def build_feature_columns():
    deep_columns, wide_columns = [], []
    for column_name in CATEGORICAL_COLUMNS:
        categorical_column = tf.feature_column.categorical_column_with_hash_bucket(
            column_name, hash_bucket_size=HASH_BUCKET_SIZE, dtype=tf.string)
        wide_columns.append(categorical_column)
        dimension = 128 if column_name in WIDE_COLUMNS else 64
        deep_columns.append(tf.feature_column.embedding_column(categorical_column, dimension=dimension,
                                                               combiner="mean"))
    for column_name in CONTINUOUS_COLUMNS:
        column = tf.feature_column.numeric_column(column_name, normalizer_fn=minmaxscaler, shape=(1,))
        wide_columns.append(column)
        deep_columns.append(column)
    return wide_columns, deep_columns


class WDL(Model):
    def __init__(self, wide_column, deep_column, dnn_hidden_units, inputs, labels, linear_learning_rate,
                 deep_learning_rate):
        self._wide_column = wide_column
        self._deep_column = deep_column
        self._dnn_hidden_units = dnn_hidden_units
        self._linear_learning_rate = linear_learning_rate
        self._deep_learning_rate = deep_learning_rate
        super(WDL, self).__init__(inputs, labels)

    def _create_model(self):
        with tf.variable_scope("dnn"):
            with tf.variable_scope("input_from_feature_columns", partitioner=self._input_layer_partitioner,
                                   reuse=tf.AUTO_REUSE):
                net = tf.feature_column.input_layer(self._feature, self._deep_column)
            net = self._dnn(net, self._dnn_hidden_units, "hiddenlayer")
            with tf.variable_scope("logits") as logits_scope:
                dnn_logits = tf.layers.dense(net, units=1, activation=None, name=logits_scope)
        with tf.variable_scope("linear", partitioner=self._dense_layer_partitioner):
            linear_logits = tf.feature_column.linear_model(units=1, features=self._feature,
                                                           feature_columns=self._wide_column, sparse_combiner="sum",
                                                           weight_collections=None, trainable=True)
        self._logits = tf.add_n([dnn_logits, linear_logits])
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_optimizer(self):
        self.global_step = tf.train.get_or_create_global_step()
        dnn_optimizer = tf.train.AdamOptimizer(learning_rate=self._deep_learning_rate, beta1=0.9, beta2=0.999,
                                               epsilon=1e-8)
        linear_optimizer = tf.train.FtrlOptimizer(learning_rate=self._linear_learning_rate,
                                                  l1_regularization_strength=0.0, l2_regularization_strength=0.0)
        # What implements tf.train.AdamOptimizer here: retf's fused kernel on the wheel.
        self.implementation = adam_label(dnn_optimizer) + " (dnn) + FtrlOptimizer (linear)"
        train_ops = []
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_ops.append(dnn_optimizer.minimize(self.loss, var_list=tf.get_collection(
                tf.GraphKeys.TRAINABLE_VARIABLES, scope="dnn"), global_step=self.global_step))
            train_ops.append(linear_optimizer.minimize(self.loss, var_list=tf.get_collection(
                tf.GraphKeys.TRAINABLE_VARIABLES, scope="linear")))
            self.train_op = tf.group(*train_ops)


def build_model(features, labels, args, work_dir):
    wide_column, deep_column = build_feature_columns()
    return WDL(wide_column, deep_column, [1024, 512, 256], features, labels, LINEAR_LEARNING_RATE,
               DEEP_LEARNING_RATE)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=2048)
