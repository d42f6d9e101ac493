"""A dense layer's batch normalization in retf's kernels (batch_moments) against TensorFlow's ops, same run, in turns.

    retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env DIR/venv \
        python bench/bench_batch_norm.py [--repeat N] [--threads T]

tf.layers.batch_normalization(x, training=True) of a dense layer's output x computes tf.nn.moments(x, [0]) and
tf.nn.batch_normalization over the matrix; TensorFlow builds them from a dozen ops (a mean, a squared difference, a
second mean, an rsqrt and the products and sums around them), each a pass over the matrix or its gradient. The
wheel's batch_moments switch routes both into retf's kernels (Retf>Moments and Retf>BatchNormalize and their
gradients). For each shape, one graph holds the training-mode layer twice on the same input and weights, once with
TensorFlow's functions and once with the routed ones, and their forward pass with the gradients of the input, gamma
and beta runs in turns. The shapes are the public-style programs' dense layers at their batches (DeepFM's
at 2048, DLRM's and BST's at 512, DSSM's at 4096). Python 3.6 syntax (it runs in the target's interpreter).
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
EPSILON = 1e-3  # tf.layers.batch_normalization's
OFF = ("bench_batch_norm: batch_moments is off in this process (its recipe leaves it off, or RETF_BATCH_MOMENTS=0), so "
       "there is nothing to compare; run it in a tf1api wheel's environment without RETF_BATCH_MOMENTS=0")

# (what, the dense layer's output: batch x units); the layer normalizes each column over the batch
SHAPES = [
    ("DeepFM: 1024 units", (2048, 1024)),
    ("DeepFM: 256 units", (2048, 256)),
    ("DeepFM: 32 units", (2048, 32)),
    ("DLRM, BST: 512 units", (512, 512)),
    ("DLRM: 64 units", (512, 64)),
    ("DSSM: 256 units", (4096, 256)),
]


def forward_and_gradients(x, gamma, beta, moments, batch_normalization):
    """Sums of the training-mode layer's output and of the gradients of its input, gamma and beta."""
    mean, variance = moments(x, [0])
    output = batch_normalization(x, mean, variance, beta, gamma, EPSILON)
    weight = tf.constant(np.random.RandomState(1).uniform(-1, 1, x.shape.as_list()).astype(np.float32))
    gradients = tf.gradients(tf.reduce_sum(output * weight), [x, gamma, beta])
    return [tf.reduce_sum(t) for t in [output] + gradients]  # fetched: Grappler prunes a tf.group of pure ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="timed calls of each side per shape")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TensorFlow's default)")
    args = parser.parse_args()
    routed_moments, routed_normalization = v1.nn.moments, v1.nn.batch_normalization
    if getattr(routed_moments, "original", None) is None or getattr(routed_normalization, "original", None) is None:
        sys.exit(OFF)
    config = v1.ConfigProto(intra_op_parallelism_threads=args.threads)
    rng = np.random.RandomState(0)
    print("TensorFlow {} (API {}), intra-op threads {}; forward and gradients, median ms of {} calls each, the two "
          "sides in turns".format(versions.__version__, tf.__version__, args.threads or "default", args.repeat))
    print("{:<26} {:>13} {:>8} {:>15} {:>12}".format("layer", "input", "retf ms", "TensorFlow ms", "TF / retf"))
    for what, shape in SHAPES:
        with tf.Graph().as_default():
            x = tf.Variable(rng.uniform(-2, 2, shape).astype(np.float32))
            gamma = tf.Variable(rng.uniform(0.5, 1.5, shape[1:]).astype(np.float32))
            beta = tf.Variable(rng.uniform(-0.5, 0.5, shape[1:]).astype(np.float32))
            retf = forward_and_gradients(x, gamma, beta, routed_moments, routed_normalization)
            stock = forward_and_gradients(x, gamma, beta, routed_moments.original, routed_normalization.original)
            kinds = {op.type for op in tf.compat.v1.get_default_graph().get_operations()}
            if "Retf>Moments" not in kinds or "Retf>BatchNormalize" not in kinds:
                sys.exit(OFF)
            with v1.Session(config=config) as session:
                session.run(v1.global_variables_initializer())
                retf_time, stock_time = interleaved_medians([functools.partial(session.run, retf),
                                                             functools.partial(session.run, stock)], args.repeat)
        print("{:<26} {:>13} {:>8.2f} {:>15.2f} {:>11.2f}x".format(what, str(list(shape)), retf_time * 1e3,
                                                                   stock_time * 1e3, stock_time / retf_time))


if __name__ == "__main__":
    main()
