"""retf's transposed product (a^T b, a dense layer's weight gradient) against TensorFlow's, same run, in turns.

    RETF_API=2 retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env DIR/venv \
        python bench/bench_transposed_matmul.py [--repeat N] [--threads T]

For each shape (K rows: the batch, times the sequence for an attention unit; M x N: the weight) it times
`retf.ops.transposed_matmul(a, b)` and `tf.matmul(a, b, transpose_a=True)`, the product TensorFlow's MatMul
gradient computes for the weight, in one graph session each, on the same variables, in turns. The weights
whose gradient the 1.x API routes to retf (retf.ops.WEIGHT_GRADIENT_MAX_VALUES) are set from this table: the
shapes where retf's product wins at every batch. Python 3.6 syntax (it runs in the target's interpreter).
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

# K x M x N: DIN's activation unit (512 x 50 positions; 144 -> 80 -> 40), its MLP, DSSM's towers (batch
# 4096), MMoE's experts (batch 512), W&D's and DCN's MLPs (batch 1024), then squares around the limit.
SHAPES = [
    (25600, 144, 80), (25600, 80, 40), (512, 200, 80), (512, 80, 1),
    (4096, 128, 256), (4096, 256, 128), (4096, 64, 32),
    (512, 240, 256), (512, 256, 192),
    (1024, 429, 1024), (1024, 1024, 512), (1024, 512, 256),
    (1024, 256, 256), (4096, 256, 256), (1024, 256, 512), (4096, 512, 512),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="timed calls of each side per shape")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TensorFlow's default)")
    args = parser.parse_args()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads)
    rng = np.random.RandomState(0)
    print("TensorFlow {}, intra-op threads {}; median ms of {} calls each, the two sides in turns".format(
        tf.version.VERSION, args.threads or "default", args.repeat))
    print("{:>20} {:>8} {:>10} {:>10} {:>9}  {}".format("K x M x N", "M x N", "retf ms", "TF ms", "TF/retf",
                                                         "routed"))
    for k_size, m_size, n_size in SHAPES:
        with tf.Graph().as_default():
            a = tf.Variable(rng.uniform(-1, 1, (k_size, m_size)).astype(np.float32))
            b = tf.Variable(rng.uniform(-1, 1, (k_size, n_size)).astype(np.float32))
            ours = retf.ops.transposed_matmul(a, b).op
            theirs = tf.linalg.matmul(a, b, transpose_a=True).op
            with tf.compat.v1.Session(config=config) as session:
                session.run(tf.compat.v1.global_variables_initializer())
                retf_time, tf_time = interleaved_medians([functools.partial(session.run, ours),
                                                          functools.partial(session.run, theirs)], args.repeat)
        routed = m_size * n_size <= retf.ops.WEIGHT_GRADIENT_MAX_VALUES
        print("{:>20} {:>8,} {:>10.3f} {:>10.3f} {:>8.2f}x  {}".format(
            "{} x {} x {}".format(k_size, m_size, n_size), m_size * n_size, retf_time * 1e3, tf_time * 1e3,
            tf_time / retf_time, "yes" if routed else "no"))


if __name__ == "__main__":
    main()
