"""Fused sparse embedding lookup (retf) against tf.nn.embedding_lookup_sparse, same run.

    python bench/bench_embedding.py   # a Python with TensorFlow and a built retf importable

Goal: forward + backward (the IndexedSlices gradient of the table) >= 2x faster than
tf.nn.embedding_lookup_sparse at batch 4,096 x 26 slots x dim 16 from a 1M-row table.
Both read the table as a resource variable. Median of timed steps after warm-up; the four steps
of a case are timed in turns.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import interleaved_medians  # noqa: E402  (bench/timing.py, beside this file)

import retf  # noqa: E402


def sparse_batch(rng, batch, slots, vocab, weighted):
    """Every example has `slots` ids (one per feature slot), like a CTR model's categorical input."""
    rows = np.repeat(np.arange(batch), slots)
    columns = np.tile(np.arange(slots), batch)
    indices = tf.constant(np.stack([rows, columns], axis=1), tf.int64)
    shape = tf.constant([batch, slots], tf.int64)
    ids = tf.SparseTensor(indices, tf.constant(rng.randint(0, vocab, size=batch * slots), tf.int64), shape)
    weights = None
    if weighted:
        weights = tf.SparseTensor(indices, tf.constant(rng.uniform(0.5, 1.5, batch * slots).astype(np.float32)),
                                  shape)
    return ids, weights


def steps(lookup, table, sp_ids, sp_weights, combiner):
    @tf.function
    def forward():
        return lookup(table, sp_ids, sp_weights, combiner=combiner)

    @tf.function
    def forward_backward():
        with tf.GradientTape() as tape:
            out = lookup(table, sp_ids, sp_weights, combiner=combiner)
            loss = tf.reduce_sum(out * out)
        grad = tape.gradient(loss, table)
        return grad.values, grad.indices

    return forward, forward_backward


def main():
    rng = np.random.RandomState(0)
    cases = [  # name, vocab, dim, batch, slots, combiner, weighted
        ("4,096 x 26 x 16 from 1M, mean", 1000000, 16, 4096, 26, "mean", False),
        ("4,096 x 26 x 16 from 1M, sum, weighted", 1000000, 16, 4096, 26, "sum", True),
        ("1,024 x 100 x 64 from 200k, sqrtn", 200000, 64, 1024, 100, "sqrtn", False),
        ("16,384 x 8 x 32 from 100k, mean, weighted", 100000, 32, 16384, 8, "mean", True),
    ]
    print("TensorFlow {}, {} intra-op threads".format(tf.__version__, os.cpu_count()))
    header = "{:<42} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}"
    print(header.format("case", "fwd ms", "tf fwd", "ratio", "f+b ms", "tf f+b", "ratio"))
    verdicts = []
    for name, vocab, dim, batch, slots, combiner, weighted in cases:
        table = tf.Variable(rng.uniform(-1, 1, (vocab, dim)).astype(np.float32))
        sp_ids, sp_weights = sparse_batch(rng, batch, slots, vocab, weighted)
        ours = steps(retf.nn.embedding_lookup_sparse, table, sp_ids, sp_weights, combiner)
        stock = steps(tf.compat.v1.nn.embedding_lookup_sparse, table, sp_ids, sp_weights, combiner)
        np.testing.assert_allclose(ours[0]().numpy(), stock[0]().numpy(), rtol=1e-5, atol=1e-5)
        times = interleaved_medians([ours[0], stock[0], ours[1], stock[1]], repeat=40)
        print(header.format(name, "%.2f" % (times[0] * 1e3), "%.2f" % (times[1] * 1e3),
                            "%.1fx" % (times[1] / times[0]), "%.2f" % (times[2] * 1e3), "%.2f" % (times[3] * 1e3),
                            "%.1fx" % (times[3] / times[2])))
        verdicts.append((name, times[3] / times[2]))
        del table
    name, ratio = verdicts[0]
    print("\n{}: forward + backward {:.1f}x faster (goal >= 2x: {})".format(name, ratio,
                                                                           "met" if ratio >= 2 else "MISSED"))


if __name__ == "__main__":
    main()
