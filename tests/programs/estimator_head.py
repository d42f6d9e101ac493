"""An Estimator whose model_fn ends in tf.contrib.estimator.binary_classification_head (as NVIDIA's
TF 1.x Wide & Deep does), trained, evaluated, and resumed from its model_dir.

    python estimator_head.py WORK_DIR [FROM_DIR]

Trains 20 steps into WORK_DIR/model and evaluates; then trains 10 more steps from a copy of
FROM_DIR/model (another TensorFlow's) or of WORK_DIR/model, and evaluates again. Prints one JSON
line: the per-step losses of both runs and both evaluations.
"""
import json
import os
import shutil
import sys

import numpy as np
import tensorflow as tf

VOCAB, ROWS, BATCH = 500, 1024, 128


def make_data(rng):
    ids = (rng.zipf(1.3, ROWS) % VOCAB).astype(np.int64)
    numeric = rng.uniform(0, 1, ROWS).astype(np.float32)
    label = ((ids % 3 == 0) ^ (numeric > 0.6)).astype(np.float32).reshape(-1, 1)
    return {"item": ids, "price": numeric}, label


def input_fn(repeat):
    features, label = make_data(np.random.RandomState(11))
    dataset = tf.data.Dataset.from_tensor_slices((features, label))
    return (dataset.repeat() if repeat else dataset).batch(BATCH)


def model_fn(features, labels, mode):
    columns = [tf.feature_column.embedding_column(
        tf.feature_column.categorical_column_with_identity("item", VOCAB), 8,
        initializer=tf.truncated_normal_initializer(stddev=0.05, seed=71)),
        tf.feature_column.numeric_column("price")]
    net = tf.feature_column.input_layer(features, columns)
    net = tf.layers.dense(net, 16, activation=tf.nn.relu, kernel_initializer=tf.glorot_uniform_initializer(seed=72))
    logits = tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=73))
    head = tf.contrib.estimator.binary_classification_head()

    def train_op_fn(loss):
        return tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())

    spec = head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                      train_op_fn=train_op_fn)
    tf.add_to_collection("program_loss", spec.loss)
    return spec


class LossHook(tf.train.SessionRunHook):
    def __init__(self):
        self.losses = []

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(tf.get_collection("program_loss")[0])

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def train_and_evaluate(model_dir, steps):
    config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=70, log_step_count_steps=1000,
                                    session_config=tf.ConfigProto(intra_op_parallelism_threads=1,
                                                                  inter_op_parallelism_threads=1))
    estimator = tf.estimator.Estimator(model_fn, config=config)
    hook = LossHook()
    estimator.train(lambda: input_fn(True), steps=steps, hooks=[hook])
    metrics = estimator.evaluate(lambda: input_fn(False))
    return hook.losses, {k: float(v) for k, v in metrics.items() if k in ("loss", "auc", "accuracy", "global_step")}


def main(work_dir, from_dir=None):
    tf.logging.set_verbosity(tf.logging.ERROR)
    losses, evaluation = train_and_evaluate(os.path.join(work_dir, "model"), 20)
    resumed_dir = os.path.join(work_dir, "resumed")
    shutil.copytree(os.path.join(from_dir or work_dir, "model"), resumed_dir)
    resumed_losses, resumed_evaluation = train_and_evaluate(resumed_dir, 10)
    print(json.dumps({"losses": losses, "evaluation": evaluation, "resumed_losses": resumed_losses,
                      "resumed_evaluation": resumed_evaluation,
                      "head": type(tf.contrib.estimator.binary_classification_head()).__name__}))


if __name__ == "__main__":
    main(*sys.argv[1:])
