"""DeepFM written the way public TF 1.x model zoos write it (DeepRec's modelzoo/deepfm/train.py in its
stock-TensorFlow mode, `--tf`): that recipe's shapes and API calls, on Criteo-format data.

    python deepfm.py --data train.csv [--steps N] [--warmup N] [--batch-size 2048] [--seed S]

As the public recipe: every categorical column hashed into 10,000 buckets and embedded in 16 dimensions
(mean combiner), in three lists: wide (with the raw numeric columns), deep (with them too) and FM.
`input_layer` runs twice, once for the deep part and once for the wide part, whose per-column outputs
(`cols_to_output_tensors`) feed the FM part, so each column has two tables. The linear part sums the wide
input; the FM part is half the difference of the squared sum and the sum of squares; a 1024-256-32 MLP with
batch normalization (training mode) after each layer, then a 128-64 MLP the same way over the three parts'
outputs; the loss is the mean squared error of the click probability; one Adam (learning rate 0.001) trains
everything. Input, session and JSON line as bench/public/recipe.py; initializers without op seeds.
"""
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipe import CATEGORICAL_COLUMNS, CONTINUOUS_COLUMNS, HASH_BUCKET_SIZE, Model, main  # noqa: E402

EMBEDDING_DIMENSION = 16
LEARNING_RATE = 0.001


def build_feature_columns():
    wide_columns, deep_columns, fm_columns = [], [], []
    for column_name in CATEGORICAL_COLUMNS:
        categorical_column = tf.feature_column.categorical_column_with_hash_bucket(
            column_name, hash_bucket_size=HASH_BUCKET_SIZE, dtype=tf.string)
        embedding_column = tf.feature_column.embedding_column(categorical_column, dimension=EMBEDDING_DIMENSION,
                                                              combiner="mean")
        wide_columns.append(embedding_column)
        deep_columns.append(embedding_column)
        fm_columns.append(embedding_column)
    for column_name in CONTINUOUS_COLUMNS:
        numeric_column = tf.feature_column.numeric_column(column_name, shape=(1,))
        wide_columns.append(numeric_column)
        deep_columns.append(numeric_column)
    return wide_columns, deep_columns, fm_columns


class DeepFM(Model):
    def __init__(self, wide_column, fm_column, deep_column, dnn_hidden_units, final_hidden_units, inputs, labels,
                 learning_rate):
        self._wide_column = wide_column
        self._deep_column = deep_column
        self._fm_column = fm_column
        self._dnn_hidden_units = dnn_hidden_units
        self._final_hidden_units = final_hidden_units
        self._learning_rate = learning_rate
        super(DeepFM, self).__init__(inputs, labels)

    def _create_model(self):
        with tf.variable_scope("input_layer", partitioner=self._input_layer_partitioner, reuse=tf.AUTO_REUSE):
            fm_cols = {}
            dnn_input = tf.feature_column.input_layer(self._feature, self._deep_column)
            wide_input = tf.feature_column.input_layer(self._feature, self._wide_column,
                                                       cols_to_output_tensors=fm_cols)
            fm_input = tf.stack([fm_cols[cols] for cols in self._fm_column], 1)

        with tf.variable_scope("linear", partitioner=self._dense_layer_partitioner):
            linear_output = tf.reduce_sum(wide_input, axis=1, keepdims=True)

        with tf.variable_scope("fm", partitioner=self._dense_layer_partitioner):
            sum_square = tf.square(tf.reduce_sum(fm_input, axis=1))
            square_sum = tf.reduce_sum(tf.square(fm_input), axis=1)
            fm_output = 0.5 * tf.reduce_sum(tf.subtract(sum_square, square_sum), axis=1, keepdims=True)

        with tf.variable_scope("dnn"):
            dnn_output = self._dnn(dnn_input, self._dnn_hidden_units, "dnn_layer", batch_norm=True)

        with tf.variable_scope("final_dnn"):
            net = tf.concat([linear_output, fm_output, dnn_output], 1)
            net = self._dnn(net, self._final_hidden_units, "final_dnn", batch_norm=True)
            net = tf.layers.dense(net, units=1)
        self._logits = net
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_loss(self):
        self.probability = tf.squeeze(self.probability)
        self.loss = tf.losses.mean_squared_error(self._label, self.probability)

    def _create_optimizer(self):
        self._train_with_adam(self._learning_rate)


def build_model(features, labels, args, work_dir):
    wide_column, deep_column, fm_column = build_feature_columns()
    return DeepFM(wide_column, fm_column, deep_column, [1024, 256, 32], [128, 64], features, labels, LEARNING_RATE)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=2048)
