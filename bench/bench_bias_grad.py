"""BiasAddGrad on retf's kernel (fast_bias_grad) against TensorFlow's, same run, in turns.

    retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env DIR/venv \
        python bench/bench_bias_grad.py [--repeat N] [--threads T]

A dense layer's bias gradient is the column sums of its output's gradient, BiasAddGrad; the wheel's fast_bias_grad
switch labels the node for retf's kernel. For each shape, one graph holds the node twice on the same gradient, one
labelled, and the two run in turns; each call's time includes the session's own overhead (about 0.05 ms here), the
same on both sides. The shapes are the public-style programs' dense layers at their batches: DIN's activation unit
over 2048 x 50 behaviour steps (its 80-, 40- and 1-unit layers), DIEN's auxiliary MLP over 128 x 49 steps, DeepFM's
and W&D's MLPs at 2048, DLRM's and BST's at 512. Python 3.6 syntax (it runs in the target's interpreter).
"""

import argparse
import functools
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import versions  # noqa: E402
from timing import interleaved_medians  # noqa: E402  (bench/timing.py, beside this file)

v1 = tf.compat.v1
OFF = ("bench_bias_grad: fast_bias_grad is off in this process (its recipe leaves it off, or RETF_FAST_BIAS_GRAD=0), "
       "so there is nothing to compare; run it in a tf1api wheel's environment without RETF_FAST_BIAS_GRAD=0")

# (what, the layer's output gradient: rows x units)
SHAPES = [
    ("DIN attention: 80 units", (102400, 80)),
    ("DIN attention: 40 units", (102400, 40)),
    ("DIN attention: 1 unit", (102400, 1)),
    ("DIEN auxiliary: 100 units", (6272, 100)),
    ("DeepFM, W&D: 1024 units", (2048, 1024)),
    ("DeepFM, W&D: 256 units", (2048, 256)),
    ("DLRM, BST: 512 units", (512, 512)),
    ("DLRM: 64 units", (512, 64)),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=41, help="timed calls of each side per shape")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TensorFlow's default)")
    args = parser.parse_args()
    from tensorflow.python.ops import gen_nn_ops

    routed = gen_nn_ops.bias_add_grad
    if getattr(routed, "original", None) is None:
        sys.exit(OFF)
    config = v1.ConfigProto(intra_op_parallelism_threads=args.threads)
    rng = np.random.RandomState(0)
    print("TensorFlow {} (API {}), intra-op threads {}; median ms of {} calls each, the two sides in turns".format(
        versions.__version__, tf.__version__, args.threads or "default", args.repeat))
    print("{:<26} {:>13} {:>8} {:>15} {:>12} {:>11}".format("layer", "gradient", "retf ms", "TensorFlow ms",
                                                          "TF / retf", "retf GB/s"))
    for what, shape in SHAPES:
        with tf.Graph().as_default():
            gradient = tf.Variable(rng.uniform(-1, 1, shape).astype(np.float32))
            ours = routed(gradient)
            stock = routed.original(gradient)
            if "_kernel" not in ours.op.node_def.attr:
                sys.exit(OFF)
            with v1.Session(config=config) as session:
                session.run(v1.global_variables_initializer())
                np.testing.assert_allclose(*session.run([ours, stock]), rtol=1e-3, atol=1e-2)
                retf_time, stock_time = interleaved_medians([functools.partial(session.run, ours.op),
                                                             functools.partial(session.run, stock.op)], args.repeat)
        print("{:<26} {:>13} {:>8.3f} {:>15.3f} {:>11.2f}x {:>11.1f}".format(
            what, str(list(shape)), retf_time * 1e3, stock_time * 1e3, stock_time / retf_time,
            np.prod(shape) * 4 / retf_time / 1e9))


if __name__ == "__main__":
    main()
