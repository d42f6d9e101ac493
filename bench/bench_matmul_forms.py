"""A dense layer's input gradient, g w^T, as TensorFlow's MatMul computes it and as the swapped product's transpose,
(w g^T)^T, same run, in turns.

    retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env DIR/venv \
        python bench/bench_matmul_forms.py [--batches 128,512,2048] [--repeat N]

For each batch B and layer (input width I, output width O: the public programs' wide first layers, DCN-V2's cross
layers, narrower ones) it times `tf.matmul(g, w, transpose_b=True)` ([B, O] x [I, O]^T, what MatMul's gradient
computes for x) and `tf.transpose(tf.matmul(w, g, transpose_b=True))`, in one graph session each, on the same
variables, in turns. retf.ops.input_gradient takes the swapped form where I >= 2B and I >= SWAPPED_INPUT_GRADIENT_MIN_COLUMNS
(the "routed" column). Python 3.6 syntax (it runs in the target's interpreter).
"""

import argparse
import functools
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import interleaved_medians  # noqa: E402  (bench/timing.py, beside this file)

import retf  # noqa: E402

# I x O: W&D's and DCN-V2's first layer (2,189 values a row), DCN-V2's cross layers, a 1024-512 layer, DeepFM's and
# our programs' first layer (429), DLRM's top (432), MMoE's experts (272), a 512-256 layer.
LAYERS = [(2189, 1024), (2189, 2189), (1024, 512), (429, 1024), (432, 512), (272, 256), (512, 256)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="128,512,2048", help="comma-separated batch sizes")
    parser.add_argument("--repeat", type=int, default=15, help="timed calls of each form per shape")
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    print("TensorFlow {}; median ms of {} calls each, the two forms in turns".format(tf.version.VERSION, args.repeat))
    print("{:>22} {:>12} {:>12} {:>9}  {}".format("B x O -> I", "TF ms", "swapped ms", "TF/swap", "routed"))
    for batch in (int(value) for value in args.batches.split(",")):
        for width, units in LAYERS:
            with tf.Graph().as_default():
                g = tf.Variable(rng.uniform(-1, 1, (batch, units)).astype(np.float32))
                w = tf.Variable(rng.uniform(-1, 1, (width, units)).astype(np.float32))
                theirs = tf.linalg.matmul(g, w, transpose_b=True).op
                swapped = tf.transpose(tf.linalg.matmul(w, g, transpose_b=True)).op
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    tf_time, swapped_time = interleaved_medians([functools.partial(session.run, theirs),
                                                                 functools.partial(session.run, swapped)], args.repeat)
            routed = width >= retf.ops.SWAPPED_INPUT_GRADIENT_MIN_COLUMNS and 2 * batch <= width
            print("{:>22} {:>12.2f} {:>12.2f} {:>8.2f}x  {}".format(
                "{} x {} -> {}".format(batch, units, width), tf_time * 1e3, swapped_time * 1e3, tf_time / swapped_time,
                "yes" if routed else "no"))


if __name__ == "__main__":
    main()
