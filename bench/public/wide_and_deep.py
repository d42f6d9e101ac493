"""Wide & Deep written the way public TF 1.x model zoos write it (DeepRec's modelzoo/wide_and_deep/train.py
in its stock-TensorFlow mode, `--tf`): that recipe's shapes and API calls, on Criteo-format data.

    python wide_and_deep.py --data train.csv [--steps N] [--warmup N] [--batch-size 2048] [--seed S]

As the public recipe: every categorical column hashed into 10,000 buckets, embedded in 64 dimensions (128
for the eight widest columns) with the mean combiner; the numeric columns min-max scaled by constants; a
linear part over the hashed and numeric columns (`linear_model`, FTRL) and a 1024-512-256 MLP over the
embeddings and numerics (`input_layer`, Adam), each under a min-max variable partitioner (one part on a
single machine, as the recipe runs there); `tf.data` input that shuffles, batches 2048 lines, then decodes
them; a `MonitoredTrainingSession` with a stop hook, a logging hook and checkpoints at its start and end.
Initializers carry no op seeds, as the recipe writes them. `--optimizer adam` (the only one) names the
recipe's pair. Prints one JSON line, the fields of bench/models/common.py's.
"""
import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

import tensorflow as tf
from tensorflow.python.framework import versions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "models"))
import common  # noqa: E402  (the harness's tracing, as every bench program uses it)

CONTINUOUS_COLUMNS = ["I%d" % i for i in range(1, 14)]
CATEGORICAL_COLUMNS = ["C%d" % i for i in range(1, 27)]
LABEL_COLUMN = ["clicked"]
TRAIN_DATA_COLUMNS = LABEL_COLUMN + CONTINUOUS_COLUMNS + CATEGORICAL_COLUMNS
WIDE_COLUMNS = {"C3", "C4", "C10", "C12", "C16", "C21", "C24", "C26"}  # 128 dimensions; the rest 64
HASH_BUCKET_SIZE = 10000
# Min-max scaling by constants, as the recipe writes its normalizer (this data's counts: Poisson, mean <= 50).
NUMERIC_MIN = 0.0
NUMERIC_RANGE = 120.0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--optimizer", choices=["adam"], default="adam")
    parser.add_argument("--steps", type=int, default=100, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--eval-steps", type=int, default=10)
    parser.add_argument("--trace", help="after timing, trace three steps into this Chrome trace file")
    parser.add_argument("--deep-learning-rate", type=float, default=0.01)
    parser.add_argument("--linear-learning-rate", type=float, default=0.2)
    return parser.parse_args()


def build_model_input(filename, batch_size, shuffle=True):
    def parse_csv(value):
        cont_defaults = [[0.0] for _ in range(len(CONTINUOUS_COLUMNS))]
        cate_defaults = [[" "] for _ in range(len(CATEGORICAL_COLUMNS))]
        label_defaults = [[0]]
        columns = tf.io.decode_csv(value, record_defaults=label_defaults + cont_defaults + cate_defaults)
        all_columns = dict(zip(TRAIN_DATA_COLUMNS, columns))
        labels = all_columns.pop(LABEL_COLUMN[0])
        return all_columns, labels

    dataset = tf.data.TextLineDataset(filename)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=20000, seed=2021)
    dataset = dataset.repeat()
    dataset = dataset.batch(batch_size)
    dataset = dataset.map(parse_csv, num_parallel_calls=28)
    dataset = dataset.prefetch(2)
    return dataset


def build_feature_columns():
    def minmaxscaler(col):
        return (col - NUMERIC_MIN) / NUMERIC_RANGE

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


class WDL(object):
    def __init__(self, wide_column, deep_column, dnn_hidden_units, inputs, labels, linear_learning_rate,
                 deep_learning_rate):
        self._feature = inputs
        self._label = labels
        self._wide_column = wide_column
        self._deep_column = deep_column
        self._dnn_hidden_units = dnn_hidden_units
        self._linear_learning_rate = linear_learning_rate
        self._deep_learning_rate = deep_learning_rate
        self._input_layer_partitioner = tf.min_max_variable_partitioner(max_partitions=0,
                                                                       min_slice_size=8 << 20)
        self._dense_layer_partitioner = tf.min_max_variable_partitioner(max_partitions=0,
                                                                       min_slice_size=16 << 10)
        self._create_model()
        with tf.name_scope("head"):
            self._create_loss()
            self._create_optimizer()
            self._create_metrics()

    def _dnn(self, dnn_input, dnn_hidden_units=None, layer_name=""):
        for layer_id, num_hidden_units in enumerate(dnn_hidden_units):
            with tf.variable_scope(layer_name + "_%d" % layer_id, partitioner=self._dense_layer_partitioner,
                                   reuse=tf.AUTO_REUSE) as dnn_layer_scope:
                dnn_input = tf.layers.dense(dnn_input, units=num_hidden_units, activation=tf.nn.relu,
                                            name=dnn_layer_scope)
        return dnn_input

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

    def _create_loss(self):
        self._logits = tf.squeeze(self._logits)
        self.loss = tf.losses.sigmoid_cross_entropy(self._label, self._logits, scope="loss",
                                                    reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE)

    def _create_optimizer(self):
        self.global_step = tf.train.get_or_create_global_step()
        dnn_optimizer = tf.train.AdamOptimizer(learning_rate=self._deep_learning_rate, beta1=0.9, beta2=0.999,
                                               epsilon=1e-8)
        linear_optimizer = tf.train.FtrlOptimizer(learning_rate=self._linear_learning_rate,
                                                  l1_regularization_strength=0.0, l2_regularization_strength=0.0)
        # What implements tf.train.AdamOptimizer here: retf's fused kernel on the wheel.
        self.implementation = "tf.train.AdamOptimizer%s (dnn) + FtrlOptimizer (linear)" % (
            " (retf fused)" if type(dnn_optimizer).__module__.startswith("retf") else "")
        train_ops = []
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_ops.append(dnn_optimizer.minimize(self.loss, var_list=tf.get_collection(
                tf.GraphKeys.TRAINABLE_VARIABLES, scope="dnn"), global_step=self.global_step))
            train_ops.append(linear_optimizer.minimize(self.loss, var_list=tf.get_collection(
                tf.GraphKeys.TRAINABLE_VARIABLES, scope="linear")))
            self.train_op = tf.group(*train_ops)

    def _create_metrics(self):
        self.acc, self.acc_op = tf.metrics.accuracy(labels=self._label, predictions=self.output)
        self.auc, self.auc_op = tf.metrics.auc(labels=self._label, predictions=self.probability,
                                               num_thresholds=1000)


