"""A TF 1.15 classifier fed through placeholders: tf.layers.dense, Adam, v1 control flow, ref variables.

    python dense_adam.py WORK_DIR

Prints one JSON line: the loss after every step, the final accuracy, and what the graph is made of
(the class of a tf.Variable, the op types tf.cond and tf.while_loop produced, eager or not), so a
run under another TensorFlow can be compared with this one.
"""
import json
import sys

import numpy as np
import tensorflow as tf

STEPS = 40
BATCH = 64


def make_data(rng, rows=512, features=10):
    x = rng.normal(size=(rows, features)).astype(np.float32)
    w = rng.normal(size=(features, 1)).astype(np.float32)
    noise = 0.3 * rng.normal(size=(rows, 1)).astype(np.float32)
    y = (x.dot(w) + noise > 0).astype(np.float32)
    return x, y


def build(features):
    x = tf.placeholder(tf.float32, [None, features], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    training = tf.placeholder_with_default(False, [], name="training")
    hidden = tf.layers.dense(x, 16, activation=tf.nn.relu, name="hidden",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=1))
    hidden = tf.cond(training, lambda: hidden * 1.0, lambda: tf.identity(hidden))
    logits = tf.layers.dense(hidden, 1, name="logits",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=2))
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    correct = tf.equal(tf.cast(logits > 0, tf.float32), y)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))

    global_step = tf.train.get_or_create_global_step()
    examples_seen = tf.Variable(0, name="examples_seen", trainable=False)
    count = tf.assign_add(examples_seen, tf.shape(x)[0])
    with tf.control_dependencies([count]):
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)

    # A v1 while loop over a ref variable's value: sum 1..global_step.
    _, triangle = tf.while_loop(lambda i, total: i <= tf.cast(global_step, tf.int32),
                                lambda i, total: (i + 1, total + i), [tf.constant(1), tf.constant(0)])
    return dict(x=x, y=y, training=training, loss=loss, accuracy=accuracy, train_op=train_op,
                examples_seen=examples_seen, triangle=triangle, global_step=global_step)


def main(work_dir):
    tf.logging.set_verbosity(tf.logging.WARN)
    rng = np.random.RandomState(0)
    data_x, data_y = make_data(rng)
    tf.set_random_seed(42)
    model = build(data_x.shape[1])
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    losses = []
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(STEPS):
            start = (step * BATCH) % len(data_x)
            feed = {model["x"]: data_x[start:start + BATCH], model["y"]: data_y[start:start + BATCH],
                    model["training"]: True}
            loss, _ = sess.run([model["loss"], model["train_op"]], feed_dict=feed)
            losses.append(float(loss))
            if step % 10 == 0:
                tf.logging.info("step %d loss %.4f", step, loss)
        accuracy = sess.run(model["accuracy"], {model["x"]: data_x, model["y"]: data_y})
        seen, triangle, global_step = sess.run([model["examples_seen"], model["triangle"], model["global_step"]])
    op_types = set(op.type for op in tf.get_default_graph().get_operations())
    print(json.dumps({
        "losses": losses,
        "accuracy": float(accuracy),
        "examples_seen": int(seen),
        "global_step": int(global_step),
        "triangle": int(triangle),
        "variable_class": type(model["examples_seen"]).__name__,
        "v1_control_flow": sorted(op_types & {"Switch", "Merge", "Enter", "Exit", "LoopCond", "NextIteration"}),
        "v2_control_flow": sorted(op_types & {"If", "StatelessIf", "While", "StatelessWhile"}),
        "executing_eagerly": tf.executing_eagerly(),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
