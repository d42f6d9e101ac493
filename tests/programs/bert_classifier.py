"""A BERT-style sentence classifier on tf.contrib.tpu.TPUEstimator with use_tpu=False, as run_classifier.py runs
on CPUs and GPUs.

    python bert_classifier.py WORK_DIR [FROM_DIR]

BERT's structure at toy size: word, position and token-type embeddings, one transformer layer (multi-head
self-attention with a mask, GELU feed-forward, tf.contrib.layers.layer_norm), the pooled [CLS] vector and an
output layer named as run_classifier's (output_weights, output_bias); an AdamWeightDecay optimizer written as
BERT's optimization.py writes it, with warm-up and polynomial decay. tf.contrib.tpu.RunConfig / TPUConfig /
InputPipelineConfig configure it; tf.contrib.cluster_resolver is only asked for when use_tpu would be true.
Trains 12 steps into WORK_DIR/model, evaluates (metric_fn through eval_metrics) and predicts; then trains 6 more
steps from a copy of FROM_DIR/model (another TensorFlow's) or of WORK_DIR/model. Prints one JSON line.
"""
import json
import math
import os
import re
import shutil
import sys

import numpy as np
import tensorflow as tf

VOCAB, SEQ, HIDDEN, HEADS, INTERMEDIATE, LABELS = 60, 12, 16, 2, 32, 2
EXAMPLES, BATCH = 96, 8


