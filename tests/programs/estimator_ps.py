"""A TF 1.x Estimator job on a parameter-server cluster: every task runs this script with its TF_CONFIG.

train_and_evaluate with a custom model_fn: feature columns over a hashed categorical column with an
embedding (partitioned over the ps tasks) and a small one (on one ps, as most small tables are), tf.data
input, tf.train.AdamOptimizer, AUC in evaluation.
Usage: TF_CONFIG=... python estimator_ps.py MODEL_DIR MAX_STEPS. The evaluator prints its last
metrics on the final checkpoint as one JSON line; the other tasks print their task type. Python 3.6+.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf.logging.set_verbosity(tf.logging.ERROR)
MODEL_DIR, MAX_STEPS = sys.argv[1], int(sys.argv[2])
CITIES = 20000
LOOKUPS = {}  # the training graph's fused lookups (a wheel with fused_embedding), by name: their devices


def input_fn():
    rng = np.random.RandomState(3)
    count = 8192
    city_ids = rng.zipf(1.3, count) % CITIES
    age = rng.uniform(18, 80, count).astype(np.float32)
    label = ((age > 45) != (city_ids % 3 == 0)).astype(np.float32)
    features = {"age": age, "city": np.array(["city%d" % i for i in city_ids])}
    dataset = tf.data.Dataset.from_tensor_slices((features, label))
    return dataset.shuffle(count, seed=5).repeat().batch(128)


def model_fn(features, labels, mode):
    columns = [
        tf.feature_column.numeric_column("age", normalizer_fn=lambda x: (x - 49.0) / 18.0),
        tf.feature_column.embedding_column(
            tf.feature_column.categorical_column_with_hash_bucket("city", hash_bucket_size=50000), dimension=8),
    ]
    with tf.variable_scope("input_layer", partitioner=tf.fixed_size_partitioner(2)):
        net = tf.feature_column.input_layer(features, columns)
    region = tf.feature_column.input_layer(features, [tf.feature_column.embedding_column(
        tf.feature_column.categorical_column_with_hash_bucket("city", hash_bucket_size=100), dimension=4)])
    net = tf.layers.dense(tf.concat([net, region], 1), 32, activation=tf.nn.relu)
    logits = tf.layers.dense(net, 1)[:, 0]
    probability = tf.sigmoid(logits)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"probability": probability})
    loss = tf.losses.sigmoid_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {"auc": tf.metrics.auc(labels, probability),
                   "accuracy": tf.metrics.accuracy(labels, tf.cast(probability > 0.5, tf.float32))}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=tf.train.get_global_step())
    LOOKUPS.update((op.name, op.device) for op in tf.get_default_graph().get_operations()
                   if op.type in ("Retf>EmbeddingLookupSparse", "Retf>SafeEmbeddingLookupSparse"))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(model_dir=MODEL_DIR, save_checkpoints_steps=MAX_STEPS // 2,
                                log_step_count_steps=None, experimental_max_worker_delay_secs=1)
estimator = tf.estimator.Estimator(model_fn, config=config)
train_spec = tf.estimator.TrainSpec(input_fn, max_steps=MAX_STEPS)
eval_spec = tf.estimator.EvalSpec(input_fn, steps=20, start_delay_secs=1, throttle_secs=1)
tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
task = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
report = {"task": task, "lookups": LOOKUPS}
if task == "evaluator":  # it returns once it has evaluated the final checkpoint; report on that one
    metrics = estimator.evaluate(input_fn, steps=20, name="final")
    report.update({name: float(value) for name, value in metrics.items()})
print(json.dumps(report))
