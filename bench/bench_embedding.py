"""Fused sparse embedding lookup (retf) against tf.nn.embedding_lookup_sparse, same run; then the fused safe
lookup against tf.nn.safe_embedding_lookup_sparse.

    python bench/bench_embedding.py   # a Python with TensorFlow and a built retf importable

Goal: forward + backward (the IndexedSlices gradient of the table) >= 2x faster than
tf.nn.embedding_lookup_sparse at batch 4,096 x 26 slots x dim 16 from a 1M-row table.
Both read the table as a resource variable. Median of timed steps after warm-up; the four steps
of a case are timed in turns.

The safe lookups (what every feature column's embedding calls): retf.nn.safe_embedding_lookup_sparse, one op and its
gradient, against TensorFlow's function around retf's fused lookup (the 1.x API wheel without the safe op) and
TensorFlow's function alone; the six steps of a case in turns.
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


def sequence_batch(rng, batch, length, vocab):
    """A sequence column's ids, [batch, length, 1]: each example's history, of 0 to length ids, as
    sequence_input_layer's lookups take them."""
    lengths = rng.randint(0, length + 1, batch)
    indices = np.array([[b, t, 0] for b in range(batch) for t in range(lengths[b])], np.int64).reshape(-1, 3)
    ids = rng.randint(0, vocab, len(indices)).astype(np.int64)
    return tf.SparseTensor(tf.constant(indices), tf.constant(ids), tf.constant([batch, length, 1], tf.int64)), None


def pruned_batch(rng, batch, slots, vocab):
    """A weighted column's ids and weights with what the safe lookup prunes: ids -1 and weights 0 in some slots."""
    ids, weights = sparse_batch(rng, batch, slots, vocab, True)
    values = ids.values.numpy()
    values[rng.rand(len(values)) < 0.2] = -1
    kept = weights.values.numpy()
    kept[rng.rand(len(kept)) < 0.1] = 0.0
    return (tf.SparseTensor(ids.indices, tf.constant(values), ids.dense_shape),
            tf.SparseTensor(weights.indices, tf.constant(kept), weights.dense_shape))


def tensorflows_safe_around_fused(*args, **kwargs):
    """TensorFlow's safe_embedding_lookup_sparse with retf's fused lookup inside, as the 1.x API routes it without
    the safe op."""
    from tensorflow.python.ops import embedding_ops
    module_lookup = embedding_ops.embedding_lookup_sparse
    embedding_ops.embedding_lookup_sparse = retf.nn.embedding_lookup_sparse
    try:
        return retf.nn._STOCK_SAFE_LOOKUP(*args, **kwargs)
    finally:
        embedding_ops.embedding_lookup_sparse = module_lookup


def safe_lookups(rng):
    cases = [  # name, vocab, dim, combiner, the batch's ids and weights
        ("DIN's history: 2,048 x 50 x 18 from 100k, mean", 100000, 18, "mean", sequence_batch(rng, 2048, 50, 100000)),
        ("W&D's column: 2,048 x 1 x 64 from 10k, mean", 10000, 64, "mean", sparse_batch(rng, 2048, 1, 10000, False)),
        ("4,096 x 8 x 16 from 100k, -1 ids, sqrtn, weighted", 100000, 16, "sqrtn", pruned_batch(rng, 4096, 8, 100000)),
    ]
    header = "{:<52} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}"
    print("\nsafe_embedding_lookup_sparse: retf's op, TensorFlow's function around retf's lookup, TensorFlow's alone")
    print(header.format("case", "fwd ms", "around", "tf", "f+b ms", "around", "tf"))
    for name, vocab, dim, combiner, (sp_ids, sp_weights) in cases:
        table = tf.Variable(rng.uniform(-1, 1, (vocab, dim)).astype(np.float32))
        sides = [steps(lookup, table, sp_ids, sp_weights, combiner) for lookup in (
            retf.nn.safe_embedding_lookup_sparse, tensorflows_safe_around_fused, retf.nn._STOCK_SAFE_LOOKUP)]
        np.testing.assert_allclose(sides[0][0]().numpy(), sides[2][0]().numpy(), rtol=1e-5, atol=1e-5)
        times = interleaved_medians([side[0] for side in sides] + [side[1] for side in sides], repeat=40)
        print(header.format(name, *("%.2f" % (t * 1e3) for t in times[:3]), *("%.2f" % (t * 1e3) for t in times[3:])))
        del table


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
    safe_lookups(rng)


if __name__ == "__main__":
    main()
