"""A Wide & Deep model written the way DeepRec's model zoo writes it (modelzoo/wide_and_deep/train.py's flags and
API), on synthetic Criteo-like data.

    python deeprec_wdl.py WORK_DIR --model_dir DIR [--ev] [--ev_filter counter|cbf] [--ev_elimination l2|gstep]
        [--optimizer adamasync|adagraddecay|adam|adagrad] [--smartstaged true|false] [--emb_fusion true|false]
        [--op_fusion true|false] [--micro_batch N] [--steps N] [--tf]

Without --tf the DeepRec API is used as DeepRec's script uses it: EmbeddingVariableOption with the filter and
eviction options (built even without --ev), categorical_column_with_embedding with --ev, embedding_column's
do_fusion, tf.staged with tf.make_prefetch_hook, DeepRec's ConfigProto fields (do_op_fusion, do_smart_stage,
micro_batch_num), AdamAsyncOptimizer / AdagradDecayOptimizer for the deep part and
FTRL for the wide part, MonitoredTrainingSession checkpoints in --model_dir (a second run resumes there). Prints
one JSON line: the losses, the AUC on held-out rows, the global step, and what the checkpoint holds for the
first column's EmbeddingVariable.
"""
import argparse
import json

import numpy as np
import tensorflow as tf

CATEGORICAL = ["C%d" % i for i in range(1, 9)]
NUMERIC = ["I%d" % i for i in range(1, 6)]
BATCH = 256


def boolean_string(value):
    if value not in ("true", "false", "True", "False"):
        raise ValueError("Not a valid boolean string")
    return value in ("true", "True")


parser = argparse.ArgumentParser()
parser.add_argument("work_dir")
parser.add_argument("--model_dir", required=True)
parser.add_argument("--ev", type=boolean_string, nargs="?", const=True, default=False)
parser.add_argument("--ev_filter", choices=[None, "counter", "cbf"], default=None)
parser.add_argument("--ev_elimination", choices=[None, "l2", "gstep"], default=None)
parser.add_argument("--optimizer", choices=["adamasync", "adagraddecay", "adam", "adagrad"], default="adamasync")
parser.add_argument("--smartstaged", type=boolean_string, default=True)
parser.add_argument("--emb_fusion", type=boolean_string, default=True)
parser.add_argument("--op_fusion", type=boolean_string, default=True)
parser.add_argument("--micro_batch", type=int, default=0)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--tf", action="store_true")
args = parser.parse_args()


def make_data(seed, rows):
    """Each categorical value has a hidden effect; the label is whether a row's effects sum above zero."""
    rng = np.random.RandomState(seed)
    features, score = {}, np.zeros(rows)
    for index, name in enumerate(CATEGORICAL):
        values = np.minimum(rng.zipf(1.3, rows), 5000)
        score += np.sin(values * (index + 1.7))
        features[name] = np.array(["%s_%d" % (name, v) for v in values])
    for name in NUMERIC:
        features[name] = rng.uniform(0, 1, rows).astype(np.float32)
        score += features[name] - 0.5
    labels = (score + 0.3 * rng.normal(size=rows) > 0).astype(np.float32)
    return features, labels


def input_fn(features, labels):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(BATCH)
    batch_features, batch_labels = tf.data.make_one_shot_iterator(dataset).get_next()
    sparse = {name: tf.sparse.from_dense(tf.reshape(batch_features[name], [-1, 1])) for name in CATEGORICAL}
    sparse.update({name: tf.reshape(batch_features[name], [-1, 1]) for name in NUMERIC})
    return sparse, batch_labels


def build_feature_columns():
    wide, deep = [], []
    if not args.tf:  # as DeepRec's script: the options are built whether or not --ev is given
        evict_opt = tf.GlobalStepEvict(steps_to_live=40) if args.ev_elimination == "gstep" else \
            tf.L2WeightEvict(l2_weight_threshold=1e-4) if args.ev_elimination == "l2" else None
        if args.ev_filter == "cbf":
            filter_option = tf.CBFFilter(filter_freq=3, max_element_size=2 ** 30, false_positive_probability=0.01,
                                         counter_type=tf.int64)
        elif args.ev_filter == "counter":
            filter_option = tf.CounterFilter(filter_freq=3)
        else:
            filter_option = None
        ev_opt = tf.EmbeddingVariableOption(evict_option=evict_opt, filter_option=filter_option)
    for name in CATEGORICAL:
        hashed = tf.feature_column.categorical_column_with_hash_bucket(name, hash_bucket_size=10000, dtype=tf.string)
        wide.append(hashed)
        if not args.tf and args.ev:
            column = tf.feature_column.categorical_column_with_embedding(name, dtype=tf.string, ev_option=ev_opt)
        else:
            column = hashed
        if args.tf:
            deep.append(tf.feature_column.embedding_column(column, dimension=16, combiner="mean"))
        else:
            deep.append(tf.feature_column.embedding_column(column, dimension=16, combiner="mean",
                                                           do_fusion=args.emb_fusion))
    for name in NUMERIC:
        column = tf.feature_column.numeric_column(name)
        wide.append(column)
        deep.append(column)
    return wide, deep


