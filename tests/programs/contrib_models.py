"""Recommendation models written as TF 1.15 code on tf.contrib, trained, checkpointed and resumed.

    python contrib_models.py WORK_DIR MODEL [FROM_DIR]

MODEL is one of:
- deepfm_bn: DeepFM whose deep part is tf.contrib.layers.fully_connected with batch_norm (imported by
  its module path) and an l2_regularizer set through tf.contrib.framework.arg_scope; UPDATE_OPS run
  with the train op; tf.train.AdamOptimizer on the embeddings' sparse gradients.
- lazyadam, adamw, momentumw, moving_average: an embedding model trained by
  tf.contrib.opt.LazyAdamOptimizer, AdamWOptimizer (decaying the dense weights only),
  MomentumWOptimizer (Nesterov) or MovingAverageOptimizer over Adagrad (whose swapping_saver
  writes the averages under the variables' names).
- bst: a BST-style model: a behaviour sequence through tf.contrib.feature_column's
  sequence_categorical_column_with_identity and sequence_numeric_column into sequence_input_layer,
  self-attention with tf.contrib.layers.layer_norm, trained by tf.contrib.layers.optimize_loss.
Prints one JSON line (checkpoints.py) with the model's variables and what it checks.
"""
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.contrib.layers.python.layers import batch_norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoints  # noqa: E402

VOCAB, FIELDS, DIM, BATCH, LENGTH = 2000, 6, 8, 256, 8


def make_data(rng):
    ids = rng.zipf(1.3, (BATCH, FIELDS)) % VOCAB  # skewed, as real ids are
    numeric = rng.uniform(0, 1, (BATCH, 4)).astype(np.float32)
    label = ((ids[:, 0] % 3 == 0) ^ (numeric[:, 0] > 0.6)).astype(np.float32).reshape(-1, 1)
    return ids.astype(np.int64), numeric, label


def variables_report(sess, work_dir):
    return {"variables": sorted("%s %s" % (v.op.name, v.shape.as_list()) for v in tf.global_variables())}


def embedding_model(ids, numeric):
    table = tf.get_variable("embeddings", [VOCAB, DIM], initializer=tf.random_normal_initializer(0.0, 0.05, seed=31))
    fields = tf.nn.embedding_lookup(table, ids)
    net = tf.concat([tf.reshape(fields, [-1, FIELDS * DIM]), numeric], axis=1)
    net = tf.layers.dense(net, 32, activation=tf.nn.relu, name="hidden",
                          kernel_initializer=tf.glorot_uniform_initializer(seed=32))
    return fields, tf.layers.dense(net, 1, name="logit", kernel_initializer=tf.glorot_uniform_initializer(seed=33))


def deepfm_bn():
    ids, numeric, label = (tf.constant(a) for a in make_data(np.random.RandomState(5)))
    fields, _ = embedding_model(ids, numeric)
    second = 0.5 * tf.reduce_sum(tf.square(tf.reduce_sum(fields, 1)) - tf.reduce_sum(tf.square(fields), 1), 1,
                                 keepdims=True)
    net = tf.concat([tf.reshape(fields, [-1, FIELDS * DIM]), numeric], axis=1)
    with tf.contrib.framework.arg_scope([tf.contrib.layers.fully_connected],
                                        weights_regularizer=tf.contrib.layers.l2_regularizer(1e-3),
                                        normalizer_fn=batch_norm,
                                        normalizer_params={"is_training": True, "decay": 0.9, "scale": True}):
        for i, width in enumerate([32, 16]):
            net = tf.contrib.layers.fully_connected(
                net, width, scope="deep%d" % i, weights_initializer=tf.contrib.layers.xavier_initializer(seed=40 + i))
    deep = tf.contrib.layers.fully_connected(net, 1, activation_fn=None, scope="deep_logit",
                                             weights_initializer=tf.contrib.layers.xavier_initializer(seed=45))
    logits = second + deep
    loss = tf.losses.sigmoid_cross_entropy(label, logits) + tf.losses.get_regularization_loss()
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    # Adam at 0.001, as DeepRec's DeepFM recipe trains. At 0.01 on this one batch the loss falls to 0.06 in 25 steps,
    # and the training turns last-bit differences between TensorFlow's two builds into 1e-4 of the loss within two steps
    # (on an Intel Xeon with AVX-512, where 1.15.5's and 2.6.2's Rsqrt and row sums differ in the last bit; at 0.01 the
    # losses agreed on an AMD EPYC).
    with tf.control_dependencies(update_ops):
        train_op = tf.train.AdamOptimizer(0.001).minimize(loss, global_step=tf.train.get_or_create_global_step())

    def report(sess, work_dir):
        result = variables_report(sess, work_dir)
        result["update_ops"] = len(update_ops)
        result["regularization_losses"] = len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES))
        result["moving_mean"] = sess.run(tf.global_variables("deep0/BatchNorm/moving_mean")[0]).tolist()
        return result

    return {"loss": loss, "train_op": train_op, "report": report}


