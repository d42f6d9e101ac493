"""What every model program shares: the options, the optimizers, seeds, the timed loop, AUC, tracing.

Written for TensorFlow 1.15 (`import tensorflow as tf` being the 1.x API), Python 3.6. A data module
(criteo.py, taobao.py) supplies `input_fn(path, batch_size, skip)` returning the features and an ordered
dict of labels ([batch, 1] floats) and its CSV columns with their defaults; a model supplies `logits(features)`:
one [batch, 1] tensor (for the first label) or a dict of them by label (multi-task). `main` trains and prints one
JSON line; with --export it also writes the trained model as a SavedModel that takes tf.Examples, as TF Serving
does, and a request of serialized examples beside it.
"""
import argparse
import base64
import collections
import json
import math
import os
import resource
import time

import tensorflow as tf
from tensorflow.python.framework import versions

WINDOW = 10
OPTIMIZERS = ["adam", "adagrad", "lazyadam", "ftrl", "sgd"]
SEED = [1]  # --seed
HASH_SCALE = [1]  # --hash-scale: every hash bucket count divided by it (small tables for tests)
GRAPH_SEEDS = [False]  # --graph-seeds: initializers without op seeds, as most model zoo scripts write them
EV = [False]  # --ev: DeepRec's EmbeddingVariables for the categorical embeddings (a deeprec_api wheel)


def seed(offset):
    """The op-level seed of one initializer: --seed 1 gives `offset` itself, each other seed its own range.

    None with --graph-seeds: TensorFlow then derives the op seed from the graph seed and the number of ops
    built so far, which depends on how each TensorFlow version builds the graph (bench/MODELS.md, "Same seeds,
    different AUC").
    """
    if GRAPH_SEEDS[0]:
        return None
    return 1000 * (SEED[0] - 1) + offset


