"""DIN written the way public TF 1.x model zoos write it (DeepRec's modelzoo/din/train.py in its stock-TensorFlow
mode, `--tf`): that recipe's shapes and API calls, on the Taobao-like CSV of bench/models/make_taobao_data.py.

    python din.py --data taobao.csv [--steps N] [--warmup N] [--batch-size 2048] [--seed S]

As the public recipe: the user, the target item and its category, and the behaviour sequence of items and
categories, each a column over a vocabulary file (written, as the recipe's data preparation writes them, from
the ids the data holds); 18-dimensional embeddings; the user's through `input_layer`, the items' and
categories' from two tables the target and the sequence share, looked up with `safe_embedding_lookup_sparse`
on the columns' sparse ids; the sequence split with `tf.strings.split` and cut to its last 50 with
`tf.sparse.slice`. DIN's activation unit: a PReLU projection of the target, tiled over the sequence,
[q, k, q - k, q * k] through an 80-40-1 sigmoid MLP, a masked softmax, then the weighted sum; a batch-normalized (inference-mode, as the recipe
calls it) 200-80-2 MLP over the user, the target, the sequence's sum, their product and the attention; a sigmoid
cross-entropy; one Adam (learning rate 0.001) over gradients clipped to norm 5. The CSV's other columns are
read and left unused. Input, session and JSON line as bench/public/recipe.py; initializers without op seeds.
"""
import os
import sys

import tensorflow as tf
from tensorflow.python.feature_column import utils as fc_utils
from tensorflow.python.feature_column.feature_column import _LazyBuilder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipe import Model, adam_label, main  # noqa: E402

# The CSV's columns (bench/models/taobao.py COLUMNS); the recipe's names for the five it reads.
CSV_COLUMNS = ["clk", "buy", "user_id", "cms_segid", "cms_group_id", "age_level", "pvalue_level", "shopping_level",
               "occupation", "new_user_class_level", "adgroup_id", "cate_id", "campaign_id", "customer", "brand",
               "price", "pid", "hist_item", "hist_cate"]
RECIPE_NAMES = {"clk": "CLICKED", "user_id": "UID", "adgroup_id": "ITEM", "cate_id": "CATEGORY",
                "hist_item": "HISTORY_ITEM", "hist_cate": "HISTORY_CATEGORY"}
SEQ_COLUMNS = ["HISTORY_ITEM", "HISTORY_CATEGORY"]
EMBEDDING_DIM = 18
MAX_SEQ_LENGTH = 50
LEARNING_RATE = 0.001


def parse_csv(value):
    defaults = [[0], [0]] + [[" "] for _ in CSV_COLUMNS[2:]]
    columns = dict(zip(CSV_COLUMNS, tf.io.decode_csv(value, record_defaults=defaults)))
    features = {RECIPE_NAMES[name]: columns[name] for name in RECIPE_NAMES if name != "clk"}
    return features, columns["clk"]


def write_vocabularies(data, work_dir):
    """uid_voc.txt, mid_voc.txt and cat_voc.txt: every user, item and category id in the data, one a line."""
    users, items, categories = set(), set(), set()
    with open(data) as lines:
        for line in lines:
            fields = line.rstrip("\n").split(",")
            users.add(fields[2])
            items.add(fields[10])
            items.update(fields[17].split("|"))
            categories.add(fields[11])
            categories.update(fields[18].split("|"))
    paths = {}
    for name, ids in (("uid_voc.txt", users), ("mid_voc.txt", items), ("cat_voc.txt", categories)):
        paths[name] = os.path.join(work_dir, name)
        with open(paths[name], "w") as out:
            out.write("".join(i + "\n" for i in sorted(ids)))
    return paths


def build_feature_columns(vocabularies):
    uid_file, mid_file, cat_file = (vocabularies[n] for n in ("uid_voc.txt", "mid_voc.txt", "cat_voc.txt"))
    uid_cate_column = tf.feature_column.categorical_column_with_vocabulary_file("UID", uid_file, default_value=0)
    return {
        "uid_emb_column": tf.feature_column.embedding_column(uid_cate_column, dimension=EMBEDDING_DIM),
        "item_cate_column": tf.feature_column.categorical_column_with_vocabulary_file("ITEM", mid_file,
                                                                                      default_value=0),
        "category_cate_column": tf.feature_column.categorical_column_with_vocabulary_file("CATEGORY", cat_file,
                                                                                          default_value=0),
        "his_item_cate_column": tf.feature_column.sequence_categorical_column_with_vocabulary_file(
            "HISTORY_ITEM", mid_file, default_value=0),
        "his_category_cate_column": tf.feature_column.sequence_categorical_column_with_vocabulary_file(
            "HISTORY_CATEGORY", cat_file, default_value=0),
    }


