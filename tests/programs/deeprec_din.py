"""A DIN model written the way DeepRec's model zoo writes it (modelzoo/din/train.py's flags and API), on Taobao-like
data it writes into WORK_DIR (tab-separated rows and vocabulary files, as the model zoo's data preparation does).

    python deeprec_din.py WORK_DIR --checkpoint DIR [--ev] [--ev_filter counter|cbf] [--ev_elimination l2|gstep]
        [--optimizer adamasync|adam|adagraddecay] [--emb_fusion true|false] [--smartstaged true|false]
        [--op_fusion true|false] [--partitions N] [--steps N] [--tf]

Without --tf the DeepRec API is used as DeepRec's script uses it: the item and category tables made by
tf.get_embedding_variable (--ev) in a variable scope with a partitioner and reuse=tf.AUTO_REUSE, shared by the
target and the behaviour sequence, read from the columns' _get_sparse_tensors by embedding_ops'
fused_safe_embedding_lookup_sparse (--emb_fusion); the user id by categorical_column_with_embedding (--ev);
AdamAsyncOptimizer over clipped gradients; tf.staged with tf.make_prefetch_hook; DeepRec's ConfigProto fields.
--partitions N stands for the number of parameter servers the model zoo's min_max_variable_partitioner spreads the
input layer over. Training runs in a MonitoredTrainingSession whose Scaffold initializes the tables and the
reinitializable iterator; evaluation restores the last checkpoint through a ChiefSessionCreator and computes
tf.metrics.auc. Prints one JSON line: the losses, the AUC, the steps, and what the checkpoint holds of the item
table.
"""
import argparse
import collections
import json
import math
import os

import numpy as np
import tensorflow as tf
from tensorflow.python.feature_column import utils as fc_utils
from tensorflow.python.feature_column.feature_column import _LazyBuilder
from tensorflow.python.ops import partitioned_variables

LABEL_COLUMN = ["CLICKED"]
UNSEQ_COLUMNS = ["UID", "ITEM", "CATEGORY"]
SEQ_COLUMNS = ["HISTORY_ITEM", "HISTORY_CATEGORY"]
TRAIN_DATA_COLUMNS = LABEL_COLUMN + UNSEQ_COLUMNS + SEQ_COLUMNS
EMBEDDING_DIM = 18
ATTENTION_SIZE = 36
MAX_SEQ_LENGTH = 20
USERS, ITEMS, CATEGORIES = 400, 3000, 40


def boolean_string(value):
    if value not in ("true", "false", "True", "False"):
        raise ValueError("Not a valid boolean string")
    return value in ("true", "True")


parser = argparse.ArgumentParser()
parser.add_argument("data_location")
parser.add_argument("--checkpoint", required=True)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--learning_rate", type=float, default=0.002)
parser.add_argument("--seed", type=int, default=2021)
parser.add_argument("--save_steps", type=int, default=50)
parser.add_argument("--optimizer", choices=["adamasync", "adam", "adagraddecay"], default="adamasync")
parser.add_argument("--ev", type=boolean_string, nargs="?", const=True, default=False)
parser.add_argument("--ev_filter", choices=[None, "counter", "cbf"], default=None)
parser.add_argument("--ev_elimination", choices=[None, "l2", "gstep"], default=None)
parser.add_argument("--emb_fusion", type=boolean_string, default=True)
parser.add_argument("--smartstaged", type=boolean_string, default=True)
parser.add_argument("--op_fusion", type=boolean_string, default=True)
parser.add_argument("--partitions", type=int, default=0)
parser.add_argument("--input_layer_partitioner", type=int, default=8)
parser.add_argument("--tf", action="store_true")
args = parser.parse_args()


