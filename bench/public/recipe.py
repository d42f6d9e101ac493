"""What the public-style programs share, as the public model zoos' scripts each repeat it: the CSV input
(shuffled, repeated, batched, then decoded; the Criteo columns unless a program gives its own), the
MonitoredTrainingSession loop with its stop and logging hooks and checkpoints, and the harness's one JSON line
(the fields of bench/models/common.py's).

A program's model subclasses `Model`, as the recipes' model classes share their skeleton, and has `loss`,
`train_op`, `global_step`, `auc` / `auc_op` (tf.metrics.auc) and `implementation` (what trains it, as the JSON
names it). `build_model(features, labels, args, work_dir)` makes it: `args` the parsed options (`args.data` the input
file, and any option the program adds), `work_dir` a folder of the run's own (for files the recipe prepares from the
data, as vocabularies).
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
HASH_BUCKET_SIZE = 10000
# The W&D and DCN-V2 recipes' embedding widths: 128 for these eight columns, 64 for the rest.
WIDE_COLUMNS = {"C3", "C4", "C10", "C12", "C16", "C21", "C24", "C26"}
# Min-max scaling by constants, as those recipes write their normalizer (this data's counts: Poisson, mean <= 50).
NUMERIC_MIN = 0.0
NUMERIC_RANGE = 120.0


def minmaxscaler(col):
    return (col - NUMERIC_MIN) / NUMERIC_RANGE


class Model(object):
    """The recipes' skeleton: min-max partitioners (one part on a single machine), the model, then under `head` the
    loss, the optimizer and the metrics."""

    def __init__(self, inputs, labels):
        self._feature = inputs
        self._label = labels
        self._input_layer_partitioner = tf.min_max_variable_partitioner(max_partitions=0, min_slice_size=8 << 20)
        self._dense_layer_partitioner = tf.min_max_variable_partitioner(max_partitions=0, min_slice_size=16 << 10)
        self._create_model()
        with tf.name_scope("head"):
            self._create_loss()
            self._create_optimizer()
            self._create_metrics()

    def _dnn(self, dnn_input, dnn_hidden_units, layer_name, batch_norm=False):
        for layer_id, num_hidden_units in enumerate(dnn_hidden_units):
            with tf.variable_scope(layer_name + "_%d" % layer_id, partitioner=self._dense_layer_partitioner,
                                   reuse=tf.AUTO_REUSE) as dnn_layer_scope:
                dnn_input = tf.layers.dense(dnn_input, units=num_hidden_units, activation=tf.nn.relu,
                                            name=dnn_layer_scope)
                if batch_norm:
                    dnn_input = tf.layers.batch_normalization(dnn_input, training=True, trainable=True)
        return dnn_input

    def _train_with_adam(self, learning_rate, after_update_ops=True):
        """One tf.train.AdamOptimizer minimizing the loss, as most recipes train: after the batch normalizations'
        moving-average updates (`UPDATE_OPS`), unless the recipe's train op leaves them out."""
        self.global_step = tf.train.get_or_create_global_step()
        optimizer = tf.train.AdamOptimizer(learning_rate=learning_rate)
        self.implementation = adam_label(optimizer)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS) if after_update_ops else []):
            self.train_op = optimizer.minimize(self.loss, global_step=self.global_step)

    def _create_loss(self):
        """The click's sigmoid cross-entropy over `_logits`, as the W&D and DIN recipes write it (DeepFM's differs)."""
        self._logits = tf.squeeze(self._logits)
        self.loss = tf.losses.sigmoid_cross_entropy(self._label, self._logits, scope="loss",
                                                    reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE)

    def _create_metrics(self):
        self.acc, self.acc_op = tf.metrics.accuracy(labels=self._label, predictions=self.output)
        self.auc, self.auc_op = tf.metrics.auc(labels=self._label, predictions=self.probability,
                                               num_thresholds=1000)


