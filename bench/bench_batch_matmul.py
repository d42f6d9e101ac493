"""retf's BatchMatMulV2 kernel (small_batch_matmul) against TensorFlow's own, same run, in turns.

    RETF_API=2 retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env DIR/venv \
        python bench/bench_batch_matmul.py [--repeat N] [--threads T]

For each product (x's and y's shapes, the adjoints) it builds TensorFlow's BatchMatMulV2 twice on the same
variables, once with retf's kernel label, and runs the two nodes in turns. The shapes: a transformer block over
a behaviour sequence as public BST code writes it (batch 512, 4 heads of 8 over 50 steps: the scores, the
weighted sum, and the four products of their gradient), DIN's attention pooling, BERT-base's attention at 128
and 512 tokens (batch 32 and 8, 12 heads of 64), then larger and narrower matrices, which retf's kernel hands
to TensorFlow's (y past 65,536 values, fewer than 8 columns: batch_matmul_kernels.cc). Python 3.6 syntax (it
runs in the target's interpreter).
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

v1 = tf.compat.v1

# (what, x's shape, y's shape, adj_x, adj_y)
PRODUCTS = [
    ("BST scores q k^T", (2048, 50, 8), (2048, 50, 8), False, True),
    ("BST weighted sum P v", (2048, 50, 50), (2048, 50, 8), False, False),
    ("BST grad q: dS k", (2048, 50, 50), (2048, 50, 8), False, False),
    ("BST grad k: dS^T q", (2048, 50, 50), (2048, 50, 8), True, False),
    ("BST grad P: dA v^T", (2048, 50, 8), (2048, 50, 8), False, True),
    ("BST grad v: P^T dA", (2048, 50, 50), (2048, 50, 8), True, False),
    ("DIN pooling", (512, 1, 50), (512, 50, 36), False, False),
    ("BERT-128 scores", (32, 12, 128, 64), (32, 12, 128, 64), False, True),
    ("BERT-128 weighted sum", (32, 12, 128, 128), (32, 12, 128, 64), False, False),
    ("BERT-128 grad v", (32, 12, 128, 128), (32, 12, 128, 64), True, False),
    ("BERT-512 scores", (8, 12, 512, 64), (8, 12, 512, 64), False, True),
    ("BERT-512 weighted sum", (8, 12, 512, 512), (8, 12, 512, 64), False, False),
    ("4096 x [10, 10] by [10, 10]", (4096, 10, 10), (4096, 10, 10), False, False),
    ("2 x [128, 128] by [128, 128]", (2, 128, 128), (2, 128, 128), False, False),
    ("8 x [256, 256] by [256, 256]", (8, 256, 256), (8, 256, 256), False, False),
    ("1 x [512, 512] by [512, 512]", (1, 512, 512), (1, 512, 512), False, False),
    ("2048 x [50, 8] by [8, 1]", (2048, 50, 8), (2048, 8, 1), False, False),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="timed calls of each side per product")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: TensorFlow's default)")
    args = parser.parse_args()
    config = v1.ConfigProto(intra_op_parallelism_threads=args.threads)
    rng = np.random.RandomState(0)
    print("TensorFlow {}, intra-op threads {}; median ms of {} calls each, the two sides in turns".format(
        tf.version.VERSION, args.threads or "default", args.repeat))
    print("{:<30} {:>22} {:>22} {:>5} {:>9} {:>9} {:>8}".format("product", "x", "y", "adj", "retf ms", "TF ms",
                                                                "TF/retf"))
    for what, x_shape, y_shape, adj_x, adj_y in PRODUCTS:
        with tf.Graph().as_default() as graph:
            x = tf.Variable(rng.uniform(-1, 1, x_shape).astype(np.float32))
            y = tf.Variable(rng.uniform(-1, 1, y_shape).astype(np.float32))
            theirs = tf.raw_ops.BatchMatMulV2(x=x, y=y, adj_x=adj_x, adj_y=adj_y).op
            with graph._kernel_label_map({"BatchMatMulV2": retf.ops.BATCH_MATMUL_LABEL}):
                ours = tf.raw_ops.BatchMatMulV2(x=x, y=y, adj_x=adj_x, adj_y=adj_y).op
            with v1.Session(config=config) as session:
                session.run(v1.global_variables_initializer())
                retf_time, tf_time = interleaved_medians([functools.partial(session.run, ours),
                                                          functools.partial(session.run, theirs)], args.repeat)
        print("{:<30} {:>22} {:>22} {:>5} {:>9.2f} {:>9.2f} {:>7.2f}x".format(
            what, str(list(x_shape)), str(list(y_shape)), ("x" if adj_x else "") + ("y" if adj_y else "") or "-",
            retf_time * 1e3, tf_time * 1e3, tf_time / retf_time))


if __name__ == "__main__":
    main()