def make_examples():
    rng = np.random.RandomState(21)
    lengths = rng.randint(4, SEQ + 1, EXAMPLES)
    ids = np.zeros((EXAMPLES, SEQ), np.int32)
    mask = np.zeros((EXAMPLES, SEQ), np.int32)
    for row, length in enumerate(lengths):
        ids[row, 0] = 1  # [CLS]
        ids[row, 1:length] = rng.randint(3, VOCAB, length - 1)
        mask[row, :length] = 1
    segments = (np.arange(SEQ)[None, :] >= (lengths[:, None] // 2)).astype(np.int32) * mask
    labels = ((ids % 7 == 0).sum(axis=1) > 1).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments, "label_ids": labels}


def input_fn_builder(examples, is_training, drop_remainder):
    def input_fn(params):
        dataset = tf.data.Dataset.from_tensor_slices(examples)
        if is_training:
            dataset = dataset.repeat()
        return dataset.batch(params["batch_size"], drop_remainder=drop_remainder)
    return input_fn


def gelu(x):
    return x * 0.5 * (1.0 + tf.erf(x / math.sqrt(2.0)))


def initializer(seed):
    return tf.truncated_normal_initializer(stddev=0.02, seed=seed)


def layer_norm(tensor, name):
    return tf.contrib.layers.layer_norm(inputs=tensor, begin_norm_axis=-1, begin_params_axis=-1, scope=name)


def attention(layer_input, mask, seed):
    size = HIDDEN // HEADS

    def heads(tensor):
        return tf.transpose(tf.reshape(tensor, [-1, SEQ, HEADS, size]), [0, 2, 1, 3])

    query = tf.layers.dense(layer_input, HIDDEN, name="query", kernel_initializer=initializer(seed))
    key = tf.layers.dense(layer_input, HIDDEN, name="key", kernel_initializer=initializer(seed + 1))
    value = tf.layers.dense(layer_input, HIDDEN, name="value", kernel_initializer=initializer(seed + 2))
    scores = tf.matmul(heads(query), heads(key), transpose_b=True) * (1.0 / math.sqrt(size))
    adder = (1.0 - tf.cast(mask[:, None, None, :], tf.float32)) * -10000.0
    probs = tf.nn.softmax(scores + adder)
    context = tf.transpose(tf.matmul(probs, heads(value)), [0, 2, 1, 3])
    return tf.reshape(context, [-1, SEQ, HIDDEN])


def bert(input_ids, input_mask, segment_ids):
    with tf.variable_scope("bert"):
        with tf.variable_scope("embeddings"):
            words = tf.get_variable("word_embeddings", [VOCAB, HIDDEN], initializer=initializer(30))
            types = tf.get_variable("token_type_embeddings", [2, HIDDEN], initializer=initializer(31))
            positions = tf.get_variable("position_embeddings", [SEQ, HIDDEN], initializer=initializer(32))
            output = (tf.gather(words, input_ids) + tf.matmul(tf.one_hot(segment_ids, 2), types[None, :, :]
                                                              * tf.ones([tf.shape(input_ids)[0], 1, 1]))
                      + positions[None, :, :])
            output = layer_norm(output, "LayerNorm")
        with tf.variable_scope("encoder/layer_0"):
            with tf.variable_scope("attention"):
                with tf.variable_scope("self"):
                    context = attention(output, input_mask, 40)
                with tf.variable_scope("output"):
                    attended = tf.layers.dense(context, HIDDEN, kernel_initializer=initializer(43))
                    attended = layer_norm(attended + output, "LayerNorm")
            with tf.variable_scope("intermediate"):
                intermediate = tf.layers.dense(attended, INTERMEDIATE, activation=gelu,
                                               kernel_initializer=initializer(44))
            with tf.variable_scope("output"):
                layer_output = tf.layers.dense(intermediate, HIDDEN, kernel_initializer=initializer(45))
                layer_output = layer_norm(layer_output + attended, "LayerNorm")
        with tf.variable_scope("pooler"):
            return tf.layers.dense(layer_output[:, 0, :], HIDDEN, activation=tf.tanh,
                                   kernel_initializer=initializer(46))


class AdamWeightDecayOptimizer(tf.train.Optimizer):
    """Adam with decoupled weight decay and no bias correction, as BERT's optimization.py has it."""

    def __init__(self, learning_rate, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude_from_weight_decay=None, name="AdamWeightDecayOptimizer"):
        super(AdamWeightDecayOptimizer, self).__init__(False, name)
        self.learning_rate, self.weight_decay_rate = learning_rate, weight_decay_rate
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.exclude_from_weight_decay = exclude_from_weight_decay

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        assignments = []
        for grad, param in grads_and_vars:
            if grad is None or param is None:
                continue
            param_name = re.match("^(.*):\\d+$", param.name).group(1)
            m = tf.get_variable(name=param_name + "/adam_m", shape=param.shape.as_list(), dtype=tf.float32,
                                trainable=False, initializer=tf.zeros_initializer())
            v = tf.get_variable(name=param_name + "/adam_v", shape=param.shape.as_list(), dtype=tf.float32,
                                trainable=False, initializer=tf.zeros_initializer())
            next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
            next_v = tf.multiply(self.beta_2, v) + tf.multiply(1.0 - self.beta_2, tf.square(grad))
            update = next_m / (tf.sqrt(next_v) + self.epsilon)
            if self._do_use_weight_decay(param_name):
                update += self.weight_decay_rate * param
            next_param = param - self.learning_rate * update
            assignments.extend([param.assign(next_param), m.assign(next_m), v.assign(next_v)])
        return tf.group(*assignments, name=name)

    def _do_use_weight_decay(self, param_name):
        return not any(re.search(r, param_name) for r in self.exclude_from_weight_decay or ())


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps):
    global_step = tf.train.get_or_create_global_step()
    learning_rate = tf.train.polynomial_decay(tf.constant(init_lr, shape=[], dtype=tf.float32), global_step,
                                              num_train_steps, end_learning_rate=0.0, power=1.0, cycle=False)
    warmup = tf.cast(global_step, tf.float32) / float(num_warmup_steps)
    is_warmup = tf.cast(tf.cast(global_step, tf.int32) < num_warmup_steps, tf.float32)
    learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * init_lr * warmup
    optimizer = AdamWeightDecayOptimizer(learning_rate, exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    tvars = tf.trainable_variables()
    grads, _ = tf.clip_by_global_norm(tf.gradients(loss, tvars), clip_norm=1.0)
    train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)
    # BERT groups the step's increment beside the update, leaving to the scheduler whether the learning rate reads
    # the step before or after it (TF 1.15 and 2.x settle it differently at the warm-up's end); here it follows.
    with tf.control_dependencies([train_op]):
        return global_step.assign(global_step + 1)


