"""DLRM written the way public TF 1.x model zoos write it (DeepRec's modelzoo/dlrm/train.py in its
stock-TensorFlow mode, `--tf`): that recipe's shapes and API calls, on Criteo-format data.

    python dlrm.py --data train.csv [--steps N] [--warmup N] [--batch-size 512] [--seed S] [--interaction cat|dot]

As the public recipe: the 13 numeric columns as they are (`numeric_column`, no normalizer) through one
`input_layer` under the 8 MiB min-max partitioner; every categorical column hashed into 10,000 buckets and
embedded in 16 dimensions (mean combiner) through a second `input_layer`, whose per-column outputs
(`cols_to_output_tensors`) feed the dot interaction; a 512-256-64-16 bottom MLP over the numerics with batch
normalization in training mode after each layer (its moving averages are not updated: the recipe's train op
does not depend on `UPDATE_OPS`); the recipe's default interaction, `cat` (the bottom MLP's output beside the
26 embeddings), or `dot` (the pairwise products of the 27 vectors, `tf.matmul` then `tf.boolean_mask` of the
lower triangle, beside the bottom output); a 512-256 top MLP (chained here: the recipe's loop feeds each top
layer the interaction's output, so its 512-wide layer drops out of the graph it trains); Keras's
`BinaryCrossentropy` of the squeezed probability; one Adam (learning rate 0.01), the recipe's input without a
shuffle, batches of 512. Input, session and JSON line as bench/public/recipe.py; initializers without op
seeds.
"""
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipe import CATEGORICAL_COLUMNS, CONTINUOUS_COLUMNS, HASH_BUCKET_SIZE, Model, main  # noqa: E402

EMBEDDING_DIMENSION = 16
LEARNING_RATE = 0.01
BOTTOM_MLP = [512, 256, 64, 16]
TOP_MLP = [512, 256]


def build_feature_columns():
    dense_columns, sparse_columns = [], []
    for column_name in CONTINUOUS_COLUMNS + CATEGORICAL_COLUMNS:
        if column_name in CATEGORICAL_COLUMNS:
            categorical_column = tf.feature_column.categorical_column_with_hash_bucket(
                column_name, hash_bucket_size=HASH_BUCKET_SIZE, dtype=tf.string)
            sparse_columns.append(tf.feature_column.embedding_column(categorical_column,
                                                                     dimension=EMBEDDING_DIMENSION, combiner="mean"))
        else:
            dense_columns.append(tf.feature_column.numeric_column(column_name, shape=(1,)))
    return dense_columns, sparse_columns


class DLRM(Model):
    def __init__(self, dense_column, sparse_column, interaction, inputs, labels, learning_rate):
        self._dense_column = dense_column
        self._sparse_column = sparse_column
        self._interaction = interaction
        self._learning_rate = learning_rate
        super(DLRM, self).__init__(inputs, labels)

    @staticmethod
    def _dot(features):
        batch_size = tf.shape(features)[0]
        products = tf.matmul(features, features, transpose_b=True)
        count = products.shape[-1]
        ones = tf.ones_like(products)
        lower = tf.cast(ones - tf.linalg.band_part(ones, 0, -1), tf.bool)
        return tf.reshape(tf.boolean_mask(products, lower), (batch_size, count * (count - 1) // 2))

    def _create_model(self):
        with tf.variable_scope("input_layer", reuse=tf.AUTO_REUSE):
            with tf.variable_scope("dense_input_layer", partitioner=self._input_layer_partitioner,
                                   reuse=tf.AUTO_REUSE):
                dense = tf.feature_column.input_layer(self._feature, self._dense_column)
            with tf.variable_scope("sparse_input_layer", reuse=tf.AUTO_REUSE):
                column_tensors = {}
                sparse = tf.feature_column.input_layer(self._feature, self._sparse_column,
                                                       cols_to_output_tensors=column_tensors)
        with tf.variable_scope("mlp_bot_layer", partitioner=self._dense_layer_partitioner, reuse=tf.AUTO_REUSE):
            for layer_id, units in enumerate(BOTTOM_MLP):
                with tf.variable_scope("mlp_bot_hiddenlayer_%d" % layer_id, reuse=tf.AUTO_REUSE) as scope:
                    dense = tf.layers.dense(dense, units=units, activation=tf.nn.relu, name=scope)
                    dense = tf.layers.batch_normalization(dense, training=True, trainable=True)
        if self._interaction == "dot":
            with tf.variable_scope("Op_dot_layer", reuse=tf.AUTO_REUSE):
                stacked = tf.stack([dense] + [column_tensors[column] for column in self._sparse_column], axis=1)
                net = tf.concat([dense, self._dot(stacked)], 1)
        else:
            net = tf.concat([dense, sparse], 1)
        with tf.variable_scope("mlp_top_layer", partitioner=self._dense_layer_partitioner, reuse=tf.AUTO_REUSE):
            for layer_id, units in enumerate(TOP_MLP):
                with tf.variable_scope("mlp_top_hiddenlayer_%d" % layer_id, reuse=tf.AUTO_REUSE) as scope:
                    net = tf.layers.dense(net, units=units, activation=tf.nn.relu, name=scope)
        with tf.variable_scope("logits", reuse=tf.AUTO_REUSE) as scope:
            self._logits = tf.layers.dense(net, units=1, activation=None, name=scope)
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_loss(self):
        loss = tf.keras.losses.BinaryCrossentropy()
        self.loss = tf.math.reduce_mean(loss(self._label, tf.squeeze(self.probability)))

    def _create_optimizer(self):
        self._train_with_adam(self._learning_rate, after_update_ops=False)


def add_arguments(parser):
    parser.add_argument("--interaction", choices=["cat", "dot"], default="cat",
                        help="the recipe's interaction_op (its default: cat)")


def build_model(features, labels, args, work_dir):
    dense_column, sparse_column = build_feature_columns()
    return DLRM(dense_column, sparse_column, args.interaction, features, labels, LEARNING_RATE)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=512, shuffle_buffer=0, add_arguments=add_arguments)
