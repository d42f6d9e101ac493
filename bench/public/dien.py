"""DIEN written the way public TF 1.x model zoos write it (DeepRec's modelzoo/dien/train.py in its stock-TensorFlow
mode, `--tf`): that recipe's shapes and API calls, on the Taobao-like CSV of bench/models/make_taobao_data.py.

    python dien.py --data taobao.csv [--steps N] [--warmup N] [--batch-size 128] [--seed S]

As bench/public/din.py for the input (vocabulary-file columns, 18-dimensional embeddings, the sequence split and
cut to 50), plus the recipe's non-clicked sequence, which its data preparation samples per clicked item: here
each row's history turned by one place (its first item moved to the end), so it has the history's length.
Interest extraction: `tf.nn.dynamic_rnn` over a `tf.nn.rnn_cell.GRUCell` of 36 units; the auxiliary loss, a
batch-normalized 100-50-2 sigmoid MLP telling each next clicked item from the non-clicked one; DIN's activation
unit in its list mode for the weights; interest evolution: `dynamic_rnn` over the recipe's `VecAttGRUCell`
(a GRU on `tf.contrib`'s `_Linear`, the update gate scaled by the weight); a batch-normalized 200-80-2-1 MLP over
the user, the target, the sequence's sum, their product and the last evolved state; the click's cross-entropy
plus the auxiliary loss; one Adam (learning rate 0.001) over gradients clipped to norm 5. Batch 128, the
recipe's. Input, session and JSON line as bench/public/recipe.py; initializers without op seeds.
"""
import os
import sys

import tensorflow as tf
from tensorflow.contrib.rnn.python.ops.core_rnn_cell import _Linear

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import din  # noqa: E402
from recipe import main  # noqa: E402

HIDDEN_SIZE = 36
NEG_COLUMNS = ["NOCLK_HISTORY_ITEM", "NOCLK_HISTORY_CATEGORY"]


def parse_csv(value):
    features, labels = din.parse_csv(value)
    for clicked, unclicked in zip(din.SEQ_COLUMNS, NEG_COLUMNS):
        features[unclicked] = tf.strings.regex_replace(features[clicked], r"^([^|]*)\|(.*)$", r"\2|\1")
    return features, labels


def build_feature_columns(vocabularies):
    columns = din.build_feature_columns(vocabularies)
    columns["noclk_his_item_cate_column"] = tf.feature_column.sequence_categorical_column_with_vocabulary_file(
        "NOCLK_HISTORY_ITEM", vocabularies["mid_voc.txt"], default_value=0)
    columns["noclk_his_category_cate_column"] = tf.feature_column.sequence_categorical_column_with_vocabulary_file(
        "NOCLK_HISTORY_CATEGORY", vocabularies["cat_voc.txt"], default_value=0)
    return columns


