"""A Keras functional model, as TF 1.x-era libraries (DeepCTR's DIEN) write it: a custom layer subclassing
tensorflow.python.keras's Layer whose call runs tf.nn.dynamic_rnn over a legacy tf.nn.rnn_cell.GRUCell,
then a Dense layer, compiled and fit.

    python keras_rnn_layer.py WORK_DIR

In TF 2.6 the cell is the `keras` package's and the custom layer tensorflow.python.keras's: two Keras
copies. Without the wheel's bridge the cell took itself for a top-level functional-API call inside
the while loop and waited forever for the graph's lock. Prints one JSON line: output shape, layer
count, weights saved to HDF5, and the per-epoch losses.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.keras.layers import Dense, Input, Layer
from tensorflow.python.keras.models import Model


class GRUSummary(Layer):
    """The last state of TF 1.x's dynamic_rnn over a GRUCell."""

    def __init__(self, units, **kwargs):
        super(GRUSummary, self).__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.cell = tf.nn.rnn_cell.GRUCell(self.units, kernel_initializer=tf.glorot_uniform_initializer(seed=81))
        super(GRUSummary, self).build(input_shape)

    def call(self, inputs):
        _, state = tf.nn.dynamic_rnn(self.cell, inputs, dtype=tf.float32)
        return state

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.units)


def main(work_dir):
    tf.set_random_seed(0)
    rng = np.random.RandomState(0)
    sequence = Input(shape=(5, 3), name="sequence")
    state = GRUSummary(4, name="gru_summary")(sequence)
    output = Dense(1, activation="sigmoid", kernel_initializer=tf.glorot_uniform_initializer(seed=82))(state)
    model = Model(sequence, output)
    model.compile(tf.train.GradientDescentOptimizer(0.5), "binary_crossentropy")
    x = rng.rand(32, 5, 3).astype("float32")
    y = (x.sum(axis=(1, 2)) > 7.5).astype("float32")
    history = model.fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False)
    path = os.path.join(work_dir, "weights.h5")
    model.save_weights(path)
    import h5py
    with h5py.File(path, "r") as saved:
        names = []
        saved.visit(lambda name: names.append(name) if isinstance(saved[name], h5py.Dataset) else None)
    print(json.dumps({"output_shape": [None if d is None else int(d) for d in model.output_shape],
                      "layers": len(model.layers), "saved_weights": len(names),
                      "losses": [float(loss) for loss in history.history["loss"]]}))


if __name__ == "__main__":
    main(*sys.argv[1:])
