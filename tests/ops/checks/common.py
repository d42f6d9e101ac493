"""What several op families' checks share: dtypes, tolerances, sparse batches, index steps, the runner."""

import os

import numpy as np
import tensorflow as tf

# Checks that need a process of their own start the runner again with a probe's flag (see its main).
RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "check_retf_ops.py")


FLOATS = (np.float32, np.float64)
INDEX_TYPES = (np.int32, np.int64)
COMBINERS = ("sum", "mean", "sqrtn")
# Relative tolerance of one kernel call against its NumPy / TensorFlow reference.
RTOL = {np.float32: 2e-6, np.float64: 1e-13}


def random_sparse_batch(rng, batch, vocab, max_per_row, empty_rows=True):
    """Row-major SparseTensor pieces: indices [nnz, 2], ids, weights; some rows empty, duplicate ids."""
    indices, ids = [], []
    for row in range(batch):
        count = rng.randint(0 if empty_rows else 1, max_per_row + 1)
        for column in range(count):
            indices.append([row, column])
            ids.append(rng.randint(0, vocab))
    indices = np.array(indices, dtype=np.int64).reshape(-1, 2)
    weights = rng.uniform(0.1, 2.0, size=len(ids))
    return indices, np.array(ids), weights


def sparse(indices, values, batch, width):
    return tf.SparseTensor(tf.constant(indices, tf.int64), tf.constant(values), tf.constant([batch, width], tf.int64))


def assert_close(test, actual, expected, dtype, message=""):
    np.testing.assert_allclose(actual, expected, rtol=RTOL[dtype], atol=RTOL[dtype], err_msg=message)


# Distinct rows, out of order, far more than a 4 KiB page apart on average in a table of 3,000 rows
# of 40 values, as a sparse optimizer gets them from a large table; then a step with a duplicate.
FAR_APART_INDEX_STEPS = [[2999, 0, 1500, 700, 2100, 31], [1, 2998, 1400], [2999, 0, 2999]]