def parse_args(description, batch_size, add_arguments):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True)
    parser.add_argument("--optimizer", choices=["adam"], default="adam", help="the recipe's own optimizers")
    parser.add_argument("--steps", type=int, default=100, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--eval-steps", type=int, default=10)
    parser.add_argument("--trace", help="after timing, trace three steps into this Chrome trace file")
    if add_arguments:
        add_arguments(parser)
    return parser.parse_args()


def parse_criteo(value):
    cont_defaults = [[0.0] for _ in range(len(CONTINUOUS_COLUMNS))]
    cate_defaults = [[" "] for _ in range(len(CATEGORICAL_COLUMNS))]
    label_defaults = [[0]]
    columns = tf.io.decode_csv(value, record_defaults=label_defaults + cont_defaults + cate_defaults)
    all_columns = dict(zip(TRAIN_DATA_COLUMNS, columns))
    labels = all_columns.pop(LABEL_COLUMN[0])
    return all_columns, labels


def build_model_input(filename, batch_size, shuffle_buffer=20000, parse_csv=parse_criteo):
    dataset = tf.data.TextLineDataset(filename)
    if shuffle_buffer:
        dataset = dataset.shuffle(buffer_size=shuffle_buffer, seed=2021)
    dataset = dataset.repeat()
    dataset = dataset.batch(batch_size)
    dataset = dataset.map(parse_csv, num_parallel_calls=28)
    dataset = dataset.prefetch(2)
    return dataset


def main(build_model, description, batch_size, parse_csv=parse_criteo, shuffle_buffer=20000, add_arguments=None):
    """Trains `build_model`'s model on --data: `shuffle_buffer` the lines the recipe shuffles its training input
    over (0: it does not shuffle), `add_arguments(parser)` the program's own options."""
    args = parse_args(description, batch_size, add_arguments)
    tf.logging.set_verbosity(tf.logging.ERROR)
    work_dir = tempfile.mkdtemp(prefix="recipe-")
    try:
        result = train(args, build_model, parse_csv, shuffle_buffer, work_dir)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    print(json.dumps(result))


def train(args, build_model, parse_csv, shuffle_buffer, work_dir):
    tf.set_random_seed(args.seed)
    train_steps = args.warmup + args.steps
    model_dir = os.path.join(work_dir, "model")
    dataset = build_model_input(args.data, args.batch_size, shuffle_buffer=shuffle_buffer, parse_csv=parse_csv)
    iterator = tf.data.Iterator.from_structure(dataset.output_types, dataset.output_shapes)
    next_element = iterator.get_next()
    train_init_op = iterator.make_initializer(dataset)
    model = build_model(next_element[0], next_element[1], args, work_dir)
    # Built before the session finalizes the graph: the evaluation's input, in file order.
    eval_init_op = iterator.make_initializer(build_model_input(args.data, args.batch_size, shuffle_buffer=0,
                                                               parse_csv=parse_csv))

    sess_config = tf.ConfigProto(inter_op_parallelism_threads=0, intra_op_parallelism_threads=0)
    scaffold = tf.train.Scaffold(local_init_op=tf.group(tf.tables_initializer(), tf.local_variables_initializer(),
                                                        train_init_op),
                                 saver=tf.train.Saver(max_to_keep=1))
    hooks = [tf.train.StopAtStepHook(last_step=train_steps),
             tf.train.LoggingTensorHook({"steps": model.global_step, "loss": model.loss}, every_n_iter=100)]
    losses, windows = [], []
    # Checkpoints as the recipe saves them, at the start and at the end, but the last save when the session closes,
    # after the timed steps: in a real run it is one save in thousands of steps, not one in this run's few dozen.
    with tf.train.MonitoredTrainingSession(master="", checkpoint_dir=model_dir, save_checkpoint_steps=train_steps + 1,
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
        sess.run(scaffold.local_init_op)
        sess.run(eval_init_op)  # after the local init, which points the iterator at the training input
        for _ in range(args.eval_steps):
            sess.run(model.auc_op)
        result["auc"] = float(sess.run(model.auc))
        if args.trace:
            sess.run(train_init_op)
            result["traced_step_ms"], result["top_ops"] = common.trace_steps(sess, [model.loss, model.train_op],
                                                                             args.trace)
    return result


def adam_label(optimizer):
    """tf.train.AdamOptimizer, and whether retf's fused kernel implements it (the wheel)."""
    return "tf.train.AdamOptimizer" + (" (retf fused)" if type(optimizer).__module__.startswith("retf") else "")