def buckets(size):
    return max(1, size // HASH_SCALE[0])


def dense(net, units, name, activation=None, seed_offset=0):
    return tf.layers.dense(net, units, activation=activation, name=name,
                           kernel_initializer=tf.glorot_uniform_initializer(seed=seed(seed_offset)))


def mlp(net, units, name, seed_offset=100):
    with tf.variable_scope(name):
        for i, width in enumerate(units):
            net = dense(net, width, "layer%d" % i, tf.nn.relu, seed_offset + i)
    return net


def optimizer(name, learning_rate):
    """The optimizer and the name of what implements it here.

    Each optimizer gets the learning rate its users typically start from, relative to Adam's.
    """
    if name == "adam":
        optimizer = tf.train.AdamOptimizer(learning_rate)
        implementation = type(optimizer).__module__.split(".")[0]  # the wheel's fused kernel is retf's
        label = "tf.train.AdamOptimizer" + (" (retf fused)" if implementation == "retf" else "")
        return optimizer, label
    if name == "adagrad":
        return tf.train.AdagradOptimizer(learning_rate * 10), "tf.train.AdagradOptimizer"
    if name == "ftrl":
        return tf.train.FtrlOptimizer(learning_rate * 50), "tf.train.FtrlOptimizer"
    if name == "sgd":
        return tf.train.GradientDescentOptimizer(learning_rate * 100), "tf.train.GradientDescentOptimizer"
    if name == "lazyadam":
        try:
            import retf
        except ImportError:
            # TensorFlow 1.15's own lazy Adam: the composite (dedup, gather, scatter) version.
            return tf.contrib.opt.LazyAdamOptimizer(learning_rate), "tf.contrib.opt.LazyAdamOptimizer"
        return retf.train.LazyAdamOptimizer(learning_rate), "retf.train.LazyAdamOptimizer"
    raise ValueError("unknown optimizer %r" % name)


def parse_args(description, data_help, batch_size):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, help=data_help)
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    parser.add_argument("--steps", type=int, default=200, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--learning-rate", type=float, default=0.001, help="Adam's; the others scale it")
    parser.add_argument("--seed", type=int, default=1, help="graph seed, and picks the initializers' op seeds")
    parser.add_argument("--graph-seeds", action="store_true",
                        help="initializers without op seeds (derived from the graph seed, as most scripts do)")
    parser.add_argument("--eval-steps", type=int, default=10,
                        help="batches after training on which the AUC is measured (0: none)")
    parser.add_argument("--trace", help="after timing, trace three steps; the last goes to this Chrome trace file")
    parser.add_argument("--threads", type=int, default=0, help="intra- and inter-op threads (0: TensorFlow's choice)")
    parser.add_argument("--hash-scale", type=int, default=1, help="divide every hash bucket count by this")
    parser.add_argument("--save", help="write a checkpoint (tf.train.Saver) into this folder after --save-at steps")
    parser.add_argument("--save-at", type=int, default=0, help="steps (warm-up included) before --save")
    parser.add_argument("--restore", help="start from the latest checkpoint in this folder, past the batches it saw")
    parser.add_argument("--ev", action="store_true",
                        help="embed the categorical columns in DeepRec's EmbeddingVariables (Criteo models; "
                             "needs tf.feature_column.categorical_column_with_embedding)")
    parser.add_argument("--xla-jit-scope", action="store_true",
                        help="build the model inside tf.xla.experimental.jit_scope() (XLA compiles its ops)")
    parser.add_argument("--export", help="after training, write the model into this folder: saved_model/ (inputs: "
                        "serialized tf.Examples; outputs: each task's probability) and request.json")
    return parser.parse_args()


def top_ops(traces, count=12):
    """Op types by time per step over traced steps, heaviest first: [type, milliseconds, share].

    Times are summed over the ops that ran (on both threads), so they can add up to more than the
    step's wall time.
    """
    totals = {}
    for step_stats in traces:
        for device in step_stats.dev_stats:
            for node in device.node_stats:
                kind = node.timeline_label.split("(")[0].split(" = ")[-1].strip() or node.node_name
                micros = node.op_end_rel_micros - node.op_start_rel_micros
                totals[kind] = totals.get(kind, 0) + micros / float(len(traces))
    total = sum(totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:count]
    return [[kind, round(micros / 1000.0, 3), round(micros / total, 4)] for kind, micros in ranked]


def trace_steps(sess, fetches, path, count=3):
    """Run `count` steps with FULL_TRACE; write the last as a Chrome trace; return wall ms and top ops."""
    from tensorflow.python.client import timeline

    traces, walls = [], []
    for _ in range(count):
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        metadata = tf.RunMetadata()
        start = time.time()
        sess.run(fetches, options=options, run_metadata=metadata)
        walls.append((time.time() - start) * 1000)
        traces.append(metadata.step_stats)
    with open(path, "w") as out:
        out.write(timeline.Timeline(traces[-1]).generate_chrome_trace_format())
    return sorted(walls)[count // 2], top_ops(traces)


def task_logits(logits, labels):
    """The model's logits by label name: a single tensor is the first label's."""
    if isinstance(logits, dict):
        return collections.OrderedDict((name, logits[name]) for name in labels if name in logits)
    return collections.OrderedDict([(next(iter(labels)), logits)])


def serialized_examples(path, columns, labels, count):
    """The first ``count`` rows of a CSV file as serialized tf.Examples, one feature per column but the labels."""
    rows = []
    with open(path) as lines:
        for line, _ in zip(lines, range(count)):
            example = tf.train.Example()
            for (name, default), text in zip(columns, line.rstrip("\n").split(",")):
                if name in labels:
                    continue
                feature = example.features.feature[name]
                if isinstance(default[0], float):
                    feature.float_list.value.append(float(text) if text else default[0])
                else:
                    feature.bytes_list.value.append(text.encode("utf-8"))
            rows.append(example.SerializeToString())
    return rows


def export(sess, logits_fn, columns, labels, folder, data):
    """The trained model as TF 1.x programs ship it to TF Serving: built again in a graph of its own over
    tf.parse_example's features, its variables restored from a checkpoint of ``sess``, and written with
    tf.saved_model.simple_save. request.json holds 32 rows of ``data`` as examples and their probabilities."""
    tf.gfile.MakeDirs(os.path.join(folder, "trained"))
    checkpoint = tf.train.Saver().save(sess, os.path.join(folder, "trained", "model"))
    spec = {name: tf.FixedLenFeature([], tf.float32 if isinstance(default[0], float) else tf.string,
                                      default_value=default[0])
            for name, default in columns if name not in labels}
    with tf.Graph().as_default() as graph:
        serialized = tf.placeholder(tf.string, [None], name="examples")
        tasks = task_logits(logits_fn(tf.parse_example(serialized, spec)), labels)
        outputs = {name: tf.reshape(tf.sigmoid(logits), [-1]) for name, logits in tasks.items()}
        with tf.Session(graph=graph) as serving:
            tf.train.Saver().restore(serving, checkpoint)
            requests = serialized_examples(data, columns, labels, 32)
            predictions = serving.run(outputs, {serialized: requests})
            tf.saved_model.simple_save(serving, os.path.join(folder, "saved_model"), {"examples": serialized}, outputs)
    with open(os.path.join(folder, "request.json"), "w") as out:
        json.dump({"signature": "serving_default",
                   "inputs": {"examples": {"bytes": [base64.b64encode(r).decode("ascii") for r in requests]}},
                   "predictions": {name: [float(v) for v in values] for name, values in predictions.items()}}, out)


def main(logits_fn, description, input_fn, data_help, batch_size, embedding_rows, columns=()):
    args = parse_args(description, data_help, batch_size)
    tf.logging.set_verbosity(tf.logging.ERROR)
    SEED[0], HASH_SCALE[0], GRAPH_SEEDS[0], EV[0] = args.seed, args.hash_scale, args.graph_seeds, args.ev
    tf.set_random_seed(args.seed)
    checkpoint = tf.train.latest_checkpoint(args.restore) if args.restore else None
    if args.restore and checkpoint is None:
        raise SystemExit("no checkpoint in %s" % args.restore)
    seen = tf.train.load_variable(checkpoint, "global_step") if checkpoint else 0
    features, labels = input_fn(args.data, args.batch_size, skip=seen)
    if args.xla_jit_scope:
        with tf.xla.experimental.jit_scope():
            tasks = task_logits(logits_fn(features), labels)
    else:
        tasks = task_logits(logits_fn(features), labels)
    loss = tf.add_n([tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels[name], logits=logits))
                     for name, logits in tasks.items()])
    opt, implementation = optimizer(args.optimizer, args.learning_rate)
    train_op = opt.minimize(loss, global_step=tf.train.get_or_create_global_step())
    with tf.name_scope("metrics"):
        aucs = collections.OrderedDict(
            (name, tf.metrics.auc(labels[name], tf.sigmoid(logits), num_thresholds=1000, name="auc_" + name))
            for name, logits in tasks.items())

    saver = tf.train.Saver() if args.save or checkpoint else None
    config = tf.ConfigProto(intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=args.threads)
    with tf.Session(config=config if args.threads else None) as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer(), tf.tables_initializer()])
        if checkpoint:
            saver.restore(sess, checkpoint)
        losses = []

        def step():
            # One fetch signature throughout: each new one is pruned and optimized on its first run.
            value = sess.run([loss, train_op])[0]
            losses.append(float(value))
            if args.save and len(losses) == args.save_at:
                saver.save(sess, os.path.join(args.save, "model"), global_step=tf.train.get_global_step())
            return value

        first = step()
        for _ in range(args.warmup - 1):
            step()
        # This machine's speed drifts for seconds at a time (other tenants): besides the mean over
        # all timed steps, keep the fastest window of WINDOW steps, the least disturbed rate.
        windows = []
        last = first
        start = window_start = time.time()
        cpu_start = time.process_time()  # every thread of the process: TensorFlow's pools too
        for count in range(1, args.steps + 1):
            last = step()
            if count % WINDOW == 0:
                now = time.time()
                windows.append(now - window_start)
                window_start = now
        elapsed = max(time.time() - start, 1e-9)
        cpu_seconds = time.process_time() - cpu_start
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # MiB: training's peak, before eval
        result = {
            "tensorflow": versions.__version__,  # the build's own (tf.__version__ is 1.15.5 in 1.x API mode)
            "optimizer": implementation,
            "batch_size": args.batch_size,
            "steps": args.steps,
            "seed": args.seed,
            "steps_per_sec": args.steps / elapsed,
            "best_window_steps_per_sec": WINDOW / min(windows) if windows else args.steps / elapsed,
            "examples_per_sec": args.steps * args.batch_size / elapsed,
            "cpu_seconds_per_step": cpu_seconds / args.steps,
            "peak_rss_mib": peak_rss,
            "first_loss": float(first),
            "last_loss": float(last),
            "embedding_rows": embedding_rows(),
            "losses": losses,
        }
        if args.trace:
            result["traced_step_ms"], result["top_ops"] = trace_steps(sess, [loss, train_op], args.trace)
        if args.eval_steps:
            # The next batches, not trained on: the same ones on every side (the input has no shuffle).
            updates = [update for _, update in aucs.values()]
            positives = dict.fromkeys(aucs, 0)
            for _ in range(args.eval_steps):
                _, batch = sess.run([updates, {name: labels[name] for name in aucs}])
                for name, values in batch.items():
                    positives[name] += int(values.sum())
            values = sess.run([value for value, _ in aucs.values()])
            result["aucs"] = dict(zip(aucs, (float(v) for v in values)))
            result["auc"] = float(values[0])
            examples = args.eval_steps * args.batch_size
            result["eval_counts"] = {name: [count, examples - count] for name, count in positives.items()}
        if args.export:
            export(sess, logits_fn, columns, labels, args.export, args.data)
    if not math.isfinite(result["last_loss"]):
        raise SystemExit("loss is %r" % result["last_loss"])
    print(json.dumps(result))