def main():
    args = parse_args()
    tf.logging.set_verbosity(tf.logging.ERROR)
    model_dir = tempfile.mkdtemp(prefix="wdl-")
    try:
        result = train(args, model_dir)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    print(json.dumps(result))


def train(args, model_dir):
    tf.set_random_seed(args.seed)
    train_steps = args.warmup + args.steps
    dataset = build_model_input(args.data, args.batch_size)
    iterator = tf.data.Iterator.from_structure(dataset.output_types, dataset.output_shapes)
    next_element = iterator.get_next()
    train_init_op = iterator.make_initializer(dataset)
    wide_column, deep_column = build_feature_columns()
    model = WDL(wide_column, deep_column, [1024, 512, 256], next_element[0], next_element[1],
                args.linear_learning_rate, args.deep_learning_rate)

    # Built before the session finalizes the graph: the evaluation's input, in file order.
    eval_init_op = iterator.make_initializer(build_model_input(args.data, args.batch_size, shuffle=False))
    sess_config = tf.ConfigProto(inter_op_parallelism_threads=0, intra_op_parallelism_threads=0)
    scaffold = tf.train.Scaffold(local_init_op=tf.group(tf.tables_initializer(), tf.local_variables_initializer(),
                                                        train_init_op),
                                 saver=tf.train.Saver(max_to_keep=1))
    hooks = [tf.train.StopAtStepHook(last_step=train_steps),
             tf.train.LoggingTensorHook({"steps": model.global_step, "loss": model.loss}, every_n_iter=100)]
    losses, windows = [], []
    with tf.train.MonitoredTrainingSession(master="", checkpoint_dir=model_dir, save_checkpoint_steps=train_steps,
                                           save_summaries_steps=None, log_step_count_steps=None, scaffold=scaffold,
                                           hooks=hooks, config=sess_config) as sess:
        for _ in range(args.warmup):
            losses.append(float(sess.run([model.loss, model.train_op])[0]))
        start = window_start = time.time()
        cpu_start = time.process_time()
        count = 0
        while not sess.should_stop():
            losses.append(float(sess.run([model.loss, model.train_op])[0]))
            count += 1
            if count % common.WINDOW == 0:
                now = time.time()
                windows.append(now - window_start)
                window_start = now
        elapsed = max(time.time() - start, 1e-9)
        cpu_seconds = time.process_time() - cpu_start
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    result = {
        "tensorflow": versions.__version__,
        "optimizer": model.implementation,
        "batch_size": args.batch_size, "steps": count, "seed": args.seed,
        "steps_per_sec": count / elapsed,
        "best_window_steps_per_sec": common.WINDOW / min(windows) if windows else count / elapsed,
        "examples_per_sec": count * args.batch_size / elapsed,
        "cpu_seconds_per_step": cpu_seconds / max(count, 1),
        "peak_rss_mib": peak_rss,
        "first_loss": losses[0], "last_loss": losses[-1], "losses": losses,
    }
    # The AUC over batches of the input in file order, from the checkpoint the session wrote at its end.
    with tf.Session(config=sess_config) as sess:
        scaffold.saver.restore(sess, tf.train.latest_checkpoint(model_dir))
        sess.run([scaffold.local_init_op, eval_init_op])
        for _ in range(args.eval_steps):
            sess.run(model.auc_op)
        result["auc"] = float(sess.run(model.auc))
        if args.trace:
            sess.run(train_init_op)
            result["traced_step_ms"], result["top_ops"] = common.trace_steps(sess, [model.loss, model.train_op],
                                                                             args.trace)
    return result


if __name__ == "__main__":
    main()