def contrib_optimizer(name):
    def build():
        ids, numeric, label = (tf.constant(a) for a in make_data(np.random.RandomState(6)))
        _, logits = embedding_model(ids, numeric)
        loss = tf.losses.sigmoid_cross_entropy(label, logits)
        step = tf.train.get_or_create_global_step()
        dense = [v for v in tf.trainable_variables() if "kernel" in v.op.name]
        if name == "lazyadam":
            train_op = tf.contrib.opt.LazyAdamOptimizer(0.01).minimize(loss, global_step=step)
        elif name in ("adamw", "momentumw"):
            if name == "adamw":
                optimizer = tf.contrib.opt.AdamWOptimizer(1e-2, learning_rate=0.01)
            else:
                optimizer = tf.contrib.opt.MomentumWOptimizer(1e-2, 0.05, 0.9, use_nesterov=True)
            return decoupled_steps(optimizer, loss, step, dense if name == "adamw" else None)
        else:
            optimizer = tf.contrib.opt.MovingAverageOptimizer(tf.train.AdagradOptimizer(0.1), average_decay=0.9)
            train_op = optimizer.minimize(loss, global_step=step)

        def report(sess, work_dir):
            result = variables_report(sess, work_dir)
            if name == "moving_average":
                path = optimizer.swapping_saver().save(sess, os.path.join(work_dir, "swapped", "model"))
                average = tf.global_variables("logit/kernel/ExponentialMovingAverage")[0]
                result["swapped_holds_average"] = bool(np.array_equal(
                    tf.train.load_variable(path, "logit/kernel"), sess.run(average)))
            return result

        return {"loss": loss, "train_op": train_op, "report": report}

    return build


def decoupled_steps(optimizer, loss, step, decay_var_list):
    """Gradients computed in one run, applied in the next: TF 1.15's decay could race with the forward pass
    reading a variable (its results varied from run to run), so each side is held to the order of its
    runs that read first."""
    grads_and_vars = optimizer.compute_gradients(loss)
    fed = []
    for grad, var in grads_and_vars:
        if isinstance(grad, tf.IndexedSlices):
            fed.append((tf.IndexedSlices(tf.placeholder(grad.values.dtype, grad.values.shape),
                                         tf.placeholder(grad.indices.dtype, grad.indices.shape), grad.dense_shape), var))
        else:
            fed.append((tf.placeholder(grad.dtype, grad.shape), var))
    train_op = optimizer.apply_gradients(fed, global_step=step, decay_var_list=decay_var_list)

    def run_step(sess):
        value, grads = sess.run([loss, [g for g, _ in grads_and_vars]])
        feed = {}
        for (placeholder, _), grad in zip(fed, grads):
            if isinstance(placeholder, tf.IndexedSlices):
                feed[placeholder.values], feed[placeholder.indices] = grad.values, grad.indices
            else:
                feed[placeholder] = grad
        sess.run(train_op, feed)
        return value

    return {"loss": loss, "train_op": train_op, "step": run_step, "report": variables_report}


def bst():
    rng = np.random.RandomState(7)
    lengths = rng.randint(2, LENGTH + 1, BATCH)
    indices = np.array([[row, t] for row in range(BATCH) for t in range(lengths[row])], dtype=np.int64)
    items = (rng.zipf(1.3, len(indices)) % VOCAB).astype(np.int64)
    times = rng.uniform(0, 1, len(indices)).astype(np.float32)
    target = (rng.zipf(1.3, BATCH) % VOCAB).astype(np.int64)
    label = (items[np.cumsum(lengths) - 1] % 4 == target % 4).astype(np.float32).reshape(-1, 1)
    shape = [BATCH, LENGTH]
    features = {"hist": tf.SparseTensor(indices, items, shape), "hist_time": tf.SparseTensor(indices, times, shape),
                "target": tf.constant(target.reshape(-1, 1))}
    fc = tf.contrib.feature_column
    history = tf.feature_column.embedding_column(
        fc.sequence_categorical_column_with_identity("hist", VOCAB), DIM,
        initializer=tf.truncated_normal_initializer(stddev=0.05, seed=51))
    sequence, length = fc.sequence_input_layer(features, [history, fc.sequence_numeric_column("hist_time")])
    target_input = tf.feature_column.input_layer(features, [tf.feature_column.embedding_column(
        tf.feature_column.categorical_column_with_identity("target", VOCAB), DIM,
        initializer=tf.truncated_normal_initializer(stddev=0.05, seed=52))])
    with tf.variable_scope("self_attention"):
        query, key, value = (tf.layers.dense(sequence, DIM, name=n, kernel_initializer=tf.glorot_uniform_initializer(seed=53 + i))
                             for i, n in enumerate(("query", "key", "value")))
        scores = tf.matmul(query, key, transpose_b=True) / np.sqrt(DIM)
        mask = tf.expand_dims(tf.sequence_mask(length, tf.shape(sequence)[1]), 1)
        scores = tf.where(tf.tile(mask, [1, tf.shape(scores)[1], 1]), scores, tf.fill(tf.shape(scores), -1e9))
        attended = tf.contrib.layers.layer_norm(tf.matmul(tf.nn.softmax(scores), value) + query)
    pooled = tf.reduce_sum(attended * tf.expand_dims(tf.sequence_mask(length, tf.shape(sequence)[1], tf.float32), -1), 1)
    pooled = pooled / tf.cast(tf.expand_dims(length, 1), tf.float32)
    net = tf.layers.dense(tf.concat([pooled, target_input], 1), 16, activation=tf.nn.relu,
                          kernel_initializer=tf.glorot_uniform_initializer(seed=57))
    logits = tf.layers.dense(net, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=58))
    loss = tf.losses.sigmoid_cross_entropy(label, logits)
    train_op = tf.contrib.layers.optimize_loss(loss, tf.train.get_or_create_global_step(), 0.05, "Adagrad",
                                               clip_gradients=5.0, summaries=[])
    return {"loss": loss, "train_op": train_op, "report": variables_report}


MODELS = {"deepfm_bn": deepfm_bn, "bst": bst}
MODELS.update((name, contrib_optimizer(name)) for name in ("lazyadam", "adamw", "momentumw", "moving_average"))


if __name__ == "__main__":
    work_dir, model = sys.argv[1:3]
    checkpoints.run(MODELS[model], work_dir, *sys.argv[3:])