def model_fn_builder(num_train_steps):
    def model_fn(features, labels, mode, params):
        pooled = bert(features["input_ids"], features["input_mask"], features["segment_ids"])
        output_weights = tf.get_variable("output_weights", [LABELS, HIDDEN], initializer=initializer(50))
        output_bias = tf.get_variable("output_bias", [LABELS], initializer=tf.zeros_initializer())
        with tf.variable_scope("loss"):
            if mode == tf.estimator.ModeKeys.TRAIN:
                pooled = tf.nn.dropout(pooled, keep_prob=0.9, seed=51)
            logits = tf.nn.bias_add(tf.matmul(pooled, output_weights, transpose_b=True), output_bias)
            probabilities = tf.nn.softmax(logits, axis=-1)
            one_hot = tf.one_hot(features["label_ids"], depth=LABELS, dtype=tf.float32)
            per_example_loss = -tf.reduce_sum(one_hot * tf.nn.log_softmax(logits, axis=-1), axis=-1)
            total_loss = tf.reduce_mean(per_example_loss)
        tf.add_to_collection("program_loss", total_loss)
        if mode == tf.estimator.ModeKeys.TRAIN:
            train_op = create_optimizer(total_loss, 1e-3, num_train_steps, 3)
            return tf.contrib.tpu.TPUEstimatorSpec(mode=mode, loss=total_loss, train_op=train_op)
        if mode == tf.estimator.ModeKeys.EVAL:
            def metric_fn(per_example_loss, label_ids, logits):
                predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
                return {"eval_accuracy": tf.metrics.accuracy(labels=label_ids, predictions=predictions),
                        "eval_loss": tf.metrics.mean(values=per_example_loss)}
            return tf.contrib.tpu.TPUEstimatorSpec(
                mode=mode, loss=total_loss, eval_metrics=(metric_fn, [per_example_loss, features["label_ids"], logits]))
        return tf.contrib.tpu.TPUEstimatorSpec(mode=mode, predictions={"probabilities": probabilities})
    return model_fn


class LossHook(tf.train.SessionRunHook):
    def __init__(self):
        self.losses = []

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(tf.get_collection("program_loss")[0])

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def run(model_dir, steps, use_tpu=False):
    examples = make_examples()
    tpu_cluster_resolver = None
    if use_tpu:
        tpu_cluster_resolver = tf.contrib.cluster_resolver.TPUClusterResolver("grpc://localhost:8470")
    config = tf.contrib.tpu.RunConfig(
        cluster=tpu_cluster_resolver, master=None, model_dir=model_dir, save_checkpoints_steps=1000, tf_random_seed=20,
        session_config=tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1),
        tpu_config=tf.contrib.tpu.TPUConfig(iterations_per_loop=1000, num_shards=8,
                                            per_host_input_for_training=tf.contrib.tpu.InputPipelineConfig.PER_HOST_V2))
    estimator = tf.contrib.tpu.TPUEstimator(use_tpu=use_tpu, model_fn=model_fn_builder(30), config=config,
                                            train_batch_size=BATCH, eval_batch_size=BATCH, predict_batch_size=BATCH)
    hook = LossHook()
    estimator.train(input_fn_builder(examples, True, True), max_steps=None, steps=steps, hooks=[hook])
    evaluation = estimator.evaluate(input_fn_builder(examples, False, True), steps=EXAMPLES // BATCH)
    predictions = [p["probabilities"].tolist() for p in estimator.predict(input_fn_builder(examples, False, False))]
    return hook.losses, {k: float(v) for k, v in evaluation.items()}, predictions, estimator


def main(work_dir, from_dir=None):
    tf.logging.set_verbosity(tf.logging.ERROR)
    model_dir = os.path.join(work_dir, "model")
    losses, evaluation, predictions, estimator = run(model_dir, 12)
    variables = sorted("%s %s" % (name, shape) for name, shape in tf.train.list_variables(model_dir))
    resumed_dir = os.path.join(work_dir, "resumed")
    shutil.copytree(os.path.join(from_dir or work_dir, "model"), resumed_dir)
    resumed_losses, resumed_evaluation, _, _ = run(resumed_dir, 6)
    print(json.dumps({"losses": losses, "evaluation": evaluation, "predictions": predictions[:8],
                      "variables": variables, "resumed_losses": resumed_losses,
                      "resumed_evaluation": resumed_evaluation, "estimator": type(estimator).__name__}))


if __name__ == "__main__":
    main(*sys.argv[1:])
