"""What the Criteo models share: the CSV input, the feature columns, the optimizers, the timed loop.

Written for TensorFlow 1.15 (`import tensorflow as tf` being the 1.x API), Python 3.6. A model
module supplies `logits(features, columns)` and calls `main`. Each run prints one JSON line.
"""
import argparse
import json
import math
import os
import time

import tensorflow as tf
from tensorflow.python.framework import versions

NUMERIC = ["I%d" % i for i in range(1, 14)]
CATEGORICAL = ["C%d" % i for i in range(1, 27)]
COLUMNS = ["label"] + NUMERIC + CATEGORICAL
DEFAULTS = [[0.0]] + [[0.0]] * len(NUMERIC) + [[""]] * len(CATEGORICAL)
# Hash buckets per categorical column, sized like the columns' cardinalities (make_criteo_data.py):
# the biggest embedding table holds a million rows (and wide_deep crosses C1 x C2 into a million more).
HASH_BUCKETS = [1000000, 300000, 100000, 50000, 50000, 20000, 20000, 10000, 10000, 5000, 5000, 5000,
                2000, 2000, 1000, 1000, 1000, 500, 500, 200, 200, 100, 50, 20, 10, 4]
EMBEDDING_DIM = 16
WINDOW = 10
HASH_SCALE = [1]  # --hash-scale: every hash bucket count divided by it (small tables for checkpoint tests)


def buckets(size):
    return max(1, size // HASH_SCALE[0])


def input_fn(path, batch_size, skip=0):
    def parse(lines):
        fields = tf.decode_csv(lines, record_defaults=DEFAULTS)
        features = dict(zip(COLUMNS, fields))
        label = tf.reshape(features.pop("label"), [-1, 1])
        return features, label

    dataset = tf.data.TextLineDataset(path).repeat().batch(batch_size, drop_remainder=True).skip(skip)
    dataset = dataset.map(parse, num_parallel_calls=2).prefetch(2)
    return dataset.make_one_shot_iterator().get_next()


def numeric_columns():
    # Counts are heavy-tailed: log1p, as the Criteo recipes do.
    return [tf.feature_column.numeric_column(name, normalizer_fn=lambda x: tf.log1p(tf.maximum(x, 0.0)))
            for name in NUMERIC]


def categorical_columns():
    return [tf.feature_column.categorical_column_with_hash_bucket(name, hash_bucket_size=buckets(size))
            for name, size in zip(CATEGORICAL, HASH_BUCKETS)]


def embedding_columns(dimension=EMBEDDING_DIM):
    return [tf.feature_column.embedding_column(column, dimension=dimension, combiner="mean",
                                               initializer=tf.truncated_normal_initializer(stddev=0.01, seed=i))
            for i, column in enumerate(categorical_columns())]


def mlp(net, units, name):
    with tf.variable_scope(name):
        for i, width in enumerate(units):
            net = tf.layers.dense(net, width, activation=tf.nn.relu, name="layer%d" % i,
                                  kernel_initializer=tf.glorot_uniform_initializer(seed=100 + i))
    return net


def optimizer(name, learning_rate):
    """The optimizer and the name of what implements it here."""
    if name == "adam":
        optimizer = tf.train.AdamOptimizer(learning_rate)
        implementation = type(optimizer).__module__.split(".")[0]  # the wheel's fused kernel is retf's
        label = "tf.train.AdamOptimizer" + (" (retf fused)" if implementation == "retf" else "")
        return optimizer, label
    if name == "adagrad":
        return tf.train.AdagradOptimizer(learning_rate * 10), "tf.train.AdagradOptimizer"
    if name == "lazyadam":
        try:
            import retf
        except ImportError:
            # TensorFlow 1.15's own lazy Adam: the composite (dedup, gather, scatter) version.
            return tf.contrib.opt.LazyAdamOptimizer(learning_rate), "tf.contrib.opt.LazyAdamOptimizer"
        return retf.train.LazyAdamOptimizer(learning_rate), "retf.train.LazyAdamOptimizer"
    raise ValueError("unknown optimizer %r" % name)


def parse_args(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, help="Criteo-format CSV (make_criteo_data.py)")
    parser.add_argument("--optimizer", choices=["adam", "adagrad", "lazyadam"], default="adam")
    parser.add_argument("--steps", type=int, default=200, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--learning-rate", type=float, default=0.001)
    parser.add_argument("--trace", help="after timing, trace three steps; the last goes to this Chrome trace file")
    parser.add_argument("--threads", type=int, default=0, help="intra- and inter-op threads (0: TensorFlow's choice)")
    parser.add_argument("--hash-scale", type=int, default=1, help="divide every hash bucket count by this")
    parser.add_argument("--save", help="write a checkpoint (tf.train.Saver) into this folder after --save-at steps")
    parser.add_argument("--save-at", type=int, default=0, help="steps (warm-up included) before --save")
    parser.add_argument("--restore", help="start from the latest checkpoint in this folder, past the batches it saw")
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


def main(logits_fn, description):
    args = parse_args(description)
    tf.logging.set_verbosity(tf.logging.ERROR)
    tf.set_random_seed(1)
    HASH_SCALE[0] = args.hash_scale
    checkpoint = tf.train.latest_checkpoint(args.restore) if args.restore else None
    if args.restore and checkpoint is None:
        raise SystemExit("no checkpoint in %s" % args.restore)
    seen = tf.train.load_variable(checkpoint, "global_step") if checkpoint else 0
    features, label = input_fn(args.data, args.batch_size, skip=seen)
    logits = logits_fn(features)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
    opt, implementation = optimizer(args.optimizer, args.learning_rate)
    train_op = opt.minimize(loss, global_step=tf.train.get_or_create_global_step())

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
        start = window_start = time.time()
        for count in range(1, args.steps + 1):
            last = step()
            if count % WINDOW == 0:
                now = time.time()
                windows.append(now - window_start)
                window_start = now
        elapsed = time.time() - start
        result = {
            "tensorflow": versions.__version__,  # the build's own (tf.__version__ is 1.15.5 in 1.x API mode)
            "optimizer": implementation,
            "batch_size": args.batch_size,
            "steps": args.steps,
            "steps_per_sec": args.steps / elapsed,
            "best_window_steps_per_sec": WINDOW / min(windows) if windows else args.steps / elapsed,
            "examples_per_sec": args.steps * args.batch_size / elapsed,
            "first_loss": float(first),
            "last_loss": float(last),
            "embedding_rows": sum(buckets(size) for size in HASH_BUCKETS),
            "losses": losses,
        }
        if args.trace:
            result["traced_step_ms"], result["top_ops"] = trace_steps(sess, [loss, train_op], args.trace)
    if not math.isfinite(result["last_loss"]):
        raise SystemExit("loss is %r" % result["last_loss"])
    print(json.dumps(result))
