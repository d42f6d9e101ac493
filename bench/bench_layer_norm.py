"""Keras's LayerNormalization as TF 1.15's Keras computes it (moments) against TF 2.x's fused form, same run, in turns.

    retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env DIR/venv \
        python bench/bench_layer_norm.py [--repeat N] [--threads T]

Keras 2.x's LayerNormalization normalizes over the last axes with FusedBatchNormV3: the rows become the channels of
an NCHW image of one sample, which TensorFlow's CPU kernel transposes both ways, forward and in the gradient. TF
1.15's Keras (and tf.contrib.layers.layer_norm) computes tf.nn.moments and tf.nn.batch_normalization instead, which
is what the 1.x API's layer_norm_moments switch brings back. For each shape, one graph holds the same layer twice
on the same input and weights, once in each form, and their forward pass with the gradients of the input, gamma and
beta runs in turns. The shapes: public BST's add & norm (batch 512, 50 steps, 32 wide), BERT-base's (batch 32 at
128 tokens, batch 8 at 512, 768 wide), and narrower and wider rows. Python 3.6 syntax (it runs in the target's
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

# (what, the input's shape); the layer normalizes the last axis
SHAPES = [
    ("BST add & norm", (512, 50, 32)),
    ("BERT-base, 128 tokens", (32, 128, 768)),
    ("BERT-base, 512 tokens", (8, 512, 768)),
    ("MLP rows of 64", (4096, 64)),
    ("MLP rows of 1024", (4096, 1024)),
    ("rows of 8", (65536, 8)),
]


def forward_and_gradients(x, fused):
    """Sums of the layer's output and of the gradients of its input and weights, the layer built in one form."""
    layer = tf.keras.layers.LayerNormalization(axis=-1)
    layer.build(x.shape)
    layer._fused = fused  # the form build() chose, set either way (what the switch changes)
    output = layer(x)
    weight = tf.constant(np.random.RandomState(1).uniform(-1, 1, x.shape.as_list()[-1:]).astype(np.float32))
    gradients = tf.gradients(tf.reduce_sum(output * weight), [x, layer.gamma, layer.beta])
    return [tf.reduce_sum(t) for t in [output] + gradients]  # fetched: Grappler prunes a tf.group of pure ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="timed calls of each side per shape")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TensorFlow's default)")
    args = parser.parse_args()
    config = v1.ConfigProto(intra_op_parallelism_threads=args.threads)
    rng = np.random.RandomState(0)
    print("TensorFlow {} (API {}), intra-op threads {}; forward and gradients, median ms of {} calls each, the two "
          "forms in turns".format(versions.__version__, tf.__version__, args.threads or "default", args.repeat))
    print("{:<24} {:>16} {:>12} {:>10} {:>14}".format("shape", "input", "moments ms", "fused ms", "fused/moments"))
    for what, shape in SHAPES:
        with tf.Graph().as_default():
            x = tf.Variable(rng.uniform(-2, 2, shape).astype(np.float32))
            moments, fused = forward_and_gradients(x, False), forward_and_gradients(x, True)
            with v1.Session(config=config) as session:
                session.run(v1.global_variables_initializer())
                moments_time, fused_time = interleaved_medians([functools.partial(session.run, moments),
                                                                functools.partial(session.run, fused)], args.repeat)
        print("{:<24} {:>16} {:>12.2f} {:>10.2f} {:>13.2f}x".format(what, str(list(shape)), moments_time * 1e3,
                                                                   fused_time * 1e3, fused_time / moments_time))


if __name__ == "__main__":
    main()
