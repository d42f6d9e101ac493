"""DCN-V2 written the way public TF 1.x model zoos write it (DeepRec's modelzoo/dcnv2/train.py in its
stock-TensorFlow mode, `--tf`): that recipe's shapes and API calls, on Criteo-format data.

    python dcnv2.py --data train.csv [--steps N] [--warmup N] [--batch-size 512] [--seed S]

As the public recipe: every categorical column hashed into 10,000 buckets, embedded in 64 dimensions (128
for the eight widest columns) with the mean combiner, beside the numeric columns min-max scaled by constants
(2,189 values a row). Two parts each read them through their own `input_layer`, so each column has two tables:
a 1024-512-256 MLP (relu, Glorot-uniform kernels) with a one-unit logit, and two full-rank cross layers,
`x0 * dense(x) + x` with a 2,189 x 2,189 kernel each (no projection: the recipe's default), with a one-unit
logit; the two logits are added. The loss is the click's sigmoid cross-entropy; one Adam per part (learning
rate 0.01 for the MLP, 0.001 for the cross layers), both after `UPDATE_OPS`. Input, session and JSON line as
bench/public/recipe.py; initializers without op seeds.
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

DEEP_LEARNING_RATE = 0.01
CROSS_LEARNING_RATE = 0.001
CROSS_LAYERS = 2


def build_feature_columns():
    columns = []
    for column_name in CONTINUOUS_COLUMNS + CATEGORICAL_COLUMNS:
        if column_name in CATEGORICAL_COLUMNS:
            categorical_column = tf.feature_column.categorical_column_with_hash_bucket(
                column_name, hash_bucket_size=HASH_BUCKET_SIZE, dtype=tf.string)
            dimension = 128 if column_name in WIDE_COLUMNS else 64
            columns.append(tf.feature_column.embedding_column(categorical_column, dimension=dimension,
                                                              combiner="mean"))
        else:
            columns.append(tf.feature_column.numeric_column(column_name, normalizer_fn=minmaxscaler, shape=(1,)))
    return columns


class DCNV2(Model):
    def __init__(self, columns, dnn_hidden_units, inputs, labels, deep_learning_rate, cross_learning_rate):
        self._columns = columns
        self._dnn_hidden_units = dnn_hidden_units
        self._deep_learning_rate = deep_learning_rate
        self._cross_learning_rate = cross_learning_rate
        super(DCNV2, self).__init__(inputs, labels)

    def _cross_net(self, cross_input, layer_num, layer_name):
        x = cross_input
        for layer_id in range(layer_num):
            with tf.variable_scope(layer_name + "_%d" % layer_id, partitioner=self._dense_layer_partitioner,
                                   reuse=tf.AUTO_REUSE) as cross_layer_scope:
                last_dim = cross_input.shape[-1]
                cross_input = tf.layers.dense(cross_input, units=last_dim,
                                              kernel_initializer=tf.glorot_uniform_initializer(),
                                              name=cross_layer_scope)
                cross_input = x * cross_input + x
        return cross_input

    def _input_layer(self):
        with tf.variable_scope("input_from_feature_columns", partitioner=self._input_layer_partitioner,
                               reuse=tf.AUTO_REUSE):
            return tf.feature_column.input_layer(features=self._feature, feature_columns=self._columns)

    def _create_model(self):
        with tf.variable_scope("dnn"):
            net = self._input_layer()
            with tf.variable_scope("dnn_layers", partitioner=self._dense_layer_partitioner, reuse=tf.AUTO_REUSE):
                net = self._dnn(net, self._dnn_hidden_units, "hiddenlayer")
                with tf.variable_scope("logits") as dnn_logits_scope:
                    dnn_logits = tf.layers.dense(net, units=1, activation=None, name=dnn_logits_scope)
        with tf.variable_scope("cross", partitioner=self._dense_layer_partitioner):
            net = self._input_layer()
            with tf.variable_scope("cross_layers", partitioner=self._dense_layer_partitioner, reuse=tf.AUTO_REUSE):
                net = self._cross_net(net, CROSS_LAYERS, "crosslayer")
                with tf.variable_scope("logits") as cross_logits_scope:
                    cross_logits = tf.layers.dense(net, units=1, activation=None, name=cross_logits_scope)
        self._logits = tf.add_n([dnn_logits, cross_logits])
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_optimizer(self):
        self.global_step = tf.train.get_or_create_global_step()
        dnn_optimizer = tf.train.AdamOptimizer(learning_rate=self._deep_learning_rate, beta1=0.9, beta2=0.999,
                                               epsilon=1e-8)
        cross_optimizer = tf.train.AdamOptimizer(learning_rate=self._cross_learning_rate, beta1=0.9, beta2=0.999,
                                                 epsilon=1e-8)
        self.implementation = adam_label(dnn_optimizer) + " (dnn, cross)"
        train_ops = []
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_ops.append(dnn_optimizer.minimize(self.loss, var_list=tf.get_collection(
                tf.GraphKeys.TRAINABLE_VARIABLES, scope="dnn"), global_step=self.global_step))
            train_ops.append(cross_optimizer.minimize(self.loss, var_list=tf.get_collection(
                tf.GraphKeys.TRAINABLE_VARIABLES, scope="cross")))
            self.train_op = tf.group(*train_ops)


def build_model(features, labels, args, work_dir):
    return DCNV2(build_feature_columns(), [1024, 512, 256], features, labels, DEEP_LEARNING_RATE,
                 CROSS_LEARNING_RATE)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=512)
