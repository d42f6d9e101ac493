"""Keras's LayerNormalization in retf's kernels, in TensorFlow's ops as TF 1.15's Keras computes them (moments), and
in TF 2.x's fused form, same run, in turns.

    retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env DIR/venv \
        python bench/bench_layer_norm.py [--repeat N] [--threads T]

Keras 2.x's LayerNormalization normalizes over the last axes with FusedBatchNormV3: the rows become the channels of
an NCHW image of one sample, which TensorFlow's CPU kernels transpose both ways, forward and in the gradient. TF
1.15's Keras (and tf.contrib.layers.layer_norm) computes tf.nn.moments and tf.nn.batch_normalization instead, which
is what the 1.x API's layer_norm_moments switch brings back, and which its layer_norm_kernels switch runs in retf's
kernels over the last axis. For each shape, one graph holds the same layer three times on the same input and
weights: the moments form through the routed functions (retf's kernels), through TensorFlow's own (the originals
the routing keeps), and the fused form; their forward pass with the gradients of the input, gamma and beta runs in
turns. Where the process routes no layer normalization (RETF_LAYER_NORM_KERNELS=0, or a wheel without it), the
retf column is left out. The shapes: public BST's add & norm (batch 512, 50 steps, 32 wide), BERT-base's (batch 32
at 128 tokens, batch 8 at 512, 768 wide), and narrower and wider rows. Python 3.6 syntax (it runs in the target's
interpreter).
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
EPSILON = 1e-3  # Keras's

# (what, the input's shape); the layer normalizes the last axis
SHAPES = [
    ("BST add & norm", (512, 50, 32)),
    ("BERT-base, 128 tokens", (32, 128, 768)),
    ("BERT-base, 512 tokens", (8, 512, 768)),
    ("MLP rows of 64", (4096, 64)),
    ("MLP rows of 1024", (4096, 1024)),
    ("rows of 8", (65536, 8)),
]


def moments_form(x, gamma, beta, moments, batch_normalization):
    """The layer as the non-fused Keras layer computes it, with the given tf.nn functions."""
    mean, variance = moments(x, [x.shape.rank - 1], keep_dims=True)
    return batch_normalization(x, mean, variance, offset=beta, scale=gamma, variance_epsilon=EPSILON)


def fused_form(x, gamma, beta):
    """The layer as TF 2.x's Keras computes it, on the same weights."""
    layer = tf.keras.layers.LayerNormalization(axis=-1, epsilon=EPSILON)
    layer.build(x.shape)
    layer._fused = True  # the form build() chose, set either way
    layer.gamma, layer.beta = gamma, beta
    return layer(x)


def forward_and_gradients(x, gamma, beta, output):
    """Sums of the layer's output and of the gradients of its input and weights."""
    weight = tf.constant(np.random.RandomState(1).uniform(-1, 1, x.shape.as_list()[-1:]).astype(np.float32))
    gradients = tf.gradients(tf.reduce_sum(output * weight), [x, gamma, beta])
    return [tf.reduce_sum(t) for t in [output] + gradients]  # fetched: Grappler prunes a tf.group of pure ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="timed calls of each side per shape")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TensorFlow's default)")
    args = parser.parse_args()
    config = v1.ConfigProto(intra_op_parallelism_threads=args.threads)
    routed_moments, routed_normalization = v1.nn.moments, v1.nn.batch_normalization
    originals = (getattr(routed_moments, "original", routed_moments),
                 getattr(routed_normalization, "original", routed_normalization))
    rng = np.random.RandomState(0)
    print("TensorFlow {} (API {}), intra-op threads {}; forward and gradients, median ms of {} calls each, the forms "
          "in turns".format(versions.__version__, tf.__version__, args.threads or "default", args.repeat))
    print("{:<24} {:>16} {:>8} {:>11} {:>9} {:>15} {:>12}".format(
        "shape", "input", "retf ms", "moments ms", "fused ms", "moments / retf", "fused / retf"))
    for what, shape in SHAPES:
        with tf.Graph().as_default():
            x = tf.Variable(rng.uniform(-2, 2, shape).astype(np.float32))
            gamma = tf.Variable(rng.uniform(0.5, 1.5, shape[-1:]).astype(np.float32))
            beta = tf.Variable(rng.uniform(-0.5, 0.5, shape[-1:]).astype(np.float32))
            forms = [forward_and_gradients(x, gamma, beta, moments_form(x, gamma, beta, *originals)),
                     forward_and_gradients(x, gamma, beta, fused_form(x, gamma, beta))]
            before = {op.type for op in v1.get_default_graph().get_operations()}
            retf = forward_and_gradients(x, gamma, beta, moments_form(x, gamma, beta, routed_moments,
                                                                      routed_normalization))
            routed = "Retf>LayerMoments" in {op.type for op in v1.get_default_graph().get_operations()} - before
            with v1.Session(config=config) as session:
                session.run(v1.global_variables_initializer())
                steps = [functools.partial(session.run, form) for form in ([retf] if routed else []) + forms]
                times = interleaved_medians(steps, args.repeat)
        retf_time, (moments_time, fused_time) = (times[0] if routed else None), times[-2:]
        print("{:<24} {:>16} {:>8} {:>11.2f} {:>9.2f} {:>15} {:>12}".format(
            what, str(list(shape)), "{:.2f}".format(retf_time * 1e3) if routed else "-", moments_time * 1e3,
            fused_time * 1e3, "{:.2f}x".format(moments_time / retf_time) if routed else "-",
            "{:.2f}x".format(fused_time / retf_time) if routed else "{:.2f}x (of moments)".format(
                fused_time / moments_time)))


if __name__ == "__main__":
    main()
