"""A Keras layer called at functional-API top level inside a tf.while_loop body: TensorFlow would evaluate its
constant inputs with a Session while the loop holds the graph's mutation lock (TF 1.15.5 waits forever
here too). The wheel raises a RuntimeError naming the cause.

    python loop_calls_keras.py WORK_DIR

Prints one JSON line: "built", or the error's type and message.
"""
import json

import tensorflow as tf

inputs = tf.keras.layers.Input(shape=(3,))
dense = tf.keras.layers.Dense(3)


def body(i, h):
    return i + 1, dense(h + inputs)


try:
    tf.while_loop(lambda i, h: i < 2, body, [tf.constant(0), tf.zeros_like(inputs)])
    print(json.dumps({"result": "built"}))
except RuntimeError as error:
    print(json.dumps({"result": type(error).__name__, "message": str(error)}))