class VecAttGRUCell(tf.nn.rnn_cell.RNNCell):
    """The recipe's AUGRU: inputs (x, attention weight), GRUCell's arithmetic on _Linear, u scaled by 1 - weight."""

    def __init__(self, num_units):
        super(VecAttGRUCell, self).__init__()
        self._num_units = num_units
        self._gate_linear = None
        self._candidate_linear = None

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def __call__(self, inputs, state):
        return self.call(inputs, state)

    def call(self, inputs, state):
        x, att_score = inputs
        if self._gate_linear is None:
            with tf.variable_scope("gates"):
                self._gate_linear = _Linear([x, state], 2 * self._num_units, True,
                                            bias_initializer=tf.constant_initializer(1.0, dtype=x.dtype))
        r, u = tf.split(value=tf.math.sigmoid(self._gate_linear([x, state])), num_or_size_splits=2, axis=1)
        r_state = r * state
        if self._candidate_linear is None:
            with tf.variable_scope("candidate"):
                self._candidate_linear = _Linear([x, r_state], self._num_units, True)
        c = tf.math.tanh(self._candidate_linear([x, r_state]))
        u = (1.0 - att_score) * u
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class DIEN(din.DIN):
    def _embedding_input_layer(self):
        for key in NEG_COLUMNS:
            self._feature[key] = tf.strings.split(self._feature[key], "|")
            self._feature[key] = tf.sparse.slice(self._feature[key], [0, 0],
                                                 tf.cast([self._batch_size, din.MAX_SEQ_LENGTH], tf.int64))
        uid_emb, item_emb, his_item_emb, sequence_length = super(DIEN, self)._embedding_input_layer()
        # the tables the clicked items use (this scope reuses them)
        item_table = tf.get_variable("item_embedding_var",
                                     [self._columns["item_cate_column"]._num_buckets, din.EMBEDDING_DIM])
        category_table = tf.get_variable("category_embedding_var",
                                         [self._columns["category_cate_column"]._num_buckets, din.EMBEDDING_DIM])
        builder = din._LazyBuilder(self._feature)
        noclk_item = self._lookup(builder, self._columns["noclk_his_item_cate_column"], item_table)
        noclk_category = self._lookup(builder, self._columns["noclk_his_category_cate_column"], category_table)
        return uid_emb, item_emb, his_item_emb, tf.concat([noclk_item, noclk_category], 2), sequence_length

    def _auxiliary_net(self, in_, stag):
        net = tf.layers.batch_normalization(inputs=in_, name="bn1" + stag, reuse=tf.AUTO_REUSE)
        net = tf.nn.sigmoid(tf.layers.dense(net, 100, activation=None, name="f1" + stag, reuse=tf.AUTO_REUSE))
        net = tf.nn.sigmoid(tf.layers.dense(net, 50, activation=None, name="f2" + stag, reuse=tf.AUTO_REUSE))
        net = tf.layers.dense(net, 2, activation=None, name="f3" + stag, reuse=tf.AUTO_REUSE)
        return tf.nn.softmax(net) + 0.00000001

    def _auxiliary_loss(self, h_states, click_seq, noclick_seq, mask, stag):
        mask = tf.cast(mask, tf.float32)
        with tf.variable_scope("auxiliary_net"):
            click_prop = self._auxiliary_net(tf.concat([h_states, click_seq], -1), stag=stag)[:, :, 0]
            noclick_prop = self._auxiliary_net(tf.concat([h_states, noclick_seq], -1), stag=stag)[:, :, 0]
        click_loss = -tf.reshape(tf.log(click_prop), [-1, tf.shape(click_seq)[1]]) * mask
        noclick_loss = -tf.reshape(tf.log(1.0 - noclick_prop), [-1, tf.shape(noclick_seq)[1]]) * mask
        return tf.reduce_mean(click_loss + noclick_loss)

    def _create_model(self):
        with tf.variable_scope("input_layer", partitioner=self._input_layer_partitioner, reuse=tf.AUTO_REUSE):
            uid_emb, item_emb, his_item_emb, noclk_his_item_emb, sequence_length = self._embedding_input_layer()
            item_his_eb_sum = tf.reduce_sum(his_item_emb, 1)
            mask = tf.sequence_mask(sequence_length)
        with tf.variable_scope("rnn_1"):
            run_output_1, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(HIDDEN_SIZE), inputs=his_item_emb,
                                                sequence_length=sequence_length, dtype=tf.float32, scope="gru1")
        with tf.variable_scope("aux_loss", partitioner=self._dense_layer_partitioner):
            self._aux_loss = self._auxiliary_loss(run_output_1[:, :-1, :], his_item_emb[:, 1:, :],
                                                  noclk_his_item_emb[:, 1:, :], mask[:, 1:], stag="gru")
        with tf.variable_scope("attention_layer"):
            alphas = tf.reshape(self._attention_scores(item_emb, run_output_1, mask), [-1, tf.shape(run_output_1)[1]])
        with tf.variable_scope("rnn_2"):
            _, final_state2 = tf.nn.dynamic_rnn(VecAttGRUCell(HIDDEN_SIZE),
                                                inputs=[run_output_1, tf.expand_dims(alphas, -1)],
                                                sequence_length=sequence_length, dtype=tf.float32, scope="gru2")
        self._top_mlp(tf.concat([uid_emb, item_emb, item_his_eb_sum, item_emb * item_his_eb_sum, final_state2], 1),
                      self._dense_layer_partitioner)

    def _create_loss(self):
        super(DIEN, self)._create_loss()
        self.loss = self.loss + self._aux_loss


def build_model(features, labels, args, work_dir):
    return DIEN(build_feature_columns(din.write_vocabularies(args.data, work_dir)), features, labels)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=128, parse_csv=parse_csv)
