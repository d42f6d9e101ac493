"""A TF 1.x parameter-server worker: replica_device_setter, a partitioned embedding table, sparse Adam,
MonitoredTrainingSession. Prints one JSON line: its losses (before each of its steps) and speed.

Usage: python ps_worker.py CLUSTER_JSON TASK_INDEX [--steps N] [--rows R] [--dim D] [--optimizer adam|lazy|adagrad|ftrl]
       [--batch B] [--threads T] [--ev]
"adam" is tf.train.AdamOptimizer (whatever the build makes of it); "lazy" is the lazy Adam of the
TensorFlow running it (retf.train.LazyAdamOptimizer on a retfwheel build, tf.contrib.opt's on TF 1.15).
Batches depend only on the task index and step, so one worker's run is deterministic. Python 3.6+.
"""
import argparse  # noqa: I001  (tensorflow before numpy, below)
import json
import time

# tensorflow first: a build whose numpy the environment's cannot serve refuses a numpy imported before it
import tensorflow as tf
import numpy as np

if not hasattr(tf, "placeholder"):  # a 2.x API: this program is TF 1.x code
    tf = tf.compat.v1
    tf.disable_v2_behavior()

parser = argparse.ArgumentParser()
parser.add_argument("cluster")
parser.add_argument("task_index", type=int)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--rows", type=int, default=100000)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--fields", type=int, default=8)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--optimizer", choices=("adam", "lazy", "adagrad", "ftrl"), default="adam")
parser.add_argument("--threads", type=int, default=0)
parser.add_argument("--ev", action="store_true", help="the table is DeepRec's EmbeddingVariable (partitioned, "
                                                      "ids of any value, a CounterFilter)")
args = parser.parse_args()

tf.logging.set_verbosity(tf.logging.ERROR)
cluster = tf.train.ClusterSpec(json.loads(args.cluster))
config = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:%d" % args.task_index],
                        intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=args.threads)
server = tf.train.Server(cluster, job_name="worker", task_index=args.task_index, config=config)


def lazy_adam(learning_rate):
    try:
        import retf
    except ImportError:
        return tf.contrib.opt.LazyAdamOptimizer(learning_rate)
    return retf.train.LazyAdamOptimizer(learning_rate)


def batch(step):
    """Ids skewed toward low rows (as hashed categorical features are); each id votes +1 or -1 by a
    hidden hash, and the label is whether the votes of a row sum above zero (learnable from embeddings)."""
    rng = np.random.RandomState(1000 * args.task_index + step)
    ids = np.minimum(rng.zipf(1.2, (args.batch, args.fields)) - 1, args.rows - 1).astype(np.int64)
    votes = np.where((ids * 2654435761) % 1009 < 504, 1, -1).sum(axis=1)
    labels = (votes + 0.5 * rng.standard_normal(args.batch) > 0).astype(np.float32)
    return ids, labels


with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)):
    # Op-level seeds: the same initial values on every TensorFlow version, however it numbers its ops.
    ids = ids_in = tf.placeholder(tf.int64, [None, args.fields])
    labels = tf.placeholder(tf.float32, [None])
    if args.ev:  # ids spread over the int64 range: no table of rows could hold them
        ids = ids * 1000003 + 7
        table = tf.get_embedding_variable(
            "embedding", args.dim, initializer=tf.random_normal_initializer(0.0, 0.05, seed=1),
            partitioner=tf.fixed_size_partitioner(2),
            ev_option=tf.EmbeddingVariableOption(filter_option=tf.CounterFilter(filter_freq=2)))
    else:
        table = tf.get_variable("embedding", [args.rows, args.dim], initializer=tf.random_normal_initializer(0.0, 0.05, seed=1),
                                partitioner=tf.fixed_size_partitioner(2))
    embedded = tf.reshape(tf.nn.embedding_lookup(table, ids), [-1, args.fields * args.dim])
    hidden = tf.layers.dense(embedded, 32, activation=tf.nn.relu, kernel_initializer=tf.glorot_uniform_initializer(seed=2))
    logits = tf.squeeze(tf.layers.dense(hidden, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=3)), axis=1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    global_step = tf.train.get_or_create_global_step()
    if args.optimizer == "adagrad":
        optimizer = tf.train.AdagradOptimizer(0.05)
    elif args.optimizer == "ftrl":
        optimizer = tf.train.FtrlOptimizer(0.05)
    else:
        optimizer = tf.train.AdamOptimizer(0.01) if args.optimizer == "adam" else lazy_adam(0.01)
    train_op = optimizer.minimize(loss, global_step=global_step)

losses = []
hooks = [tf.train.StopAtStepHook(last_step=args.steps)]
with tf.train.MonitoredTrainingSession(master=server.target, is_chief=args.task_index == 0, hooks=hooks,
                                       config=config, save_checkpoint_secs=None, save_summaries_steps=None,
                                       log_step_count_steps=None) as session:
    start = None
    while not session.should_stop():
        features, targets = batch(len(losses))
        value, _ = session.run([loss, train_op], {ids_in: features, labels: targets})
        losses.append(float(value))
        if start is None:  # the first step pays for graph registration on every task
            start = time.time()
    seconds = time.time() - start if start else 0.0
print(json.dumps({"task": args.task_index, "losses": losses, "seconds": seconds,
                  "timed_steps": max(len(losses) - 1, 0),
                  "optimizer": type(optimizer).__module__ + "." + type(optimizer).__name__,
                  "table_devices": [part.device for part in table]}))