def model(features, labels, wide_columns, deep_columns, global_step):
    with tf.variable_scope("linear"):
        wide = tf.feature_column.linear_model(features, wide_columns)
    with tf.variable_scope("dnn"):
        net = tf.feature_column.input_layer(features, deep_columns)
        for units in (64, 32):
            net = tf.layers.dense(net, units, activation=tf.nn.relu)
        deep = tf.layers.dense(net, 1)
    logits = tf.squeeze(wide + deep, axis=1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    linear_optimizer = tf.train.FtrlOptimizer(0.1, l1_regularization_strength=0.0, l2_regularization_strength=0.0)
    if args.tf or args.optimizer == "adam":
        dnn_optimizer = tf.train.AdamOptimizer(0.01)
    elif args.optimizer == "adamasync":
        dnn_optimizer = tf.train.AdamAsyncOptimizer(0.01, beta1=0.9, beta2=0.999, epsilon=1e-8)
    elif args.optimizer == "adagraddecay":
        dnn_optimizer = tf.train.AdagradDecayOptimizer(0.1, global_step)
    else:
        dnn_optimizer = tf.train.AdagradOptimizer(0.1)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_ops = [dnn_optimizer.minimize(loss, var_list=tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES,
                                                                               scope="dnn")),
                     linear_optimizer.minimize(loss, var_list=tf.get_collection(
                         tf.GraphKeys.TRAINABLE_VARIABLES, scope="linear"), global_step=global_step)]
    return loss, tf.sigmoid(logits), tf.group(*train_ops)


def auc(labels, scores):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    positives = labels == 1
    n_pos, n_neg = positives.sum(), (~positives).sum()
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def test_inputs(features):
    inputs = {name: tf.sparse.from_dense(tf.reshape(tf.constant(features[name]), [-1, 1])) for name in CATEGORICAL}
    inputs.update({name: tf.reshape(tf.constant(features[name]), [-1, 1]) for name in NUMERIC})
    return inputs


train_features, train_labels = make_data(0, 20000)
test_features, test_labels = make_data(1, 2048)
with tf.Graph().as_default():
    tf.set_random_seed(1)
    wide_columns, deep_columns = build_feature_columns()
    global_step = tf.train.get_or_create_global_step()
    features, labels = input_fn(train_features, train_labels)
    if not args.tf and args.smartstaged:
        features, labels = tf.staged((features, labels), num_threads=2, capacity=8)
    loss, _, train_op = model(features, labels, wide_columns, deep_columns, global_step)
    hooks = [tf.train.StopAtStepHook(last_step=args.steps)]
    if not args.tf and args.smartstaged:
        hooks.append(tf.make_prefetch_hook())
    sess_config = tf.ConfigProto()
    if args.op_fusion and not args.tf:
        sess_config.graph_options.optimizer_options.do_op_fusion = True
    if args.smartstaged and not args.tf:
        sess_config.graph_options.optimizer_options.do_smart_stage = True
    if args.micro_batch and not args.tf:
        sess_config.graph_options.optimizer_options.micro_batch_num = args.micro_batch
    losses = []
    with tf.train.MonitoredTrainingSession(checkpoint_dir=args.model_dir, save_checkpoint_steps=20, hooks=hooks,
                                           save_summaries_steps=None, log_step_count_steps=None,
                                           config=sess_config) as session:
        start_step = session.run(global_step)
        while not session.should_stop():
            losses.append(float(session.run([loss, train_op])[0]))
checkpoint = tf.train.latest_checkpoint(args.model_dir)
with tf.Graph().as_default():  # the held-out AUC from the last checkpoint, in a graph of its own
    wide_columns, deep_columns = build_feature_columns()
    global_step = tf.train.get_or_create_global_step()
    _, test_scores, _ = model(test_inputs(test_features), tf.constant(test_labels), wide_columns, deep_columns,
                              global_step)
    with tf.Session() as session:
        tf.train.Saver().restore(session, checkpoint)
        scores = session.run(test_scores)
reader = tf.train.load_checkpoint(checkpoint)
names = sorted(reader.get_variable_to_shape_map())
ev_name = "dnn/input_layer/C1_embedding/embedding_weights"
report = {"losses": losses, "start_step": int(start_step), "step": int(checkpoint.rsplit("-", 1)[-1]),
          "auc": auc(test_labels, scores), "session_config": sess_config.SerializeToString().hex(),
          "ev_tensors": [n for n in names if n.startswith(ev_name + "-") or n.startswith(ev_name + "/")]}
if ev_name + "-keys" in names:
    report["ev_keys"] = int(reader.get_tensor(ev_name + "-keys").size)
    report["ev_filtered_keys"] = int(reader.get_tensor(ev_name + "-keys_filtered").size)
    versions = reader.get_tensor(ev_name + "-versions")
    report["ev_min_version"] = int(versions.min()) if versions.size else None
print(json.dumps(report))