def write_data(location):
    """Each user favours three categories: the behaviour sequence is mostly from them, and a target item is clicked
    when its category is among them (with some noise). Items of one category share it: item i is in i mod 40."""
    rng = np.random.RandomState(7)
    favourites = [rng.choice(CATEGORIES, 3, replace=False) for _ in range(USERS)]

    def item_in(categories):
        category = int(rng.choice(categories))
        return category + CATEGORIES * int(rng.randint(ITEMS // CATEGORIES)), category

    def rows(count):
        for _ in range(count):
            user = int(rng.randint(USERS))
            history = [item_in(favourites[user] if rng.uniform() < 0.8 else np.arange(CATEGORIES))
                       for _ in range(rng.randint(3, MAX_SEQ_LENGTH + 6))]
            item, category = item_in(favourites[user] if rng.uniform() < 0.5 else np.arange(CATEGORIES))
            clicked = (category in favourites[user]) != (rng.uniform() < 0.1)
            yield "\t".join([str(int(clicked)), "U%d" % user, "M%d" % item, "C%d" % category,
                             " ".join("M%d" % i for i, _ in history), " ".join("C%d" % c for _, c in history)])

    for name, count in (("local_train_splitByUser", 12800), ("local_test_splitByUser", 2048)):
        with open(os.path.join(location, name), "w") as out:
            out.write("\n".join(rows(count)) + "\n")
    for name, prefix, count in (("uid_voc.txt", "U", USERS), ("mid_voc.txt", "M", ITEMS),
                                ("cat_voc.txt", "C", CATEGORIES)):
        with open(os.path.join(location, name), "w") as out:
            out.write("".join("%s%d\n" % (prefix, i) for i in range(count)))


class DIN(object):
    def __init__(self, feature_column, inputs, input_layer_partitioner):
        self._feature, self._label = inputs
        self._columns = feature_column
        self._partitioner = input_layer_partitioner
        self._batch_size = tf.shape(self._label)[0]
        self._create_model()
        with tf.name_scope("head"):
            self._create_loss()
            self._create_optimizer()
            self._create_metrics()

    def _prelu(self, x, scope=""):
        with tf.variable_scope(name_or_scope=scope, default_name="prelu"):
            alpha = tf.get_variable("prelu_" + scope, shape=x.get_shape()[-1], dtype=x.dtype,
                                    initializer=tf.constant_initializer(0.1))
            return tf.nn.relu(x) + alpha * (x - abs(x)) * 0.5

    def _attention(self, query, facts, mask):
        facts_size = facts.get_shape().as_list()[-1]
        query = self._prelu(tf.layers.dense(query, facts_size, activation=None, name="f1_att_query"))
        queries = tf.reshape(tf.tile(query, [1, tf.shape(facts)[1]]), tf.shape(facts))
        din_all = tf.concat([queries, facts, queries - facts, queries * facts], axis=-1)
        hidden = tf.layers.dense(din_all, 80, activation=tf.nn.sigmoid, name="f1_att")
        hidden = tf.layers.dense(hidden, 40, activation=tf.nn.sigmoid, name="f2_att")
        scores = tf.reshape(tf.layers.dense(hidden, 1, activation=None, name="f3_att"), [-1, 1, tf.shape(facts)[1]])
        paddings = tf.ones_like(scores) * (-2 ** 32 + 1)
        scores = tf.nn.softmax(tf.where(tf.expand_dims(mask, 1), scores, paddings))
        return tf.matmul(scores, facts)

    def _lookup(self, builder, column, table, get_seq_len=False):
        sparse_tensors = column._get_sparse_tensors(builder)
        ids, weights = sparse_tensors.id_tensor, sparse_tensors.weight_tensor
        if args.emb_fusion and not args.tf:
            from tensorflow.python.ops.embedding_ops import fused_safe_embedding_lookup_sparse
            embedding = fused_safe_embedding_lookup_sparse(embedding_weights=table, sparse_ids=ids,
                                                           sparse_weights=weights)
        else:
            embedding = tf.nn.safe_embedding_lookup_sparse(embedding_weights=table, sparse_ids=ids,
                                                           sparse_weights=weights)
        if get_seq_len:
            return embedding, fc_utils.sequence_length_from_sparse_tensor(ids)
        return embedding

    def _embedding_input_layer(self):
        for key in SEQ_COLUMNS:
            self._feature[key] = tf.strings.split(self._feature[key], "")
            self._feature[key] = tf.sparse.slice(self._feature[key], [0, 0],
                                                 tf.cast([self._batch_size, MAX_SEQ_LENGTH], tf.int64))
        uid_emb = tf.feature_column.input_layer(self._feature, self._columns["uid_emb_column"])
        if args.ev and not args.tf:
            item_table = tf.get_embedding_variable("item_embedding_var", EMBEDDING_DIM, ev_option=self._columns["ev_opt"])
            category_table = tf.get_embedding_variable("category_embedding_var", EMBEDDING_DIM,
                                                       ev_option=self._columns["ev_opt"])
        else:
            item_table = tf.get_variable("item_embedding_var",
                                         [self._columns["item_cate_column"]._num_buckets, EMBEDDING_DIM])
            category_table = tf.get_variable("category_embedding_var",
                                             [self._columns["category_cate_column"]._num_buckets, EMBEDDING_DIM])
        builder = _LazyBuilder(self._feature)
        item_emb = tf.concat([self._lookup(builder, self._columns["item_cate_column"], item_table),
                              self._lookup(builder, self._columns["category_cate_column"], category_table)], 1)
        his_item, item_length = self._lookup(builder, self._columns["his_item_cate_column"], item_table, True)
        his_category, _ = self._lookup(builder, self._columns["his_category_cate_column"], category_table, True)
        return uid_emb, item_emb, tf.concat([his_item, his_category], 2), item_length

    def _create_model(self):
        with tf.variable_scope("input_layer", partitioner=self._partitioner, reuse=tf.AUTO_REUSE):
            uid_emb, item_emb, his_item_emb, sequence_length = self._embedding_input_layer()
            item_his_eb_sum = tf.reduce_sum(his_item_emb, 1)
            mask = tf.sequence_mask(sequence_length)
        with tf.variable_scope("attention_layer"):
            att_fea = tf.reduce_sum(self._attention(item_emb, his_item_emb, mask), 1)
        top_input = tf.concat([uid_emb, item_emb, item_his_eb_sum, item_emb * item_his_eb_sum, att_fea], 1)
        with tf.variable_scope("top_mlp_layer", reuse=tf.AUTO_REUSE):
            net = tf.layers.batch_normalization(inputs=top_input, name="bn1")
            net = tf.nn.relu(tf.layers.dense(net, 200, activation=None, name="dnn1"))
            net = tf.nn.relu(tf.layers.dense(net, 80, activation=None, name="dnn2"))
            net = tf.layers.dense(net, 2, activation=None, name="dnn3")
            self._logits = tf.layers.dense(net, 1, activation=None, name="logits")
        self.probability = tf.math.sigmoid(self._logits)

    def _create_loss(self):
        self._logits = tf.squeeze(self._logits)
        self.loss = tf.losses.sigmoid_cross_entropy(self._label, self._logits, scope="loss",
                                                    reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE)

    def _create_optimizer(self):
        self.global_step = tf.train.get_or_create_global_step()
        if args.tf or args.optimizer == "adam":
            optimizer = tf.train.AdamOptimizer(learning_rate=args.learning_rate)
        elif args.optimizer == "adamasync":
            optimizer = tf.train.AdamAsyncOptimizer(learning_rate=args.learning_rate)
        else:
            optimizer = tf.train.AdagradDecayOptimizer(learning_rate=args.learning_rate, global_step=self.global_step)
        gradients = optimizer.compute_gradients(self.loss)
        clipped = [(tf.clip_by_norm(grad, 5), var) for grad, var in gradients if grad is not None]
        self.train_op = optimizer.apply_gradients(clipped, global_step=self.global_step)

    def _create_metrics(self):
        self.auc, self.auc_op = tf.metrics.auc(labels=self._label, predictions=self.probability, num_thresholds=1000)


def build_model_input(filename, batch_size, num_epochs):
    def parse_csv(value):
        columns = tf.io.decode_csv(value, record_defaults=[[0]] + [[" "] for _ in range(5)], field_delim="\t")
        features = collections.OrderedDict(zip(TRAIN_DATA_COLUMNS, columns))
        return features, features.pop(LABEL_COLUMN[0])

    dataset = tf.data.TextLineDataset(filename).shuffle(buffer_size=20000, seed=args.seed).repeat(num_epochs)
    return dataset.batch(batch_size).map(parse_csv, num_parallel_calls=2).prefetch(2)


def build_feature_columns(data_location):
    uid_file, mid_file, cat_file = (os.path.join(data_location, name)
                                    for name in ("uid_voc.txt", "mid_voc.txt", "cat_voc.txt"))
    uid_cate_column = tf.feature_column.categorical_column_with_vocabulary_file("UID", uid_file, default_value=0)
    ev_opt = None
    if not args.tf:
        evict_opt = tf.GlobalStepEvict(steps_to_live=4000) if args.ev_elimination == "gstep" else \
            tf.L2WeightEvict(l2_weight_threshold=1.0) if args.ev_elimination == "l2" else None
        if args.ev_filter == "cbf":
            filter_option = tf.CBFFilter(filter_freq=3, max_element_size=2 ** 30, false_positive_probability=0.01,
                                         counter_type=tf.int64)
        elif args.ev_filter == "counter":
            filter_option = tf.CounterFilter(filter_freq=3)
        else:
            filter_option = None
        ev_opt = tf.EmbeddingVariableOption(evict_option=evict_opt, filter_option=filter_option)
        if args.ev:
            uid_cate_column = tf.feature_column.categorical_column_with_embedding("UID", dtype=tf.string,
                                                                                  ev_option=ev_opt)
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
        "ev_opt": ev_opt,
    }


write_data(args.data_location)
train_file = os.path.join(args.data_location, "local_train_splitByUser")
test_file = os.path.join(args.data_location, "local_test_splitByUser")
test_steps = math.ceil(sum(1 for _ in open(test_file)) / args.batch_size)
tf.set_random_seed(args.seed)
train_dataset = build_model_input(train_file, args.batch_size, None)
test_dataset = build_model_input(test_file, args.batch_size, 1)
iterator = tf.data.Iterator.from_structure(tf.data.get_output_types(train_dataset),
                                           tf.data.get_output_shapes(test_dataset))
next_element = iterator.get_next()
train_init_op = iterator.make_initializer(train_dataset)
test_init_op = iterator.make_initializer(test_dataset)
feature_column = build_feature_columns(args.data_location)
input_layer_partitioner = partitioned_variables.min_max_variable_partitioner(
    max_partitions=args.partitions, min_slice_size=args.input_layer_partitioner << 20) if args.partitions else None

sess_config = tf.ConfigProto(inter_op_parallelism_threads=1, intra_op_parallelism_threads=1)
hooks = []
if args.smartstaged and not args.tf:
    next_element = tf.staged(next_element, num_threads=2, capacity=8)
    sess_config.graph_options.optimizer_options.do_smart_stage = True
    hooks.append(tf.make_prefetch_hook())
if args.op_fusion and not args.tf:
    sess_config.graph_options.optimizer_options.do_op_fusion = True
model = DIN(feature_column, next_element, input_layer_partitioner)

losses = []
scaffold = tf.train.Scaffold(local_init_op=tf.group(tf.tables_initializer(), tf.local_variables_initializer(),
                                                    train_init_op),
                             saver=tf.train.Saver(max_to_keep=2))
with tf.train.MonitoredTrainingSession(checkpoint_dir=args.checkpoint, save_checkpoint_steps=args.save_steps,
                                       hooks=hooks + [tf.train.StopAtStepHook(last_step=args.steps)],
                                       scaffold=scaffold, save_summaries_steps=None, log_step_count_steps=None,
                                       config=sess_config) as sess:
    start_step = sess.run(model.global_step)
    while not sess.should_stop():
        losses.append(float(sess.run([model.loss, model.train_op])[0]))

scaffold = tf.train.Scaffold(local_init_op=tf.group(tf.tables_initializer(), tf.local_variables_initializer(),
                                                    test_init_op))
creator = tf.train.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=args.checkpoint, config=sess_config)
with tf.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
    for _ in range(test_steps):
        eval_auc = sess.run(model.auc_op)
    step = sess.run(model.global_step)

checkpoint = tf.train.latest_checkpoint(args.checkpoint)
reader = tf.train.load_checkpoint(checkpoint)
table = "input_layer/item_embedding_var"
item_tensors = sorted(n for n in reader.get_variable_to_shape_map() if n.startswith(table))
report = {"losses": losses, "start_step": int(start_step), "step": int(step), "auc": float(eval_auc),
          "item_tensors": item_tensors}
keys = [n for n in item_tensors if n.endswith("-keys") and "/Adam" not in n]
report["item_keys"] = {n: sorted(int(k) for k in reader.get_tensor(n)) for n in keys}
print(json.dumps(report))