class DIN(Model):
    def __init__(self, feature_columns, inputs, labels):
        self._columns = feature_columns
        self._batch_size = tf.shape(labels)[0]
        super(DIN, self).__init__(inputs, labels)

    def _prelu(self, x, scope=""):
        with tf.variable_scope(name_or_scope=scope, default_name="prelu"):
            alpha = tf.get_variable("prelu_" + scope, shape=x.get_shape()[-1], dtype=x.dtype,
                                    initializer=tf.constant_initializer(0.1))
            return tf.nn.relu(x) + alpha * (x - abs(x)) * 0.5

    def _attention(self, query, facts, mask):
        return tf.matmul(self._attention_scores(query, facts, mask), facts)

    def _attention_scores(self, query, facts, mask):
        """DIN's activation unit: the masked softmax weights of the sequence's steps, [B, 1, T]."""
        facts_size = facts.get_shape().as_list()[-1]
        query = self._prelu(tf.layers.dense(query, facts_size, activation=None, name="f1_att_query"))
        queries = tf.reshape(tf.tile(query, [1, tf.shape(facts)[1]]), tf.shape(facts))
        din_all = tf.concat([queries, facts, queries - facts, queries * facts], axis=-1)
        hidden = tf.layers.dense(din_all, 80, activation=tf.nn.sigmoid, name="f1_att")
        hidden = tf.layers.dense(hidden, 40, activation=tf.nn.sigmoid, name="f2_att")
        scores = tf.layers.dense(hidden, 1, activation=None, name="f3_att")
        scores = tf.reshape(scores, [-1, 1, tf.shape(facts)[1]])
        paddings = tf.ones_like(scores) * (-2 ** 32 + 1)
        return tf.nn.softmax(tf.where(tf.expand_dims(mask, 1), scores, paddings))

    def _lookup(self, builder, column, table, get_seq_len=False):
        sparse_tensors = column._get_sparse_tensors(builder)
        ids = sparse_tensors.id_tensor
        embedding = tf.nn.safe_embedding_lookup_sparse(embedding_weights=table, sparse_ids=ids,
                                                       sparse_weights=sparse_tensors.weight_tensor)
        if get_seq_len:
            return embedding, fc_utils.sequence_length_from_sparse_tensor(ids)
        return embedding

    def _embedding_input_layer(self):
        for key in SEQ_COLUMNS:
            self._feature[key] = tf.strings.split(self._feature[key], "|")
            self._feature[key] = tf.sparse.slice(self._feature[key], [0, 0],
                                                 tf.cast([self._batch_size, MAX_SEQ_LENGTH], tf.int64))
        uid_emb = tf.feature_column.input_layer(self._feature, self._columns["uid_emb_column"])
        item_table = tf.get_variable("item_embedding_var",
                                     [self._columns["item_cate_column"]._num_buckets, EMBEDDING_DIM])
        category_table = tf.get_variable("category_embedding_var",
                                         [self._columns["category_cate_column"]._num_buckets, EMBEDDING_DIM])
        builder = _LazyBuilder(self._feature)
        item_emb = tf.concat([self._lookup(builder, self._columns["item_cate_column"], item_table),
                              self._lookup(builder, self._columns["category_cate_column"], category_table)], 1)
        his_item, sequence_length = self._lookup(builder, self._columns["his_item_cate_column"], item_table, True)
        his_category, _ = self._lookup(builder, self._columns["his_category_cate_column"], category_table, True)
        return uid_emb, item_emb, tf.concat([his_item, his_category], 2), sequence_length

    def _create_model(self):
        with tf.variable_scope("input_layer", partitioner=self._input_layer_partitioner, reuse=tf.AUTO_REUSE):
            uid_emb, item_emb, his_item_emb, sequence_length = self._embedding_input_layer()
            item_his_eb_sum = tf.reduce_sum(his_item_emb, 1)
            mask = tf.sequence_mask(sequence_length)
        with tf.variable_scope("attention_layer"):
            att_fea = tf.reduce_sum(self._attention(item_emb, his_item_emb, mask), 1)
        self._top_mlp(tf.concat([uid_emb, item_emb, item_his_eb_sum, item_emb * item_his_eb_sum, att_fea], 1))

    def _top_mlp(self, top_input, partitioner=None):
        """The batch-normalized 200-80-2 MLP to the logit, and the probability and prediction."""
        with tf.variable_scope("top_mlp_layer", partitioner=partitioner, reuse=tf.AUTO_REUSE):
            net = tf.layers.batch_normalization(inputs=top_input, name="bn1")
            net = tf.nn.relu(tf.layers.dense(net, 200, activation=None, name="dnn1"))
            net = tf.nn.relu(tf.layers.dense(net, 80, activation=None, name="dnn2"))
            net = tf.layers.dense(net, 2, activation=None, name="dnn3")
            self._logits = tf.layers.dense(net, 1, activation=None, name="logits")
        self.probability = tf.math.sigmoid(self._logits)
        self.output = tf.round(self.probability)

    def _create_optimizer(self):
        self.global_step = tf.train.get_or_create_global_step()
        optimizer = tf.train.AdamOptimizer(learning_rate=LEARNING_RATE)
        self.implementation = adam_label(optimizer)
        gradients = optimizer.compute_gradients(self.loss)
        clipped = [(tf.clip_by_norm(grad, 5), var) for grad, var in gradients if grad is not None]
        self.train_op = optimizer.apply_gradients(clipped, global_step=self.global_step)


def build_model(features, labels, args, work_dir):
    return DIN(build_feature_columns(write_vocabularies(args.data, work_dir)), features, labels)


if __name__ == "__main__":
    main(build_model, __doc__.splitlines()[0], batch_size=2048, parse_csv=parse_csv)
