"""Checks of the retf op package against NumPy and stock TensorFlow (run by the target interpreter).

    python check_retf_ops.py [-v] [TestClass[.test_name] ...]

Needs TensorFlow, NumPy and an importable, built ``retf`` package. Python 3.6 syntax. Exits
non-zero on failure. tests/ops/test_retf_ops.py runs it under $RETF_OPS_PYTHON.
"""

import ctypes
import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# DecodeCSVTest compares retf's DecodeCSV kernel with TensorFlow's, which must stay the default here (a
# wheel with v1_fast_decode_csv would otherwise make retf's every node's kernel at import).
os.environ["RETF_FAST_DECODE_CSV"] = "0"

# tensorflow first: a build whose numpy the environment's cannot serve (TF 2.11 in a numpy 1.18
# environment) refuses a numpy imported before it, and these checks are about the ops, not that.
import tensorflow as tf  # noqa: E402, I001
import numpy as np  # noqa: E402
from tensorflow.python.framework import versions  # noqa: E402

import retf  # noqa: E402

FLOATS = (np.float32, np.float64)
INDEX_TYPES = (np.int32, np.int64)
COMBINERS = ("sum", "mean", "sqrtn")
# Relative tolerance of one kernel call against its NumPy / TensorFlow reference.
RTOL = {np.float32: 2e-6, np.float64: 1e-13}


def lazy_adam_reference(var, m, v, grad, indices, lr, beta1, beta2, epsilon, beta1_power, beta2_power):
    """tfa LazyAdam in NumPy, in var's dtype: duplicates summed, then Adam on the touched rows."""
    var, m, v = var.copy(), m.copy(), v.copy()
    dtype = var.dtype.type
    lr, beta1, beta2, epsilon = dtype(lr), dtype(beta1), dtype(beta2), dtype(epsilon)
    lr_hat = lr * (np.sqrt(dtype(1) - dtype(beta2_power)) / (dtype(1) - dtype(beta1_power)))
    summed = {}
    for position, row in enumerate(indices.tolist()):
        summed[row] = grad[position].copy() if row not in summed else summed[row] + grad[position]
    for row, g in summed.items():
        m[row] = beta1 * m[row] + (dtype(1) - beta1) * g
        v[row] = beta2 * v[row] + (dtype(1) - beta2) * g * g
        var[row] -= lr_hat * m[row] / (np.sqrt(v[row]) + epsilon)
    return var, m, v


def dense_adam_reference(var, m, v, grad, indices, lr, beta1, beta2, epsilon, beta1_power, beta2_power):
    """tf.compat.v1.train.AdamOptimizer on an IndexedSlices gradient, in NumPy: every row decays and moves."""
    var, m, v = var.copy(), m.copy(), v.copy()
    dtype = var.dtype.type
    lr, beta1, beta2, epsilon = dtype(lr), dtype(beta1), dtype(beta2), dtype(epsilon)
    lr_hat = lr * np.sqrt(dtype(1) - dtype(beta2_power)) / (dtype(1) - dtype(beta1_power))
    summed = np.zeros_like(var)
    np.add.at(summed, indices, grad)
    m = beta1 * m + (dtype(1) - beta1) * summed
    v = beta2 * v + (dtype(1) - beta2) * summed * summed
    var -= lr_hat * m / (np.sqrt(v) + epsilon)
    return var, m, v


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


# Index vectors for the sparse Adam NumPy checks, one per step: duplicates, a single index, and
# [1, 3, 5, 7], strictly ascending, which is grouped without the sort. Rows 2, 4, 6, 8 are never named.
MIXED_INDEX_STEPS = [[1, 7, 1, 3, 1], [0, 9, 9], [5], [1, 3, 5, 7]]


# Distinct rows, out of order, far more than a 4 KiB page apart on average in a table of 3,000 rows
# of 40 values, as a sparse optimizer gets them from a large table; then a step with a duplicate.
FAR_APART_INDEX_STEPS = [[2999, 0, 1500, 700, 2100, 31], [1, 2998, 1400], [2999, 0, 2999]]


def run_adam_steps(test, op, reference, seed, dtype, index_dtype, shape, indices_per_step, steps):
    """Runs op (a retf.ops sparse Adam) for `steps` steps on resource variables and checks var, m and v
    against reference (its NumPy model) after each; returns var before and after."""
    rng = np.random.RandomState(seed)
    start = [rng.uniform(-1, 1, size=shape).astype(dtype) for _ in range(2)]
    var0, m0, v0 = start[0], start[1], np.abs(start[1]) * dtype(0.1)
    var, m, v = (tf.Variable(x) for x in (var0, m0, v0))
    expected = (var0, m0, v0)
    lr, beta1, beta2, epsilon = 0.01, 0.9, 0.999, 1e-7
    for step in range(1, steps + 1):
        indices = np.asarray(indices_per_step[step % len(indices_per_step)], dtype=index_dtype)
        grad = rng.uniform(-1, 1, size=(len(indices),) + tuple(shape[1:])).astype(dtype)
        op(var, m, v, beta1 ** step, beta2 ** step, lr, beta1, beta2, epsilon, tf.constant(grad), tf.constant(indices))
        expected = reference(*expected, grad, indices, lr, beta1, beta2, epsilon, beta1 ** step, beta2 ** step)
        for name, got, want in zip("var m v".split(), (var, m, v), expected):
            assert_close(test, got.numpy(), want, dtype, "{} after step {}".format(name, step))
    return var0, var.numpy()


class SparseApplyAdamTest(unittest.TestCase):
    def run_steps(self, dtype, index_dtype, shape, indices_per_step, steps=3):
        return run_adam_steps(self, retf.ops.sparse_apply_adam, lazy_adam_reference, 1, dtype, index_dtype, shape,
                              indices_per_step, steps)

    def test_matches_numpy_over_dtypes_with_duplicates(self):
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                with self.subTest(dtype=dtype.__name__, index_dtype=index_dtype.__name__):
                    before, after = self.run_steps(dtype, index_dtype, (10, 4), MIXED_INDEX_STEPS,
                                                   steps=len(MIXED_INDEX_STEPS))
                    np.testing.assert_array_equal(after[[2, 4, 6, 8]], before[[2, 4, 6, 8]])  # never touched

    def test_rows_of_rank_two(self):
        self.run_steps(np.float32, np.int64, (6, 2, 3), [[0, 5, 0], [2]])

    def test_rows_far_apart_without_duplicates(self):
        # Distinct rows, out of order, pages apart: walked in the gradient's order, not ascending.
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                with self.subTest(dtype=dtype.__name__, index_dtype=index_dtype.__name__):
                    self.run_steps(dtype, index_dtype, (3000, 40), FAR_APART_INDEX_STEPS, steps=3)

    def test_duplicates_summed_in_every_column_block(self):
        # Duplicate gradient rows are summed in blocks of 64, 32 or 16 bytes, then single columns.
        for dtype in FLOATS:
            for width in (1, 2, 6, 8, 24, 33):
                with self.subTest(dtype=dtype.__name__, width=width):
                    self.run_steps(dtype, np.int64, (9, width), [[0, 8, 0, 5, 8, 0], [3, 3]])

    def test_empty_gradient_changes_nothing(self):
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                var = tf.Variable(np.ones((4, 3), dtype))
                m, v = tf.Variable(np.ones((4, 3), dtype)), tf.Variable(np.ones((4, 3), dtype))
                retf.ops.sparse_apply_adam(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8,
                                           tf.zeros([0, 3], dtype), tf.zeros([0], index_dtype))
                for variable in (var, m, v):
                    np.testing.assert_array_equal(variable.numpy(), np.ones((4, 3), dtype))

    def test_out_of_range_index_names_index_and_bound(self):
        for bad in (4, -1):
            for index_dtype in INDEX_TYPES:
                var, m, v = (tf.Variable(tf.zeros([4, 2])) for _ in range(3))
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                            r"indices\[1\] = {} is not in \[0, 4\)".format(bad)):
                    retf.ops.sparse_apply_adam(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8, tf.ones([2, 2]),
                                               tf.constant([0, bad], index_dtype))
                np.testing.assert_array_equal(var.numpy(), np.zeros((4, 2)))

    def test_bad_shapes_are_invalid_argument(self):
        var, m, v = (tf.Variable(tf.zeros([4, 2])) for _ in range(3))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "grad"):
            retf.ops.sparse_apply_adam(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8, tf.ones([2, 3]),
                                       tf.constant([0, 1]))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "same shape"):
            retf.ops.sparse_apply_adam(var, m, tf.Variable(tf.zeros([5, 2])), 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8,
                                       tf.ones([2, 2]), tf.constant([0, 1]))

    def test_reference_variables_in_graph_mode(self):
        rng = np.random.RandomState(2)
        var0 = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
        grad = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
        indices = np.array([3, 0, 3, 7], np.int32)
        with tf.Graph().as_default():
            var = tf.compat.v1.Variable(var0, use_resource=False)
            m = tf.compat.v1.Variable(np.zeros_like(var0), use_resource=False)
            v = tf.compat.v1.Variable(np.zeros_like(var0), use_resource=False)
            self.assertTrue(var.dtype._is_ref_dtype)
            update = retf.ops.sparse_apply_adam(var, m, v, 0.9, 0.999, 0.01, 0.9, 0.999, 1e-7, grad, indices,
                                                use_locking=True)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                out = session.run(update)
                got = session.run([var, m, v])
        want = lazy_adam_reference(var0, np.zeros_like(var0), np.zeros_like(var0), grad, indices, 0.01, 0.9, 0.999,
                                   1e-7, 0.9, 0.999)
        np.testing.assert_array_equal(out, got[0])
        for actual, expected in zip(got, want):
            assert_close(self, actual, expected, np.float32)


class SparseApplyAdamDenseTest(unittest.TestCase):
    """Retf>SparseApplyAdamDense: TensorFlow's dense Adam semantics for a sparse gradient, in one pass."""

    def run_steps(self, dtype, index_dtype, shape, indices_per_step, steps=3):
        return run_adam_steps(self, retf.ops.sparse_apply_adam_dense, dense_adam_reference, 17, dtype, index_dtype,
                              shape, indices_per_step, steps)

    def test_matches_numpy_over_dtypes_with_duplicates(self):
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                with self.subTest(dtype=dtype.__name__, index_dtype=index_dtype.__name__):
                    before, after = self.run_steps(dtype, index_dtype, (10, 4), MIXED_INDEX_STEPS,
                                                   steps=len(MIXED_INDEX_STEPS))
                    self.assertTrue(np.all(after[[2, 4, 6, 8]] != before[[2, 4, 6, 8]]))  # never named, still moved

    def test_row_widths_that_split_packets(self):
        for width in (1, 3, 5, 17):
            with self.subTest(width=width):
                self.run_steps(np.float32, np.int64, (37, width), [[0, 36, 0, 5], [36], [7, 8, 9, 8]])

    def test_rows_of_rank_two(self):
        self.run_steps(np.float32, np.int64, (6, 2, 3), [[0, 5, 0], [2]])

    def test_rows_far_apart_without_duplicates(self):
        # Distinct rows, out of order, pages apart: walked in the gradient's order, not ascending.
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                with self.subTest(dtype=dtype.__name__, index_dtype=index_dtype.__name__):
                    self.run_steps(dtype, index_dtype, (3000, 40), FAR_APART_INDEX_STEPS, steps=3)

    def test_empty_gradient_still_decays_every_row(self):
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                ones = np.ones((4, 3), dtype)
                var, m, v = tf.Variable(ones), tf.Variable(ones), tf.Variable(ones)
                retf.ops.sparse_apply_adam_dense(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8,
                                                 tf.zeros([0, 3], dtype), tf.zeros([0], index_dtype))
                want = dense_adam_reference(ones, ones, ones, np.zeros((0, 3), dtype), np.zeros(0, np.int64),
                                            0.1, 0.9, 0.999, 1e-8, 0.9, 0.999)
                for got, expected in zip((var, m, v), want):
                    assert_close(self, got.numpy(), expected, dtype)

    def test_variables_of_another_dtype_are_invalid_argument(self):
        var, m, v = (tf.Variable(tf.ones([4, 2], tf.float64)) for _ in range(3))
        for op in (retf.ops.sparse_apply_adam_dense, retf.ops.sparse_apply_adam):
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "holds double; the op's other inputs are float"):
                op(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8, tf.ones([2, 2]), tf.constant([0, 1]))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "holds double; the op's other inputs are float"):
            retf.ops.adam_decay_untouched(var.handle, m.handle, v.handle, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8,
                                          tf.constant([0, 1]))
        np.testing.assert_array_equal(var.numpy(), np.ones((4, 2)))

    def test_out_of_range_index_changes_nothing(self):
        var, m, v = (tf.Variable(tf.ones([4, 2])) for _ in range(3))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"indices\[1\] = 4 is not in \[0, 4\)"):
            retf.ops.sparse_apply_adam_dense(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8, tf.ones([2, 2]),
                                             tf.constant([0, 4]))
        for variable in (var, m, v):
            np.testing.assert_array_equal(variable.numpy(), np.ones((4, 2)))

    def test_optimizer_is_tensorflows_adam(self):
        """retf.train.AdamOptimizer against tf.compat.v1.train.AdamOptimizer itself, on ref and resource variables."""
        for use_resource in (True, False):
            with self.subTest(use_resource=use_resource):
                lookup = tf.compat.v1.nn.embedding_lookup_sparse
                ours, ours_vars = V1OptimizerTest.train(self, lambda: retf.train.AdamOptimizer(0.05), use_resource,
                                                        lookup)
                stock, stock_vars = V1OptimizerTest.train(self, lambda: tf.compat.v1.train.AdamOptimizer(0.05),
                                                          use_resource, lookup)
                self.assertLess(ours[-1], 0.8 * ours[0])
                np.testing.assert_allclose(ours, stock, rtol=LOSS_RTOL)
                for a, b in zip(ours_vars, stock_vars):
                    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    def test_float16_takes_adams_own_path(self):
        """The kernel has no float16; AdamOptimizer's own sparse update runs instead, and lazy Adam refuses."""
        results = []
        for make_optimizer in (tf.compat.v1.train.AdamOptimizer, retf.train.AdamOptimizer):
            with tf.Graph().as_default():
                table = tf.compat.v1.Variable(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float16))
                loss = tf.reduce_sum(tf.gather(table, [0, 2, 0]) * np.float16(0.5))
                train = make_optimizer(0.1, epsilon=1e-3).minimize(loss)  # 1e-8 is 0 in float16
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    for _ in range(3):
                        session.run(train)
                    results.append(session.run(table))
        self.assertTrue(np.all(np.isfinite(results[1])))
        self.assertFalse(np.array_equal(results[1][0], np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float16)[0]))
        np.testing.assert_array_equal(results[0], results[1])
        with tf.Graph().as_default():
            table = tf.compat.v1.Variable(np.ones((4, 3), np.float16))
            with self.assertRaisesRegex(TypeError, "is float16; lazy sparse updates take float32 or float64"):
                retf.train.LazyAdamOptimizer(0.1).minimize(tf.reduce_sum(tf.gather(table, [1])))

    def test_optimizer_keeps_adams_names(self):
        with tf.Graph().as_default():
            var = tf.compat.v1.Variable(tf.zeros([3, 2]), name="table")
            retf.train.AdamOptimizer().minimize(tf.reduce_sum(tf.gather(var, [0, 2])))
            names = sorted(v.op.name for v in tf.compat.v1.global_variables())
        self.assertEqual(names, ["beta1_power", "beta2_power", "table", "table/Adam", "table/Adam_1"])


def summed_rows(grad, indices):
    """{row: gradient summed over its positions, in position order}, as unsorted_segment_sum adds them."""
    summed = {}
    for position, row in enumerate(np.asarray(indices).tolist()):
        summed[row] = grad[position] + np.zeros_like(grad[position]) if row not in summed else summed[row] + grad[position]
    return summed


def adagrad_reference(var, accum, grad, indices, lr, epsilon=None):
    """SparseApplyAdagrad(V2) after duplicate summing, in NumPy, rounding as TensorFlow's kernel does."""
    var, accum = var.copy(), accum.copy()
    dtype = var.dtype.type
    lr = dtype(lr)
    one_element = int(np.prod(var.shape[1:])) == 1
    for row, g in summed_rows(grad, indices).items():
        accum[row] = accum[row] + g * g
        step = lr * g
        if epsilon is not None:
            var[row] -= step / (np.sqrt(accum[row]) + dtype(epsilon))
        elif one_element:
            var[row] -= step / np.sqrt(accum[row])
        else:
            var[row] -= step * (dtype(1) / np.sqrt(accum[row]))
    return var, accum


def adagrad_decay_reference(var, accum, counts, grad, indices, lr, decay_step, decay_rate, baseline, global_step):
    """DeepRec's sparse AdagradDecay after duplicate summing, in NumPy."""
    var, accum, counts = var.copy(), accum.copy(), counts.copy()
    dtype = var.dtype.type
    one_element = int(np.prod(var.shape[1:])) == 1
    for row, g in summed_rows(grad, indices).items():
        if global_step // decay_step > counts[row]:
            accum[row] = np.maximum(accum[row] * dtype(decay_rate), dtype(baseline))
            counts[row] += 1
        accum[row] = accum[row] + g * g
        step = dtype(lr) * g
        var[row] -= step / np.sqrt(accum[row]) if one_element else step * (dtype(1) / np.sqrt(accum[row]))
    return var, accum, counts


_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
for _name, _type in (("pow", ctypes.c_double), ("powf", ctypes.c_float)):
    getattr(_LIBM, _name).restype, getattr(_LIBM, _name).argtypes = _type, [_type, _type]


def libm_power(base, exponent):
    """C's pow (powf for float32), which the kernels call, elementwise: NumPy's own np.power may take SIMD code
    that is an ulp away from it (numpy 1.24 here)."""
    base = np.asarray(base)
    function = _LIBM.powf if base.dtype == np.float32 else _LIBM.pow
    return np.array([function(float(b), float(exponent)) for b in base.ravel()], dtype=base.dtype).reshape(base.shape)


def ftrl_reference(var, accum, linear, grad, indices, lr, l1, l2, lr_power, l2_shrinkage=None):
    """SparseApplyFtrl(V2) (multiply_linear_by_lr false) after duplicate summing, in NumPy: TensorFlow's tensor
    form for rows of several elements, its scalar form for rows of one."""
    var, accum, linear = var.copy(), accum.copy(), linear.copy()
    dtype = var.dtype.type
    lr, l1, l2, lr_power = dtype(lr), dtype(l1), dtype(l2), dtype(lr_power)
    power = -lr_power
    two_l2 = dtype(2) * l2
    one_element = int(np.prod(var.shape[1:])) == 1
    for row, g in summed_rows(grad, indices).items():
        x, a, lin = var[row], accum[row], linear[row]
        g_s = g + (dtype(2) * dtype(l2_shrinkage)) * x if l2_shrinkage is not None else g
        new_a = a + g * g
        if one_element:
            sigma = (libm_power(new_a, power) - libm_power(a, power)) / lr
            new_l = (lin + g_s) - sigma * x
            quadratic = (np.sqrt(new_a) if lr_power == dtype(-0.5) else libm_power(new_a, power)) / lr + two_l2
        else:
            if lr_power == dtype(-0.5):
                sigma, root = (np.sqrt(new_a) - np.sqrt(a)) / lr, np.sqrt(new_a)
            else:
                sigma, root = (libm_power(new_a, power) - libm_power(a, power)) / lr, libm_power(new_a, power)
            new_l = lin + (g_s - sigma * x)
            quadratic = root / lr + two_l2
        var[row] = (np.clip(new_l, -l1, l1) - new_l) / quadratic
        accum[row], linear[row] = new_a, new_l
    return var, accum, linear


def adam_async_reference(var, m, v, grad, indices, lr, beta1, beta2, epsilon, beta1_power, beta2_power):
    """DeepRec's AdamAsync on a sparse gradient: lazy Adam, lr * sqrt(1-beta2_power)/(1-beta1_power) left to right."""
    var, m, v = var.copy(), m.copy(), v.copy()
    dtype = var.dtype.type
    lr, beta1, beta2, epsilon = dtype(lr), dtype(beta1), dtype(beta2), dtype(epsilon)
    lr_hat = lr * np.sqrt(dtype(1) - dtype(beta2_power)) / (dtype(1) - dtype(beta1_power))
    for row, g in summed_rows(grad, indices).items():
        m[row] = m[row] * beta1 + g * (dtype(1) - beta1)
        v[row] = v[row] * beta2 + (g * g) * (dtype(1) - beta2)
        var[row] -= (m[row] * lr_hat) / (np.sqrt(v[row]) + epsilon)
    return var, m, v


# Index vectors for the NumPy checks, one per step: duplicates, an empty step, a single index,
# strictly ascending (grouped without the sort). Rows 2, 4, 6, 8 are never named.
FUSED_INDEX_STEPS = [[1, 7, 1, 3, 1], [], [0, 9, 9], [5], [1, 3, 5, 7]]


class FusedSparseKernelChecks(object):
    """Runs a fused sparse kernel over steps against its NumPy reference; a TestCase mixing this in says which."""

    num_slots = 1

    def start(self, rng, dtype, shape):
        """var and its slots' starting values (slots positive, as accumulators are)."""
        return [rng.uniform(-1, 1, size=shape).astype(dtype)] + [
            rng.uniform(0.1, 1, size=shape).astype(dtype) for _ in range(self.num_slots)]

    def apply(self, variables, grad, indices, step):
        raise NotImplementedError

    def reference(self, values, grad, indices, step):
        raise NotImplementedError

    def run_steps(self, dtype, index_dtype, shape, steps=FUSED_INDEX_STEPS, seed=3):
        rng = np.random.RandomState(seed)
        values = self.start(rng, dtype, shape)
        variables = [tf.Variable(x) for x in values]
        before = values[0]
        for step, indices in enumerate(steps, 1):
            indices = np.asarray(indices, dtype=index_dtype)
            grad = rng.uniform(-1, 1, size=(len(indices),) + tuple(shape[1:])).astype(dtype)
            self.apply(variables, tf.constant(grad), tf.constant(indices), step)
            values = self.reference(values, grad, indices, step)
            for number, (got, want) in enumerate(zip(variables, values)):
                np.testing.assert_array_equal(got.numpy(), want, err_msg="table {} after step {}".format(number, step))
        return before, variables[0].numpy()

    def test_exact_against_numpy_over_dtypes_with_duplicates(self):
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                for width in (1, 4, 33):
                    with self.subTest(dtype=dtype.__name__, index_dtype=index_dtype.__name__, width=width):
                        before, after = self.run_steps(dtype, index_dtype, (10, width))
                        np.testing.assert_array_equal(after[[2, 4, 6, 8]], before[[2, 4, 6, 8]])

    def test_rows_of_rank_two(self):
        self.run_steps(np.float32, np.int64, (10, 2, 3))

    def test_rows_far_apart_without_duplicates(self):
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                with self.subTest(dtype=dtype.__name__, index_dtype=index_dtype.__name__):
                    self.run_steps(dtype, index_dtype, (3000, 40), steps=FAR_APART_INDEX_STEPS)

    def test_out_of_range_index_names_itself_and_changes_nothing(self):
        for bad in (10, -1):
            for index_dtype in INDEX_TYPES:
                with self.subTest(bad=bad, index_dtype=index_dtype.__name__):
                    values = self.start(np.random.RandomState(4), np.float32, (10, 2))
                    variables = [tf.Variable(x) for x in values]
                    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                                r"indices\[1\] = {} is not in \[0, 10\)".format(bad)):
                        self.apply(variables, tf.ones([2, 2]), tf.constant([0, bad], index_dtype), 1)
                    for got, want in zip(variables, values):
                        np.testing.assert_array_equal(got.numpy(), want)

    def test_bad_shapes_are_invalid_argument(self):
        variables = [tf.Variable(x) for x in self.start(np.random.RandomState(5), np.float32, (10, 2))]
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "grad"):
            self.apply(variables, tf.ones([2, 3]), tf.constant([0, 1]), 1)
        variables[1] = tf.Variable(tf.ones([9, 2]))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "shape"):
            self.apply(variables, tf.ones([2, 2]), tf.constant([0, 1]), 1)


    def test_variables_of_another_dtype_are_invalid_argument(self):
        """A resource variable's dtype is known only when the kernel runs: float64 tables with float32
        inputs are an error, not an abort of the process."""
        values = self.start(np.random.RandomState(6), np.float64, (10, 2))
        variables = [tf.Variable(x) for x in values]
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "double|float64"):
            self.apply(variables, tf.ones([2, 2], tf.float32), tf.constant([0, 1]), 1)
        for got, want in zip(variables, values):
            np.testing.assert_array_equal(got.numpy(), want)

class SparseApplyAdagradTest(FusedSparseKernelChecks, unittest.TestCase):
    def apply(self, variables, grad, indices, step):
        retf.ops.sparse_apply_adagrad(*variables, np.asarray(0.1, grad.dtype.as_numpy_dtype), grad, indices)

    def reference(self, values, grad, indices, step):
        return adagrad_reference(*values, grad, indices, 0.1)

    def test_against_tensorflows_own_kernel(self):
        """Against ResourceSparseApplyAdagrad(V2) on the deduplicated gradient; TensorFlow's vectorised square
        roots may differ from exact ones in the last bit."""
        rng = np.random.RandomState(11)
        for epsilon in (None, 1e-7):
            for width in (1, 8):
                with self.subTest(epsilon=epsilon, width=width):
                    var0, accum0 = rng.uniform(-1, 1, (12, width)), rng.uniform(0.1, 1, (12, width))
                    var0, accum0 = var0.astype(np.float32), accum0.astype(np.float32)
                    indices = np.array([3, 0, 3, 11, 5, 3], np.int64)
                    grad = rng.uniform(-1, 1, (len(indices), width)).astype(np.float32)
                    ours = [tf.Variable(var0), tf.Variable(accum0)]
                    retf.ops.sparse_apply_adagrad(*ours, np.float32(0.1), grad, indices,
                                                  epsilon=None if epsilon is None else np.float32(epsilon))
                    stock = [tf.Variable(var0), tf.Variable(accum0)]
                    unique, position = np.unique(indices, return_inverse=True)
                    summed = tf.math.unsorted_segment_sum(grad, position, len(unique))
                    if epsilon is None:
                        tf.raw_ops.ResourceSparseApplyAdagrad(var=stock[0].handle, accum=stock[1].handle, lr=0.1,
                                                              grad=summed, indices=unique)
                    else:
                        tf.raw_ops.ResourceSparseApplyAdagradV2(var=stock[0].handle, accum=stock[1].handle, lr=0.1,
                                                                epsilon=np.float32(epsilon), grad=summed,
                                                                indices=unique)
                    for a, b in zip(ours, stock):
                        if width == 1:  # TensorFlow's scalar form: the same operations, bit for bit
                            np.testing.assert_array_equal(a.numpy(), b.numpy())
                        else:
                            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-7, atol=0)

    def test_epsilon_and_update_slots(self):
        var0, accum0 = np.ones((4, 3), np.float32), np.full((4, 3), 0.5, np.float32)
        grad, indices = np.full((2, 3), 0.5, np.float32), np.array([2, 2])
        variables = [tf.Variable(var0), tf.Variable(accum0)]
        retf.ops.sparse_apply_adagrad(*variables, np.float32(0.1), grad, indices, epsilon=np.float32(1e-3))
        want = adagrad_reference(var0, accum0, grad, indices, 0.1, epsilon=1e-3)
        for got, expected in zip(variables, want):
            np.testing.assert_array_equal(got.numpy(), expected)
        variables = [tf.Variable(var0), tf.Variable(accum0)]
        retf.ops.sparse_apply_adagrad(*variables, np.float32(0.1), grad, indices, update_slots=False)
        np.testing.assert_array_equal(variables[1].numpy(), accum0)
        self.assertTrue(np.all(variables[0].numpy()[2] < 1))

    def test_reference_variables_in_graph_mode(self):
        var0, accum0 = np.ones((6, 2), np.float32), np.full((6, 2), 0.1, np.float32)
        grad, indices = np.arange(8, dtype=np.float32).reshape(4, 2), np.array([5, 0, 5, 1], np.int32)
        with tf.Graph().as_default():
            var = tf.compat.v1.Variable(var0, use_resource=False)
            accum = tf.compat.v1.Variable(accum0, use_resource=False)
            update = retf.ops.sparse_apply_adagrad(var, accum, np.float32(0.1), grad, indices, use_locking=True)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                out = session.run(update)
                got = session.run([var, accum])
        np.testing.assert_array_equal(out, got[0])
        for actual, expected in zip(got, adagrad_reference(var0, accum0, grad, indices, 0.1)):
            np.testing.assert_array_equal(actual, expected)


class SparseApplyFtrlTest(FusedSparseKernelChecks, unittest.TestCase):
    num_slots = 2
    settings = dict(lr=0.05, l1=0.01, l2=0.02, lr_power=-0.5)

    def start(self, rng, dtype, shape):
        var, accum, linear = super(SparseApplyFtrlTest, self).start(rng, dtype, shape)
        return [var, accum, (linear - dtype(0.5))]

    def apply(self, variables, grad, indices, step):
        dtype = grad.dtype.as_numpy_dtype
        k = {key: np.asarray(value, dtype) for key, value in self.settings.items()}
        if "l2_shrinkage" in k:
            retf.ops.sparse_apply_ftrl(*variables, grad, indices, k["lr"], k["l1"], k["l2"], k["lr_power"],
                                       l2_shrinkage=k["l2_shrinkage"])
        else:
            retf.ops.sparse_apply_ftrl(*variables, grad, indices, k["lr"], k["l1"], k["l2"], k["lr_power"])

    def reference(self, values, grad, indices, step):
        return ftrl_reference(*values, grad, indices, **self.settings)

    def test_shrinkage_and_other_learning_rate_powers(self):
        for settings in (dict(lr=0.05, l1=0.01, l2=0.02, lr_power=-0.5, l2_shrinkage=0.03),
                         dict(lr=0.05, l1=0.0, l2=0.0, lr_power=-0.25),
                         dict(lr=0.5, l1=0.3, l2=0.1, lr_power=0.0, l2_shrinkage=0.01)):
            self.settings = settings
            for dtype in FLOATS:
                for width in (1, 5):
                    with self.subTest(dtype=dtype.__name__, width=width, **settings):
                        self.run_steps(dtype, np.int64, (10, width))

    def test_against_tensorflows_own_kernel(self):
        rng = np.random.RandomState(12)
        for shrinkage in (None, 0.03):
            for width in (1, 8):
                with self.subTest(shrinkage=shrinkage, width=width):
                    start = [rng.uniform(-1, 1, (12, width)), rng.uniform(0.1, 1, (12, width)),
                             rng.uniform(-1, 1, (12, width))]
                    start = [x.astype(np.float32) for x in start]
                    indices = np.array([3, 0, 3, 11, 5, 3], np.int64)
                    grad = rng.uniform(-1, 1, (len(indices), width)).astype(np.float32)
                    k = [np.float32(x) for x in (0.05, 0.01, 0.02)]
                    ours = [tf.Variable(x) for x in start]
                    retf.ops.sparse_apply_ftrl(*ours, grad, indices, *k, np.float32(-0.5),
                                               l2_shrinkage=None if shrinkage is None else np.float32(shrinkage))
                    stock = [tf.Variable(x) for x in start]
                    unique, position = np.unique(indices, return_inverse=True)
                    summed = tf.math.unsorted_segment_sum(grad, position, len(unique))
                    handles = dict(var=stock[0].handle, accum=stock[1].handle, linear=stock[2].handle, grad=summed,
                                   indices=unique, lr=k[0], l1=k[1], l2=k[2], lr_power=np.float32(-0.5))
                    if shrinkage is None:
                        tf.raw_ops.ResourceSparseApplyFtrl(**handles)
                    else:
                        tf.raw_ops.ResourceSparseApplyFtrlV2(l2_shrinkage=np.float32(shrinkage), **handles)
                    for a, b in zip(ours, stock):
                        if width == 1:  # TensorFlow's scalar form: the same operations, bit for bit
                            np.testing.assert_array_equal(a.numpy(), b.numpy())
                        else:
                            # TensorFlow's tensor form runs on Eigen packets, whose square roots may be off
                            # in the last bits; sqrt(a') - sqrt(a) cancels and magnifies that (up to 5e-5
                            # relative here). The kernel is exact against NumPy (the checks above).
                            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)

    def test_hyperparameters_checked(self):
        variables = [tf.Variable(x) for x in self.start(np.random.RandomState(5), np.float32, (4, 2))]
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "lr must be positive"):
            retf.ops.sparse_apply_ftrl(*variables, tf.ones([1, 2]), [0], np.float32(0), np.float32(0),
                                       np.float32(0), np.float32(-0.5))


class SparseApplyAdagradDecayTest(FusedSparseKernelChecks, unittest.TestCase):
    """DeepRec's AdagradDecay: a row decays once when global_step // decay_step passes its count."""

    def start(self, rng, dtype, shape):
        var, accum = super(SparseApplyAdagradDecayTest, self).start(rng, dtype, shape)
        return [var, accum, np.zeros(shape[0], np.int64)]

    @staticmethod
    def global_step(step):
        return 3 * step  # with decay_step 4: periods 0, 1, 2, 3, 3 over the five steps

    def apply(self, variables, grad, indices, step):
        dtype = grad.dtype.as_numpy_dtype
        retf.ops.sparse_apply_adagrad_decay(*variables, np.asarray(0.1, dtype), np.int64(4), np.asarray(0.5, dtype),
                                            np.asarray(0.3, dtype), np.int64(self.global_step(step)), grad, indices)

    def reference(self, values, grad, indices, step):
        return adagrad_decay_reference(*values, grad, indices, 0.1, 4, 0.5, 0.3, self.global_step(step))

    def test_bad_shapes_are_invalid_argument(self):
        variables = [tf.Variable(x) for x in self.start(np.random.RandomState(5), np.float32, (10, 2))]
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "grad"):
            self.apply(variables, tf.ones([2, 3]), tf.constant([0, 1]), 1)
        variables[2] = tf.Variable(np.zeros(3, np.int64))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "one count per row"):
            self.apply(variables, tf.ones([2, 2]), tf.constant([0, 1]), 1)


class SparseApplyAdamAsyncTest(FusedSparseKernelChecks, unittest.TestCase):
    num_slots = 2

    def apply(self, variables, grad, indices, step):
        dtype = grad.dtype.as_numpy_dtype
        retf.ops.sparse_apply_adam_async(*variables, *(np.asarray(x, dtype) for x in (
            0.9 ** step, 0.999 ** step, 0.01, 0.9, 0.999, 1e-7)), grad, indices)

    def reference(self, values, grad, indices, step):
        return adam_async_reference(*values, grad, indices, 0.01, 0.9, 0.999, 1e-7, 0.9 ** step, 0.999 ** step)


class EmbeddingLookupSparseTest(unittest.TestCase):
    def cases(self):
        rng = np.random.RandomState(3)
        indices, ids, weights = random_sparse_batch(rng, batch=9, vocab=12, max_per_row=5)
        indices[:, 0] = np.minimum(indices[:, 0], 6)  # rows 7, 8 empty: output stops at the last used row
        indices[:, 1] = np.arange(len(ids))
        for dtype in FLOATS:
            params = rng.uniform(-1, 1, (12, 5)).astype(dtype)
            for index_dtype in INDEX_TYPES:
                for combiner in COMBINERS:
                    for weighted in (False, True):
                        yield dtype, index_dtype, combiner, weighted, params, indices, ids.astype(index_dtype), \
                            weights.astype(dtype)

    def lookups(self, params, indices, ids, weights, combiner, weighted):
        sp_ids = sparse(indices, ids, 9, len(ids))
        sp_weights = sparse(indices, weights, 9, len(ids)) if weighted else None
        ours = retf.nn.embedding_lookup_sparse(params, sp_ids, sp_weights, combiner=combiner)
        stock = tf.compat.v1.nn.embedding_lookup_sparse(params, sp_ids, sp_weights, combiner=combiner)
        return ours, stock

    def test_forward_matches_tensorflow(self):
        for dtype, index_dtype, combiner, weighted, params, indices, ids, weights in self.cases():
            with self.subTest(dtype=dtype.__name__, ids=index_dtype.__name__, combiner=combiner, weighted=weighted):
                for table in (tf.constant(params), tf.Variable(params)):
                    ours, stock = self.lookups(table, indices, ids, weights, combiner, weighted)
                    self.assertEqual(ours.shape, stock.shape)
                    assert_close(self, ours.numpy(), stock.numpy(), dtype)

    def test_gradient_matches_tensorflow_and_is_unique_rows(self):
        for dtype, index_dtype, combiner, weighted, params, indices, ids, weights in self.cases():
            with self.subTest(dtype=dtype.__name__, ids=index_dtype.__name__, combiner=combiner, weighted=weighted):
                table = tf.Variable(params)
                grads = []
                for lookup in (retf.nn.embedding_lookup_sparse, tf.compat.v1.nn.embedding_lookup_sparse):
                    with tf.GradientTape() as tape:
                        sp_ids = sparse(indices, ids, 9, len(ids))
                        sp_weights = sparse(indices, weights, 9, len(ids)) if weighted else None
                        out = lookup(table, sp_ids, sp_weights, combiner=combiner)
                        loss = tf.reduce_sum(out * out * np.arange(1, 6, dtype=dtype))
                    grads.append(tape.gradient(loss, table))
                ours, stock = grads
                self.assertIsInstance(ours, tf.IndexedSlices)
                self.assertEqual(len(set(ours.indices.numpy().tolist())), int(ours.indices.shape[0]))
                self.assertEqual(sorted(ours.indices.numpy().tolist()), sorted(set(ids.tolist())))
                assert_close(self, tf.convert_to_tensor(ours).numpy(), tf.convert_to_tensor(stock).numpy(), dtype)

    def test_gradient_groups_ids_up_to_the_largest_int64(self):
        big = 2 ** 63 - 1
        unique, values = retf.ops.embedding_lookup_sparse_grad(
            tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([big, 0, big, 5], tf.int64),
            tf.constant([0, 0, 1, 1], tf.int64), combiner="sum")
        self.assertEqual(unique.numpy().tolist(), [0, 5, big])
        np.testing.assert_array_equal(values.numpy(), [[1, 2], [3, 4], [4, 6]])

    def test_row_widths_of_every_column_block(self):
        # The kernels sum a row in blocks of 64, 32 or 16 bytes, then single columns.
        rng = np.random.RandomState(8)
        indices, ids, weights = random_sparse_batch(rng, batch=6, vocab=10, max_per_row=4)
        for dtype in FLOATS:
            for dim in (1, 2, 3, 4, 8, 12, 16, 24, 32, 36, 64, 67):
                with self.subTest(dtype=dtype.__name__, dim=dim):
                    table = tf.Variable(rng.uniform(-1, 1, (10, dim)).astype(dtype))
                    grads = []
                    for lookup in (retf.nn.embedding_lookup_sparse, tf.compat.v1.nn.embedding_lookup_sparse):
                        with tf.GradientTape() as tape:
                            out = lookup(table, sparse(indices, ids, 6, 4), sparse(indices, weights.astype(dtype), 6, 4),
                                         combiner="mean")
                            loss = tf.reduce_sum(out * out)
                        grads.append((out.numpy(), tf.convert_to_tensor(tape.gradient(loss, table)).numpy()))
                    (ours, ours_grad), (stock, stock_grad) = grads
                    assert_close(self, ours, stock, dtype)
                    assert_close(self, ours_grad, stock_grad, dtype)

    def test_numeric_gradient_float64(self):
        rng = np.random.RandomState(4)
        indices, ids, weights = random_sparse_batch(rng, batch=5, vocab=6, max_per_row=4)
        params = rng.uniform(-1, 1, (6, 3))
        for combiner in COMBINERS:
            for weighted in (False, True):
                with self.subTest(combiner=combiner, weighted=weighted):
                    def lookup(table, w, weighted=weighted, combiner=combiner):
                        sp_weights = sparse(indices, w, 5, 8) if weighted else None
                        return retf.nn.embedding_lookup_sparse(table, sparse(indices, ids, 5, 8), sp_weights,
                                                               combiner=combiner)
                    theoretical, numerical = tf.test.compute_gradient(lookup, [tf.constant(params),
                                                                               tf.constant(weights)])
                    for which, (t, n) in enumerate(zip(theoretical, numerical)):
                        if which == 1 and not weighted:
                            continue
                        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)

    def test_empty_batch(self):
        for combiner in COMBINERS:
            sp_ids = tf.SparseTensor(tf.zeros([0, 2], tf.int64), tf.zeros([0], tf.int64), [3, 2])
            ours, stock = (f(tf.ones([4, 2]), sp_ids, None, combiner=combiner) for f in
                           (retf.nn.embedding_lookup_sparse, tf.compat.v1.nn.embedding_lookup_sparse))
            self.assertEqual(ours.shape, stock.shape)
            self.assertEqual(tuple(ours.shape), (0, 2))

    def test_out_of_range_id_and_unsorted_rows(self):
        params = tf.ones([4, 2])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"ids\[1\] = 4 is not in \[0, 4\)"):
            retf.nn.embedding_lookup_sparse(params, sparse([[0, 0], [1, 0]], np.array([1, 4]), 2, 1), None)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "sorted"):
            retf.ops.embedding_lookup_sparse(params, tf.constant([1, 2]), tf.constant([1, 0], tf.int64))
        # A wild last segment id is refused, not allowed to overflow the output's shape.
        for last in (2 ** 62, 2 ** 63 - 1):
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "segment_ids"):
                retf.ops.embedding_lookup_sparse(params, tf.constant([1, 2]), tf.constant([0, last], tf.int64))
        for segment_ids, message in (([-1, 0], r"segment_ids\[0\] = -1 is negative"),
                                     ([0, 1, -1], r"segment_ids\[2\] = -1 is negative"),
                                     ([0, 2, 1, 3], r"segment_ids\[2\] = 1 follows segment_ids\[1\] = 2")):
            segment_ids = tf.constant(segment_ids, tf.int64)
            ids = tf.zeros_like(segment_ids)
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                retf.ops.embedding_lookup_sparse(params, ids, segment_ids)
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                retf.ops.embedding_lookup_sparse_grad(tf.ones([4, 2]), ids, segment_ids)

    def test_falls_back_where_fusion_does_not_apply(self):
        rng = np.random.RandomState(5)
        indices, ids, _ = random_sparse_batch(rng, batch=4, vocab=10, max_per_row=3, empty_rows=False)
        sp_ids = sparse(indices, ids, 4, 3)
        params = rng.uniform(-1, 1, (10, 4)).astype(np.float32)
        for kwargs in ({"max_norm": 0.5}, {}):
            shards = [tf.constant(params[0::2]), tf.constant(params[1::2])] if not kwargs else tf.constant(params)
            ours = retf.nn.embedding_lookup_sparse(shards, sp_ids, None, **kwargs)
            stock = tf.compat.v1.nn.embedding_lookup_sparse(shards, sp_ids, None, **kwargs)
            np.testing.assert_array_equal(ours.numpy(), stock.numpy())


def synthetic_data(seed, examples=256, vocab=60, max_per_row=4):
    rng = np.random.RandomState(seed)
    indices, ids, weights = random_sparse_batch(rng, examples, vocab, max_per_row, empty_rows=False)
    hidden = rng.normal(size=vocab)
    score = np.zeros(examples)
    np.add.at(score, indices[:, 0], hidden[ids])
    labels = (score + rng.normal(scale=0.5, size=examples) > 0).astype(np.float32).reshape(-1, 1)
    return indices, ids, weights.astype(np.float32), labels


def transposed_matmul_bound(a, b):
    """What a^T b in a's dtype may differ from the exact sum by: K units of rounding on each term's
    magnitude (the standard bound for a sum of K products, whatever their order)."""
    unit = np.finfo(a.dtype).eps / 2
    k_size = a.shape[0]
    return 2 * k_size * unit * (np.abs(a).astype(np.float64).T @ np.abs(b).astype(np.float64)) + np.finfo(a.dtype).tiny


class TransposedMatMulTest(unittest.TestCase):
    # Output rows: multiples of the tiles' 16 (AVX + FMA) and 32 (AVX-512), tails of 9-15 (two vectors,
    # the second masked) and of 1-8 (one), 32 + 1-16; columns: multiples of the tiles' 6 and 8 and every
    # tail 1-7; K: empty, inside one chunk, on and around the chunk sizes, many chunks; partial products
    # past what a thread keeps between calls.
    SHAPES = [(0, 3, 4), (1, 1, 1), (5, 16, 6), (63, 21, 7), (64, 5, 11), (65, 32, 12), (513, 37, 23),
              (700, 8, 9), (5000, 144, 80), (4100, 80, 40), (2049, 17, 10), (4096, 512, 300), (300, 48, 15),
              (300, 63, 9), (130, 47, 6)]

    def test_matches_numpy_over_dtypes_and_tile_tails(self):
        rng = np.random.RandomState(21)
        for dtype in FLOATS:
            for k_size, m_size, n_size in self.SHAPES:
                a = rng.uniform(-1, 1, (k_size, m_size)).astype(dtype)
                b = rng.uniform(-1, 1, (k_size, n_size)).astype(dtype)
                got = retf.ops.transposed_matmul(a, b).numpy()
                self.assertEqual(got.dtype, dtype)
                self.assertEqual(got.shape, (m_size, n_size))
                exact = a.astype(np.float64).T @ b.astype(np.float64)
                error = np.abs(got.astype(np.float64) - exact)
                bound = transposed_matmul_bound(a, b)
                self.assertTrue(np.all(error <= bound), "{} {}: error {} over the bound at {}".format(
                    dtype.__name__, (k_size, m_size, n_size), error.max(), np.argwhere(error > bound)[:3]))

    def test_close_to_tensorflows_transposed_matmul(self):
        rng = np.random.RandomState(22)
        a = rng.uniform(-1, 1, (3000, 144)).astype(np.float32)
        b = rng.uniform(-1, 1, (3000, 80)).astype(np.float32)
        ours = retf.ops.transposed_matmul(a, b).numpy().astype(np.float64)
        theirs = tf.linalg.matmul(a, b, transpose_a=True).numpy().astype(np.float64)
        self.assertTrue(np.all(np.abs(ours - theirs) <= 2 * transposed_matmul_bound(a, b)))

    def test_every_instruction_set_within_the_bound_and_avx512_as_fma_bitwise(self):
        """Each path the CPU has (RETF_TRANSPOSED_MATMUL_ISA caps it, per process): AVX-512's tiles give
        the bits of the AVX + FMA tiles (the same fused chain over k), every path stays within the bound."""
        runs = {}
        with tempfile.TemporaryDirectory() as scratch:
            for isa in ("avx512", "fma", "avx", "plain"):
                path = os.path.join(scratch, isa + ".npz")
                env = dict(os.environ, RETF_TRANSPOSED_MATMUL_ISA=isa)
                subprocess.check_call([sys.executable, os.path.abspath(__file__), "--isa-outputs", isa, path], env=env)
                with np.load(path) as data:
                    runs[isa] = {key: data[key] for key in data.files}
        for key in runs["fma"]:
            np.testing.assert_array_equal(runs["avx512"][key], runs["fma"][key], err_msg=key)
        with open("/proc/cpuinfo") as stream:
            has_fma = " fma " in stream.read().replace("\n", " ")
        if has_fma:  # the cap took effect: rounding once per multiply-add, not twice, moves some last bits
            self.assertFalse(np.array_equal(runs["plain"]["5000x144x80"], runs["fma"]["5000x144x80"]))
        rng = np.random.RandomState(23)
        for k_size, m_size, n_size in self.SHAPES:
            a = rng.uniform(-1, 1, (k_size, m_size)).astype(np.float32)
            b = rng.uniform(-1, 1, (k_size, n_size)).astype(np.float32)
            exact = a.astype(np.float64).T @ b.astype(np.float64)
            for isa, outputs in runs.items():
                error = np.abs(outputs["{}x{}x{}".format(k_size, m_size, n_size)].astype(np.float64) - exact)
                self.assertTrue(np.all(error <= transposed_matmul_bound(a, b)), (isa, k_size, m_size, n_size))

    def test_bad_shapes_are_invalid_argument(self):
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "as many rows"):
            retf.ops.transposed_matmul(np.ones((4, 2), np.float32), np.ones((5, 3), np.float32))
        with self.assertRaises((ValueError, tf.errors.InvalidArgumentError)):
            retf.ops.transposed_matmul(np.ones(4, np.float32), np.ones((4, 3), np.float32))


class WeightGradientRoutingTest(unittest.TestCase):
    """retf.ops.route_weight_gradients, in graph mode as the 1.x API builds gradients."""

    def setUp(self):
        from tensorflow.python.framework import ops as framework_ops
        self.entry = framework_ops._gradient_registry._registry["MatMul"]
        self.original = self.entry["type"]

    def tearDown(self):
        self.entry["type"] = self.original

    def gradients(self, weight_shape, dtype=np.float32, transpose_b=False, batch=300):
        """(op types of the weight's gradient graph, [grad_x, grad_w]) for x @ w in a fresh graph."""
        rng = np.random.RandomState(23)
        with tf.Graph().as_default() as graph:
            x = tf.compat.v1.placeholder(dtype, [None, weight_shape[1] if transpose_b else weight_shape[0]])
            w = tf.Variable(rng.uniform(-1, 1, weight_shape).astype(dtype))
            y = tf.linalg.matmul(x, w, transpose_b=transpose_b)
            grads = tf.compat.v1.gradients(tf.reduce_sum(tf.sin(y)), [x, w])
            types = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
            feed = rng.uniform(-1, 1, (batch, x.shape[1])).astype(dtype)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return types, session.run(grads, {x: feed}), feed

    def test_small_float32_weights_take_the_transposed_product(self):
        stock_types, stock, _ = self.gradients((40, 24))
        self.assertTrue(retf.ops.route_weight_gradients())
        self.assertFalse(retf.ops.route_weight_gradients())  # idempotent
        types, routed, feed = self.gradients((40, 24))
        self.assertEqual((stock_types, types), ([], ["Retf>TransposedMatMul"]))
        np.testing.assert_array_equal(routed[0], stock[0])  # the input's gradient is TensorFlow's own
        bound = transposed_matmul_bound(feed, np.ones((len(feed), 24), np.float32))
        self.assertTrue(np.all(np.abs(routed[1] - stock[1]) <= 2 * bound))

    def test_a_tapes_gradient_in_eager_mode(self):
        rng = np.random.RandomState(24)
        x = tf.constant(rng.uniform(-1, 1, (300, 40)).astype(np.float32))
        w = tf.Variable(rng.uniform(-1, 1, (40, 24)).astype(np.float32))

        def gradients():
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(tf.sin(tf.linalg.matmul(x, w)))
            return [g.numpy() for g in tape.gradient(loss, [x, w])]

        stock = gradients()
        retf.ops.route_weight_gradients()
        routed = gradients()
        np.testing.assert_array_equal(routed[0], stock[0])
        bound = transposed_matmul_bound(x.numpy(), np.ones((300, 24), np.float32))
        self.assertTrue(np.all(np.abs(routed[1] - stock[1]) <= 2 * bound))

    def test_other_products_keep_tensorflows_gradient(self):
        retf.ops.route_weight_gradients()
        self.assertEqual(self.gradients((40, 24), dtype=np.float64)[0], [])
        self.assertEqual(self.gradients((24, 40), transpose_b=True)[0], [])
        limit = retf.ops.WEIGHT_GRADIENT_MAX_VALUES
        self.assertEqual(self.gradients((limit // 128, 128))[0], ["Retf>TransposedMatMul"])
        self.assertEqual(self.gradients((limit // 128 + 1, 128))[0], [])

    def second_order(self, x_feed, w_value):
        """The gradients, for w and x, of a penalty on the weight gradient of sum(sin(x @ w)) (as a gradient
        penalty builds them), and the graph's retf op types."""
        with tf.Graph().as_default() as graph:
            x = tf.compat.v1.placeholder(tf.float32, [None, w_value.shape[0]])
            w = tf.Variable(w_value)
            grad_w = tf.compat.v1.gradients(tf.reduce_sum(tf.sin(tf.linalg.matmul(x, w))), [w])[0]
            second = tf.compat.v1.gradients(tf.reduce_sum(tf.square(grad_w)), [w, x])
            types = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return types, session.run(second, {x: x_feed})

    def test_second_order_gradients_through_a_routed_weight_gradient(self):
        rng = np.random.RandomState(25)
        x_feed = rng.uniform(-1, 1, (200, 12)).astype(np.float32)
        w_value = rng.uniform(-1, 1, (12, 6)).astype(np.float32)
        stock_types, stock = self.second_order(x_feed, w_value)
        retf.ops.route_weight_gradients()
        types, routed = self.second_order(x_feed, w_value)
        self.assertEqual((stock_types, types), ([], ["Retf>TransposedMatMul"]))
        for got, want in zip(routed, stock):
            self.assertEqual(got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def pair_concat_grad_reference(grad, x, y, pieces):
    """The gradients of concat(pieces, axis=-1) for x and y in NumPy, in x's dtype: the direct piece's slice
    first, then each difference's or product's part in piece order (as Retf>PairConcatGrad sums them)."""
    slices = np.split(grad, len(pieces), axis=-1)
    sums = {}
    for operand, other in (("x", y), ("y", x)):
        total = slices[pieces.index(operand)].copy()
        for piece, part in zip(pieces, slices):
            if piece == "x*y":
                total = total + part * other
            elif piece in ("x-y", "y-x"):
                total = total + (part if piece.startswith(operand) else -part)
        sums[operand] = total
    return sums["x"], sums["y"], slices


class PairConcatGradTest(unittest.TestCase):
    """Retf>PairConcatGrad against NumPy, and retf.ops.route_pair_concat_gradients in graph mode."""

    PIECE_ORDERS = (["x", "y", "x-y", "x*y"], ["y", "x*y", "x", "y-x"], ["x-y", "x", "x*y", "y", "y-x"],
                    ["x", "y", "x*y"])

    def setUp(self):
        from tensorflow.python.framework import ops as framework_ops
        self.registry = framework_ops._gradient_registry._registry
        self.saved = {name: self.registry[name]["type"] for name in ("ConcatV2", "Sub", "Mul", "MatMul", "Tile")}
        self.unroute()

    def unroute(self):
        """TensorFlow's own gradients (a wheel's bootstrap may have routed them at import), and MatMul's
        without the dense layer's routing (the weight gradients' may stay)."""
        for name, function in self.saved.items():
            while getattr(function, "route", None) in ("pair concat", "pair dense"):
                function = function.original
            self.registry[name]["type"] = function

    def tearDown(self):
        for name, function in self.saved.items():
            self.registry[name]["type"] = function

    def test_matches_numpy_over_dtypes_piece_orders_and_shapes(self):
        rng = np.random.RandomState(31)
        for dtype in FLOATS:
            for pieces in self.PIECE_ORDERS:
                for shape in ((7, 5, 36), (3, 1), (2, 0, 4), (0, 3), (9, 18)):
                    with self.subTest(dtype=dtype.__name__, pieces=pieces, shape=shape):
                        x, y = (rng.uniform(-1, 1, shape).astype(dtype) for _ in range(2))
                        grad = rng.uniform(-1, 1, shape[:-1] + (shape[-1] * len(pieces),)).astype(dtype)
                        got_x, got_y, got_slices = retf.ops.pair_concat_grad(grad, x, y, pieces)
                        want_x, want_y, want_slices = pair_concat_grad_reference(grad, x, y, pieces)
                        np.testing.assert_array_equal(got_x.numpy(), want_x)
                        np.testing.assert_array_equal(got_y.numpy(), want_y)
                        for got, want in zip(got_slices, want_slices):
                            np.testing.assert_array_equal(got.numpy(), want)

    def test_bad_pieces_and_shapes_are_invalid_argument(self):
        x = tf.ones([2, 3])
        for pieces, message in ((["x", "x", "x-y"], "name x twice"), (["x", "x-y", "x*y"], "must name x and y"),
                                (["x", "y", "x+y"], "one of x, y, x-y, y-x, x\\*y")):
            with self.subTest(pieces=pieces):
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                    retf.ops.pair_concat_grad(tf.ones([2, 9]), x, x, pieces)
        with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), "12|9"):
            retf.ops.pair_concat_grad(tf.ones([2, 9]), x, x, ["x", "y", "x-y", "x*y"])
        with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), "shape|Dimension"):
            retf.ops.pair_concat_grad(tf.ones([2, 12]), x, tf.ones([2, 4]), ["x", "y", "x-y", "x*y"])

    def activation_unit(self, query_feed, keys_feed, gate, extra=None):
        """DIN's activation unit over [q, k, q - k, q * k] in a fresh graph: (retf op types, whether a Sub or
        Mul gradient was built, the gradients of a loss for the query, the keys and, with extra, more)."""
        with tf.Graph().as_default() as graph:
            query = tf.compat.v1.placeholder(tf.float32, [None, 6])
            keys = tf.compat.v1.placeholder(tf.float32, [None, None, 6])
            queries = tf.tile(tf.expand_dims(query, 1), [1, tf.shape(keys)[1], 1])
            difference, product = queries - keys, queries * keys
            net = tf.concat([queries, keys, difference, product], axis=-1)
            hidden = tf.compat.v1.layers.dense(net, 5, tf.nn.sigmoid,
                                               kernel_initializer=tf.compat.v1.glorot_uniform_initializer(seed=3))
            loss = tf.reduce_sum(tf.sin(tf.compat.v1.layers.dense(
                hidden, 1, kernel_initializer=tf.compat.v1.glorot_uniform_initializer(seed=4))))
            targets = [query, keys] + (extra(locals()) if extra else [])
            grads = tf.compat.v1.gradients(loss, targets, gate_gradients=gate)
            types = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
            piece_grads = any(op.name.startswith(("gradients/sub_grad", "gradients/mul_grad"))
                              for op in graph.get_operations())
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return types, piece_grads, session.run(grads, {query: query_feed, keys: keys_feed})

    def feeds(self):
        rng = np.random.RandomState(32)
        return rng.uniform(-1, 1, (8, 6)).astype(np.float32), rng.uniform(-1, 1, (8, 11, 6)).astype(np.float32)

    def test_routed_gradient_is_tensorflows_in_one_kernel(self):
        for gate in (False, True):  # an optimizer's minimize gates each op's gradients through Identity ops
            with self.subTest(gate=gate):
                self.unroute()
                stock_types, stock_pieces, stock = self.activation_unit(*self.feeds(), gate=gate)
                self.assertTrue(retf.ops.route_pair_concat_gradients())
                self.assertFalse(retf.ops.route_pair_concat_gradients())  # idempotent
                types, pieces, routed = self.activation_unit(*self.feeds(), gate=gate)
                # One kernel: the concat's own, or the dense layer's where the query repeats.
                kernels = {"Retf>PairConcatGrad", "Retf>RepeatedPairGrad"}
                self.assertEqual((kernels & set(stock_types), len(kernels & set(types))), (set(), 1))
                self.assertEqual((stock_pieces, pieces), (True, False))  # Sub's and Mul's gradients not built
                for got, want in zip(routed, stock):
                    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())

    def test_a_pieces_own_gradient_and_a_tapes(self):
        retf.ops.route_pair_concat_gradients()
        _, _, routed = self.activation_unit(*self.feeds(), gate=False,
                                            extra=lambda graph: [graph["difference"], graph["product"]])
        self.unroute()
        _, _, stock = self.activation_unit(*self.feeds(), gate=False,
                                           extra=lambda graph: [graph["difference"], graph["product"]])
        for got, want in zip(routed, stock):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
        query, keys = (tf.constant(feed) for feed in self.feeds())

        def tape_gradients():
            with tf.GradientTape() as tape:
                tape.watch([query, keys])
                queries = tf.tile(tf.expand_dims(query, 1), [1, 11, 1])
                loss = tf.reduce_sum(tf.sin(tf.concat([queries, keys, queries - keys, queries * keys], -1)))
            return [g.numpy() for g in tape.gradient(loss, [query, keys])]

        stock_tape = tape_gradients()
        retf.ops.route_pair_concat_gradients()
        for got, want in zip(tape_gradients(), stock_tape):  # eager: TensorFlow's own gradients, bit for bit
            np.testing.assert_array_equal(got, want)

    def test_other_concats_keep_tensorflows_gradient(self):
        retf.ops.route_pair_concat_gradients()

        def types(build):
            with tf.Graph().as_default() as graph:
                x = tf.compat.v1.placeholder(tf.float32, [4, 3])
                y = tf.compat.v1.placeholder(tf.float32, [4, 3])
                tf.compat.v1.gradients(tf.reduce_sum(tf.sin(build(x, y))), [x, y])
                return sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})

        self.assertEqual(types(lambda x, y: tf.concat([x, y, x - y, x * y], -1)), ["Retf>PairConcatGrad"])
        self.assertEqual(types(lambda x, y: tf.concat([x, y, x - y, x * y], 0)), [])  # not the last axis
        # A difference the concat shares with another op: its gradient from there must still flow.
        self.assertEqual(types(lambda x, y: (lambda d: tf.concat([x, y, d], -1) + tf.tile(d, [1, 3]))(x - y)), [])
        self.assertEqual(types(lambda x, y: tf.concat([x, y, x + y], -1)), [])
        self.assertEqual(types(lambda x, y: tf.concat([x, x - y, x * y], -1)), [])  # y not a piece
        self.assertEqual(types(lambda x, y: tf.concat([x, y, y, x - y], -1)), [])
        self.assertEqual(types(lambda x, y: tf.cast(tf.concat([tf.cast(t, tf.float16) for t in (x, y, x - y)], -1),
                                                    tf.float32)), [])

    def penalty_gradients(self, dense, of="keys"):
        """A gradient penalty's gradients, second order through the activation unit's concat (and, with
        dense, a layer over it) for the query, the keys (and the layer's kernel); the penalty is on the
        gradient of the loss for of, "keys" or "query"."""
        with tf.Graph().as_default():
            query_feed, keys_feed = self.feeds()
            query, keys = tf.constant(query_feed), tf.constant(keys_feed)
            queries = tf.tile(tf.expand_dims(query, 1), [1, 11, 1])
            net = tf.concat([queries, keys, queries - keys, queries * keys], -1)
            targets = [query, keys]
            if dense:
                kernel = tf.constant(np.random.RandomState(37).uniform(-1, 1, (24, 5)).astype(np.float32))
                net = tf.tensordot(net, kernel, [[2], [0]])
                targets.append(kernel)
            first = tf.compat.v1.gradients(tf.reduce_sum(tf.sin(net)), [{"keys": keys, "query": query}[of]])[0]
            second = tf.compat.v1.gradients(tf.reduce_sum(tf.square(first)), targets)
            with tf.compat.v1.Session() as session:
                return session.run(second)

    def test_second_order_gradients_through_the_routed_gradient(self):
        stock = self.penalty_gradients(dense=False)
        retf.ops.route_pair_concat_gradients()
        for got, want in zip(self.penalty_gradients(dense=False), stock):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())

    def test_keys_made_by_a_product_keep_their_gradient(self):
        # The keys masked by a multiplication (history * mask) reach the loss only through the unit: the
        # Mul that made them must pass grad_y on, not take it for a piece's slice.
        def gradients(dense):
            with tf.Graph().as_default():
                query_feed, keys_feed = self.feeds()
                query, history = tf.constant(query_feed), tf.constant(keys_feed)
                keys = history * tf.constant(np.tile(np.array([[[1.0]] * 9 + [[0.0]] * 2], np.float32), [8, 1, 1]))
                queries = tf.tile(tf.expand_dims(query, 1), [1, 11, 1])
                net = tf.concat([queries, keys, queries - keys, queries * keys], -1)
                if dense:
                    net = tf.compat.v1.layers.dense(net, 5, kernel_initializer=tf.compat.v1.ones_initializer())
                grads = tf.compat.v1.gradients(tf.reduce_sum(tf.sin(net)), [query, history], gate_gradients=True)
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    return session.run(grads)

        for dense in (False, True):
            with self.subTest(dense=dense):
                self.unroute()
                stock = gradients(dense)
                retf.ops.route_pair_concat_gradients()
                routed = gradients(dense)
                self.assertGreater(np.abs(stock[1]).max(), 0)
                for got, want in zip(routed, stock):
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def pair_dense_input_grad_reference(grad, w, like, num_pieces):
    """grad w^T, whole and by blocks of like's last dimension, in float64."""
    whole = grad.astype(np.float64) @ w.astype(np.float64).T
    d = like.shape[-1]
    return whole, [whole[:, i * d:(i + 1) * d].reshape(like.shape) for i in range(num_pieces)]


def repeated_pair_grad_reference(parts, query, y, grad, w_x, sums):
    """(grad_y, query_grad, grad_x) of Retf>RepeatedPairGrad, in float64."""
    parts, query, y, grad, w_x, sums = (a.astype(np.float64) for a in (parts, query, y, grad, w_x, sums))
    d = query.shape[1]
    part_y, part_product = parts[:, :d], parts[:, d:]
    y_rows = y.reshape(parts.shape[0], d)
    steps = parts.shape[0] // max(query.shape[0], 1)
    repeated = np.repeat(query, steps, axis=0)
    query_grad = sums @ w_x.T + (part_product * y_rows).reshape(query.shape[0], steps, d).sum(axis=1)
    return ((part_y + part_product * repeated).reshape(y.shape), query_grad,
            (grad @ w_x.T + part_product * y_rows).reshape(y.shape))


class PairDenseGradTest(unittest.TestCase):
    """Retf>PairDenseInputGrad against NumPy, and a dense layer over DIN's activation-unit concat routed by
    its pieces' linearity (retf.ops.route_pair_concat_gradients), against TensorFlow's gradients."""

    PIECE_ORDERS = PairConcatGradTest.PIECE_ORDERS
    setUp, unroute, tearDown = PairConcatGradTest.setUp, PairConcatGradTest.unroute, PairConcatGradTest.tearDown
    feeds, penalty_gradients = PairConcatGradTest.feeds, PairConcatGradTest.penalty_gradients

    def test_input_grad_matches_numpy_over_dtypes_and_shapes(self):
        rng = np.random.RandomState(35)
        for dtype in FLOATS:
            for like_shape, pieces, units in (((4, 7, 6), 4, 5), ((9, 3), 3, 1), ((2, 0, 4), 5, 3), ((5, 2), 1, 0)):
                with self.subTest(dtype=dtype.__name__, like=like_shape, pieces=pieces, units=units):
                    rows = int(np.prod(like_shape[:-1]))
                    like = rng.uniform(-1, 1, like_shape).astype(dtype)
                    grad = rng.uniform(-1, 1, (rows, units)).astype(dtype)
                    w = rng.uniform(-1, 1, (like_shape[-1] * pieces, units)).astype(dtype)
                    whole, by_piece = retf.ops.pair_dense_input_grad(grad, w, like, pieces)
                    want_whole, want_pieces = pair_dense_input_grad_reference(grad, w, like, pieces)
                    tolerance = 1e-5 if dtype == np.float32 else 1e-12
                    np.testing.assert_allclose(whole.numpy(), want_whole, rtol=tolerance, atol=tolerance)
                    self.assertEqual(len(by_piece), pieces)
                    for got, want in zip(by_piece, want_pieces):
                        self.assertEqual(got.shape, like.shape)
                        np.testing.assert_allclose(got.numpy(), want, rtol=tolerance, atol=tolerance)

    def test_bad_shapes_are_invalid_argument(self):
        like = tf.ones([3, 4])
        with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), "16|12"):
            retf.ops.pair_dense_input_grad(tf.ones([3, 5]), tf.ones([12, 5]), like, 4)
        with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), "5|6"):
            retf.ops.pair_dense_input_grad(tf.ones([3, 5]), tf.ones([16, 6]), like, 4)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "rows"):
            retf.ops.pair_dense_input_grad(tf.ones([2, 5]), tf.ones([16, 5]), like, 4)

    # How x repeats the query over the sequence: TF 1.x programs' two ways, and a reshape whose rows take
    # each of half the query's rows twice over.
    REPEATS = {"expand": lambda query, keys: tf.tile(tf.expand_dims(query, 1), [1, tf.shape(keys)[1], 1]),
               "reshape": lambda query, keys: tf.reshape(tf.tile(query, [1, tf.shape(keys)[1]]), tf.shape(keys)),
               "halves": lambda query, keys: tf.reshape(tf.tile(query[:4], [1, 22]), tf.shape(keys))}

    def dense_unit(self, pieces, sequence, targets=lambda names: [], gate=True, repeat="expand"):
        """A dense layer (5 units, sigmoid) over concat(pieces) of a query and keys, then a second layer and
        a loss, in a fresh graph: (retf op types, the gradients of the loss for the query, the keys, the
        first layer's kernel and bias, then targets' tensors)."""
        rng = np.random.RandomState(36)
        query_feed, keys_feed = self.feeds()
        with tf.Graph().as_default() as graph:
            query = tf.constant(query_feed)
            keys = tf.constant(keys_feed if sequence else keys_feed[:, 0])
            x = self.REPEATS[repeat](query, keys) if sequence else query * 1.5
            y = keys * 1.0
            parts = {"x": x, "y": y, "x-y": x - y, "y-x": y - x, "x*y": x * y}
            made = [parts[piece] for piece in pieces]
            net = tf.concat(made, axis=-1)
            kernel = tf.Variable(rng.uniform(-1, 1, (6 * len(pieces), 5)).astype(np.float32))
            bias = tf.Variable(rng.uniform(-1, 1, 5).astype(np.float32))
            if sequence:  # tf.layers.dense on a sequence: tensordot's transpose and reshapes
                hidden = tf.nn.sigmoid(tf.tensordot(net, kernel, [[2], [0]]) + bias)
            else:
                hidden = tf.nn.sigmoid(tf.matmul(net, kernel) + bias)
            loss = tf.add_n([tf.reduce_sum(tf.sin(3.0 * hidden))] + tf.compat.v1.get_collection("extra_loss"))
            names = {"net": net, "made": made}
            grads = tf.compat.v1.gradients(loss, [query, keys, kernel, bias] + targets(names), gate_gradients=gate)
            types = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
            if any(op.type == "Retf>TransposedMatMul" and op.inputs[0].op.type == "Sum"
                   for op in graph.get_operations()):
                types.append("(the query's sum over the sequence)")
            if any(op.type == "Sum" and "Tile_grad" in op.name for op in graph.get_operations()):
                types.append("(Tile's gradient sums over the sequence)")
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return types, session.run(grads)

    def assert_routed_matches_stock(self, **kwargs):
        self.unroute()
        stock_types, stock = self.dense_unit(**kwargs)
        retf.ops.route_pair_concat_gradients()
        types, routed = self.dense_unit(**kwargs)
        self.assertNotIn("Retf>PairDenseInputGrad", stock_types)
        for got, want in zip(routed, stock):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        return types

    def test_routed_layer_gradients_are_tensorflows(self):
        for pieces in self.PIECE_ORDERS + (["x", "y", "x-y"], ["y-x", "y", "x"]):
            for sequence in (True, False):
                for gate in (True, False):
                    with self.subTest(pieces=pieces, sequence=sequence, gate=gate):
                        types = self.assert_routed_matches_stock(pieces=pieces, sequence=sequence, gate=gate)
                        self.assertIn("Retf>PairDenseInputGrad", types)

    def test_a_repeated_query_takes_its_gradients_once_per_query(self):
        # Its weight gradient from the sums over the sequence, its input gradient from Retf>RepeatedPairGrad
        # through Tile's routed gradient, with no per-step concat kernel or Tile sum left.
        for repeat in sorted(self.REPEATS):
            for pieces in (["x", "y", "x-y", "x*y"], ["y-x", "x*y", "y", "x"]):
                with self.subTest(repeat=repeat, pieces=pieces):
                    types = self.assert_routed_matches_stock(pieces=pieces, sequence=True, repeat=repeat)
                    self.assertIn("(the query's sum over the sequence)", types)
                    self.assertIn("Retf>RepeatedPairGrad", types)
                    self.assertNotIn("Retf>PairConcatGrad", types)
                    self.assertNotIn("(Tile's gradient sums over the sequence)", types)
        # Rows that do not repeat are summed one by one.
        types = self.assert_routed_matches_stock(pieces=["y", "x", "x-y"], sequence=False)
        self.assertNotIn("(the query's sum over the sequence)", types)
        # No product: TensorFlow's Tile gradient sums the concat's slices.
        types = self.assert_routed_matches_stock(pieces=["x", "y", "x-y"], sequence=True)
        self.assertNotIn("Retf>RepeatedPairGrad", types)
        self.assertIn("(Tile's gradient sums over the sequence)", types)

    def test_the_concats_and_the_pieces_own_gradients(self):
        # What the routing leaves uncomputed, computed where a program asks for it.
        for targets in (lambda names: [names["net"]], lambda names: names["made"][2:]):
            with self.subTest(targets=targets):
                types = self.assert_routed_matches_stock(pieces=["x", "y", "x-y", "x*y"], sequence=True,
                                                         targets=targets)
                self.assertIn("Retf>PairDenseInputGrad", types)

    def test_second_order_gradients_through_the_routed_layer(self):
        for of in ("keys", "query"):  # through grad_y, and through the query's whole gradient
            with self.subTest(of=of):
                self.unroute()
                stock = self.penalty_gradients(dense=True, of=of)
                retf.ops.route_pair_concat_gradients()
                for got, want in zip(self.penalty_gradients(dense=True, of=of), stock):
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())

    def test_repeated_pair_grad_matches_numpy_over_dtypes_and_shapes(self):
        rng = np.random.RandomState(38)
        for dtype in FLOATS:
            for queries, steps, d, units in ((5, 7, 6, 4), (3, 1, 18, 80), (4, 0, 3, 2), (0, 0, 3, 2), (2, 3, 0, 5),
                                             (6, 2, 5, 0)):
                with self.subTest(dtype=dtype.__name__, queries=queries, steps=steps, d=d, units=units):
                    rows = queries * steps
                    inputs = [rng.uniform(-1, 1, shape).astype(dtype) for shape in (
                        (rows, 2 * d), (queries, d), (queries, steps, d), (rows, units), (d, units), (queries, units))]
                    got = retf.ops.repeated_pair_grad(*inputs)
                    tolerance = 1e-5 if dtype == np.float32 else 1e-12
                    for got_one, want in zip(got, repeated_pair_grad_reference(*inputs)):
                        self.assertEqual(got_one.shape, want.shape)
                        np.testing.assert_allclose(got_one.numpy(), want, rtol=tolerance, atol=tolerance)

    def test_repeated_pair_grad_bad_shapes_are_invalid_argument(self):
        good = [tf.ones(shape) for shape in ((6, 8), (2, 4), (2, 3, 4), (6, 5), (4, 5), (2, 5))]
        for index, shape, message in ((0, (6, 6), "parts must be"), (1, (2, 3), "query and w_x|Dimension"),
                                      (3, (5, 5), "grad must be|Dimension"), (5, (3, 5), "sums|Dimension"),
                                      (1, (4, 4), "repeat each of the query's 4 rows")):
            with self.subTest(input=index, shape=shape):
                inputs = list(good)
                inputs[index] = tf.ones(shape)
                if index == 1 and shape == (4, 4):
                    inputs[5] = tf.ones([4, 5])
                with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), message):
                    retf.ops.repeated_pair_grad(*inputs)

    def test_the_repeated_querys_own_gradient_and_a_tile_read_elsewhere(self):
        # The tiled query's own gradient per step, computed where a program asks for it; and a Tile whose
        # output also feeds the loss elsewhere, whose gradient is then TensorFlow's over the sum of both.
        def tiled(query, keys):
            return tf.tile(tf.expand_dims(query, 1), [1, tf.shape(keys)[1], 1])

        def read_elsewhere(query, keys):
            x = tiled(query, keys)
            tf.compat.v1.add_to_collection("extra_loss", tf.reduce_sum(tf.cos(x)))
            return x

        for repeat, targets in (("expand", lambda names: [names["made"][0]]), ("elsewhere", lambda names: [])):
            with self.subTest(repeat=repeat):
                self.REPEATS = dict(PairDenseGradTest.REPEATS, elsewhere=read_elsewhere)
                types = self.assert_routed_matches_stock(pieces=["x", "y", "x-y", "x*y"], sequence=True,
                                                         repeat=repeat, targets=targets)
                self.assertIn("Retf>RepeatedPairGrad", types)
                self.assertEqual("(Tile's gradient sums over the sequence)" in types, repeat == "elsewhere")

    def test_a_routed_graph_is_freed_after_its_last_use(self):
        # An Estimator makes a graph for every train and evaluate call: what the routing keeps per graph
        # must not keep the graph.
        import gc
        import weakref
        retf.ops.route_pair_concat_gradients()
        graph = tf.Graph()
        with graph.as_default():
            query, keys = tf.ones([4, 6]), tf.ones([4, 5, 6]) * 2.0
            queries = tf.tile(tf.expand_dims(query, 1), [1, 5, 1])
            net = tf.concat([queries, keys, queries - keys, queries * keys], -1)
            tf.compat.v1.gradients(tf.reduce_sum(tf.tensordot(net, tf.ones([24, 3]), [[2], [0]])), [query, keys])
            self.assertIn("Retf>PairDenseInputGrad", {op.type for op in graph.get_operations()})
        freed = weakref.ref(graph)
        del graph, query, keys, queries, net
        gc.collect()
        self.assertIsNone(freed())

    def test_a_concat_read_elsewhere_keeps_the_layers_tensorflow_gradient(self):
        retf.ops.route_pair_concat_gradients()
        with tf.Graph().as_default() as graph:
            x, y = tf.ones([4, 3]), tf.ones([4, 3]) * 2.0
            net = tf.concat([x, y, x - y, x * y], -1)
            kernel = tf.Variable(tf.ones([12, 2]))
            loss = tf.reduce_sum(tf.matmul(net, kernel)) + tf.reduce_sum(tf.sin(net))
            tf.compat.v1.gradients(loss, [x, y, kernel])
            types = {op.type for op in graph.get_operations()}
        self.assertNotIn("Retf>PairDenseInputGrad", types)


def ancestors(op):
    """The ops op waits for: its inputs' and control inputs', transitively."""
    seen, stack = {}, list(op.control_inputs) + [t.op for t in op.inputs]
    while stack:
        current = stack.pop()
        if current.name not in seen:
            seen[current.name] = current
            stack.extend(list(current.control_inputs) + [t.op for t in current.inputs])
    return list(seen.values())


class AdamSplitTest(unittest.TestCase):
    """Retf>AdamDecayUntouched then Retf>SparseApplyAdamAsync: Retf>SparseApplyAdamDense's update, bit for bit."""

    def test_decay_then_named_rows_is_the_one_pass_kernel_bitwise(self):
        rng = np.random.RandomState(33)
        for dtype in FLOATS:
            for index_dtype in INDEX_TYPES:
                for shape, steps in (((10, 4), MIXED_INDEX_STEPS), ((37, 5), [[0, 36, 0, 5], [36], []]),
                                     ((3000, 40), FAR_APART_INDEX_STEPS), ((6, 2, 3), [[0, 5, 0], [2]])):
                    with self.subTest(dtype=dtype.__name__, index_dtype=index_dtype.__name__, shape=shape):
                        start = [rng.uniform(-1, 1, shape).astype(dtype) for _ in range(3)]
                        start[2] = np.abs(start[2])
                        one = [tf.Variable(x) for x in start]
                        split = [tf.Variable(x) for x in start]
                        for step, indices in enumerate(steps, 1):
                            indices = tf.constant(np.asarray(indices, index_dtype))
                            grad = tf.constant(rng.uniform(-1, 1, (len(indices),) + shape[1:]).astype(dtype))
                            coefficients = (0.9 ** step, 0.999 ** step, 0.01, 0.9, 0.999, 1e-7)
                            retf.ops.sparse_apply_adam_dense(*one, *coefficients, grad, indices)
                            retf.ops.adam_decay_untouched(*split, *coefficients, indices)
                            retf.ops.sparse_apply_adam_async(*split, *coefficients, grad, indices)
                            for a, b in zip(one, split):
                                np.testing.assert_array_equal(a.numpy(), b.numpy())

    def test_out_of_range_index_changes_nothing(self):
        var, m, v = (tf.Variable(tf.ones([4, 2])) for _ in range(3))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"indices\[1\] = 4 is not in \[0, 4\)"):
            retf.ops.adam_decay_untouched(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8, tf.constant([0, 4]))
        for variable in (var, m, v):
            np.testing.assert_array_equal(variable.numpy(), np.ones((4, 2)))

    def train(self, split, use_resource, cond=False):
        """Five steps of retf.train.AdamOptimizer on a table read by two lookups (one in a 1.x tf.cond with
        cond): (the graph's retf op types, the types of the ops the decay op waits for, the table after)."""
        previous = os.environ.get("RETF_SPLIT_DENSE_ADAM")
        os.environ["RETF_SPLIT_DENSE_ADAM"] = "1" if split else "0"
        control_flow_v2 = tf.compat.v1.control_flow_v2_enabled()
        if cond:
            tf.compat.v1.disable_control_flow_v2()  # the 1.x API's tf.cond
        try:
            with tf.Graph().as_default() as graph:
                rng = np.random.RandomState(34)
                table = tf.compat.v1.get_variable("table", initializer=rng.uniform(-1, 1, (300, 7)).astype(np.float32),
                                                  use_resource=use_resource)
                ids = tf.compat.v1.placeholder(tf.int64, [None])
                first = tf.nn.embedding_lookup(table, ids)
                if cond:
                    second = tf.compat.v1.cond(tf.size(ids) > 3, lambda: tf.nn.embedding_lookup(table, ids[:3]),
                                               lambda: tf.zeros([3, 7]))
                else:
                    second = tf.nn.embedding_lookup(table, ids[:3] + 1)
                loss = tf.reduce_sum(tf.sin(first)) + tf.reduce_sum(tf.square(second))
                train = retf.train.AdamOptimizer(0.05).minimize(loss)
                types = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
                decay = [op for op in graph.get_operations() if op.type.startswith("Retf>AdamDecayUntouched")]
                control = sorted(op.type for op in ancestors(decay[0])) if decay else []
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    for step in range(5):
                        session.run(train, {ids: np.random.RandomState(step).randint(0, 299, 40)})
                    return types, control, session.run(table)
        finally:
            if control_flow_v2:
                tf.compat.v1.enable_control_flow_v2()
            if previous is None:
                del os.environ["RETF_SPLIT_DENSE_ADAM"]
            else:
                os.environ["RETF_SPLIT_DENSE_ADAM"] = previous

    def test_optimizer_splits_after_the_reads_and_matches_one_pass(self):
        for use_resource, suffix, gather in ((False, "Ref", "GatherV2"), (True, "", "ResourceGather")):
            with self.subTest(use_resource=use_resource):
                split_types, control, split = self.train(True, use_resource)
                one_types, _, one = self.train(False, use_resource)
                self.assertEqual(split_types, ["Retf>AdamDecayUntouched" + suffix, "Retf>SparseApplyAdamAsync" + suffix])
                self.assertEqual(one_types, ["Retf>SparseApplyAdamDense" + suffix])
                self.assertEqual(control.count(gather), 2)  # both lookups have read the table first
                np.testing.assert_array_equal(split, one)

    def test_a_read_inside_a_cond_keeps_one_pass(self):
        types, _, table = self.train(True, False, cond=True)
        self.assertEqual(types, ["Retf>SparseApplyAdamDenseRef"])
        np.testing.assert_array_equal(table, self.train(False, False, cond=True)[2])


def allocator_outputs():
    """In a fresh process: the names of the allocators TensorFlow's CPU tensors came from, over steps whose
    tensors go from under 1 MiB to past 32 MiB and back (blocks kept, handed out again, larger ones reused
    for smaller tensors), whether every step's values were right, and what use_large_block_allocator says
    afterwards (TensorFlow has chosen its allocator by then)."""
    tf.compat.v1.disable_eager_execution()  # the checks run the 2.x API
    rows = tf.compat.v1.placeholder(tf.int32, [])
    scale = tf.compat.v1.placeholder(tf.float32, [])
    x = tf.fill(tf.stack([rows, 2500]), scale)  # 10 KB a row: 100 rows 1 MB, 3,300 rows 33 MB
    y = tf.cumsum(x, axis=1) * 0.5
    z = tf.reduce_sum(y, axis=1)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    names, right = set(), True
    with tf.compat.v1.Session() as session:
        for step, count in enumerate([20, 150, 3300, 900, 3400, 120, 3300, 1000, 60, 4000, 3300]):
            metadata = tf.compat.v1.RunMetadata()
            got = session.run(z, {rows: count, scale: step + 1.0}, options=options, run_metadata=metadata)
            want = np.full(count, (step + 1.0) * 0.5 * 2500 * 2501 / 2)
            right = right and got.shape == (count,) and bool(np.allclose(got, want, rtol=1e-5))
            names.update(m.allocator_name for d in metadata.step_stats.dev_stats for n in d.node_stats
                         for m in n.memory)
    # 1 installed (already), 0 too late, -1 the build's own allocator ranks above TensorFlow's default
    code = retf.ops._loaded_library().RetfInstallLargeBlockAllocator()
    return {"allocators": sorted(names), "right": right, "code": code, "late": retf.ops.use_large_block_allocator()}


class LargeBlockAllocatorTest(unittest.TestCase):
    """retf's large-block CPU allocator, chosen per process while `import tensorflow` runs."""

    def run_probe(self, switch):
        with tempfile.TemporaryDirectory() as scratch:
            path = os.path.join(scratch, "allocator.json")
            env = dict(os.environ, RETF_LARGE_BLOCK_ALLOCATOR=switch)
            subprocess.check_call([sys.executable, os.path.abspath(__file__), "--allocator-outputs", path], env=env)
            with open(path) as stream:
                return json.load(stream)

    def test_tensorflow_allocates_from_it_and_reused_blocks_hold_the_right_values(self):
        probe = self.run_probe("1")
        self.assertTrue(probe["right"])
        if probe["code"] == -1:  # intel-tensorflow: its MKL allocator ranks above TensorFlow's, and stays
            self.assertNotIn("retf_large_block_cpu", probe["allocators"])
            self.assertFalse(probe["late"])
            return
        self.assertEqual(probe["allocators"], ["retf_large_block_cpu"])
        self.assertEqual(probe["code"], 1)
        self.assertTrue(probe["late"])  # already the one: idempotent

    def test_switched_off_tensorflow_keeps_its_own_and_cannot_be_switched_late(self):
        probe = self.run_probe("0")
        self.assertNotIn("retf_large_block_cpu", probe["allocators"])
        self.assertTrue(probe["allocators"])
        self.assertTrue(probe["right"])
        self.assertIn(probe["code"], (0, -1))  # TensorFlow chose at its first allocation
        self.assertFalse(probe["late"])


def decode_csv_sides(records, record_defaults, **attrs):
    """DecodeCSV on the same records in TensorFlow's kernel and in retf's (asked for by its kernel label):
    per side, ("ok", the outputs as lists) or ("error", the first line of its InvalidArgumentError)."""
    sides = []
    for label in (None, retf.ops.DECODE_CSV_LABEL):
        with tf.Graph().as_default() as graph:
            feed = tf.compat.v1.placeholder(tf.string, None)
            defaults = [tf.constant(value, dtype) for value, dtype in record_defaults]
            if label is None:
                outputs = tf.io.decode_csv(feed, defaults, **attrs)
            else:
                with graph._kernel_label_map({"DecodeCSV": label}):
                    outputs = tf.io.decode_csv(feed, defaults, **attrs)
            with tf.compat.v1.Session(graph=graph) as session:
                try:
                    values = session.run(outputs, {feed: records})
                except tf.errors.InvalidArgumentError as error:
                    sides.append(("error", error.message.split("\n")[0]))
                else:
                    sides.append(("ok", [_comparable(np.asarray(v)) for v in values]))
    return sides


def _comparable(values):
    """Strings as a list; numbers by their bytes, so that NaNs compare (and their bits too)."""
    content = values.tolist() if values.dtype == object else values.tobytes()
    return values.dtype.str, values.shape, content


STRING, INT32, INT64, FLOAT, DOUBLE = (([""], tf.string), ([0], tf.int32), ([0], tf.int64), ([0.0], tf.float32),
                                       ([0.0], tf.float64))
REQUIRED = {dtype: ([], dtype) for dtype in (tf.string, tf.int32, tf.int64, tf.float32, tf.float64)}


class DecodeCSVTest(unittest.TestCase):
    """retf's DecodeCSV kernel gives TensorFlow's outputs, and TensorFlow's first error, record for record."""

    def assert_same(self, records, record_defaults, **attrs):
        stock, ours = decode_csv_sides(records, record_defaults, **attrs)
        self.assertEqual(ours, stock, "records {!r}, attrs {}".format(records, attrs))
        return stock

    def test_registered_under_its_label_and_not_as_the_default(self):
        from tensorflow.python.framework import kernels
        cpu = [(k.label, k.priority) for k in kernels.get_registered_kernels_for_op("DecodeCSV").kernel
               if k.device_type == "CPU"]
        self.assertIn((retf.ops.DECODE_CSV_LABEL, 0), cpu)
        self.assertNotIn(1, [priority for _, priority in cpu], "retf's kernel is DecodeCSV's default here: "
                                                                "these checks need TensorFlow's as the default")

    def test_wide_records_of_every_type(self):
        rng = np.random.RandomState(21)
        records = []
        for row in range(300):
            ids = "|".join(str(x) for x in rng.randint(0, 10 ** 6, rng.randint(1, 60)))
            records.append("{},{},{:.6g},{!r},u{},{},{}".format(
                row % 2, rng.randint(-2 ** 31, 2 ** 31), rng.uniform(-1e3, 1e3), rng.uniform(-1, 1),
                rng.randint(10 ** 6), ids, "" if row % 7 == 0 else "x" * (row % 40)))
        stock = self.assert_same(records, [INT32, INT64, FLOAT, DOUBLE, STRING, STRING, STRING])
        self.assertEqual(stock[0], "ok")
        self.assertEqual(len(stock[1][5][2]), 300)

    def test_numbers_parse_and_fail_as_tensorflows(self):
        texts = ["7", " 7", "7 ", "+7", "-0", "007", "2147483647", "2147483648", "-2147483649",
                 "9223372036854775807", "9223372036854775808", "1.", ".5", "5e", "1e-50", "1e39", "3.4028235e38",
                 "1e400", "nan", "NaN", "inf", "-inf", "Infinity", "0x1A", "1_0", "1,5", "abc", "1.5", "\t3"]
        for text in texts:
            for default in (INT32, INT64, FLOAT, DOUBLE, STRING):
                self.assert_same(['"{}"'.format(text) if "," in text else text], [default])

    def test_missing_and_na_fields(self):
        for dtype in (tf.string, tf.int32, tf.int64, tf.float32, tf.float64):
            default = {tf.string: (["d"], dtype)}.get(dtype, ([5], dtype))
            for records in (["1,,NA"], ["NA,1,"], [",,"], ["1,2,3"]):
                self.assert_same(records, [default, default, default], na_value="NA")
                stock = self.assert_same(records, [default, REQUIRED[dtype], default], na_value="NA")
                if records != ["1,2,3"] and records != ["NA,1,"]:
                    self.assertEqual(stock[0], "error")

    def test_quoted_fields(self):
        cases = ['"a,b",c', '"a""b",c', '"",x', 'x,""', '"x""","y"', '""""," "', 'a,"b"', '"a\nb",c',
                 # errors: a quote in an unquoted field, a lone quote inside a quoted one, no closing quote
                 'a"b,c', '"ab"c,d', '"abc,d', '"', 'a,"', 'a,"b""', '"a"b"",c']
        for record in cases:
            self.assert_same([record], [STRING, STRING])
        for record in ('a"b,c', '"a",b', 'x,"y"'):
            self.assert_same([record], [STRING, STRING], use_quote_delim=False)

    def test_delimiters_newlines_and_counts(self):
        for delim in ("|", "\t", " ", ";"):
            self.assert_same(["a{0}b{0}c".format(delim), "{0}{0}".format(delim), "1{0}2".format(delim)],
                             [STRING, STRING, STRING], field_delim=delim)
        cases = ["\na,b", "\r\na,b", "a,\r\nb", "a\n,b", "a,b\n", "a,b\r", "\n", "a,b,", "a,", "", ",",
                 "a,b,c", "a"]
        for record in cases:
            self.assert_same([record], [STRING, STRING])
        # The first bad record is the one reported.
        self.assert_same(["a,b", "a,b,c", "a"], [STRING, STRING])
        self.assert_same(["a,b", "x,1.5", "y,z"], [STRING, INT32])

    def test_selected_columns(self):
        records = ["a,b,c,d", "1,2,3,4"]
        for columns in ([0], [1, 3], [0, 2, 3], [3]):
            self.assert_same(records, [STRING] * len(columns), select_cols=columns)
        # Reading stops after the last selected column: a bad field past it is never seen.
        self.assert_same(['a,b,"c'], [STRING, STRING], select_cols=[0, 1])
        self.assert_same(['a,b,"c'], [STRING], select_cols=[2])
        self.assert_same(["a,b"], [STRING], select_cols=[4])
        self.assert_same(["a,b,"], [STRING], select_cols=[2])

    def test_shapes(self):
        self.assert_same("a,1", [STRING, INT32])
        self.assert_same([["a,1", "b,2", "c,3"], ["d,4", "e,5", "f,6"]], [STRING, INT32])
        self.assert_same(np.zeros([0], object), [STRING, INT32])
        self.assert_same(np.zeros([2, 0], object), [STRING, INT32])

    def test_random_records(self):
        rng = np.random.RandomState(22)
        short = list('a1,"\n\r .e-')
        long = list("a" * 40 + 'a1,"\n\r .e-')  # long runs: fields past the 16-character blocks of the scan
        for _ in range(200):
            for alphabet, length in ((short, 14), (long, 90)):
                record = "".join(rng.choice(alphabet, rng.randint(0, length)))
                for defaults in ([STRING] * 3, [FLOAT, STRING, INT64]):
                    self.assert_same([record], defaults)
                    self.assert_same([record], defaults[:2], use_quote_delim=False)

    def test_every_offset_of_a_long_field(self):
        for offset in range(40):
            for stop in (",", '"', "\n", "\r", "|"):
                record = "b" * offset + stop + "c" * (37 - offset) + ",d"
                for quoting in (True, False):
                    self.assert_same([record], [STRING, STRING], use_quote_delim=quoting)
                    self.assert_same([record], [STRING, STRING, STRING], use_quote_delim=quoting)
                    self.assert_same(['"' + record.replace('"', '""') + '",x'], [STRING, STRING])

    def test_use_fast_decode_csv_makes_it_every_nodes_kernel(self):
        """In a process of its own: afterwards, plain DecodeCSV nodes, in tf.data functions too, run it."""
        script = """
import json, sys
import tensorflow as tf
from tensorflow.python.framework import kernels
import retf

def priorities():
    return sorted(k.priority for k in kernels.get_registered_kernels_for_op("DecodeCSV").kernel
                  if k.device_type == "CPU" and not k.label)

lines = ["{},{},r{}".format(i, i * 0.25, "|".join(["7"] * (i % 9))) for i in range(50)]
before = priorities()
assert retf.ops.use_fast_decode_csv() and retf.ops.use_fast_decode_csv()
after = priorities()
dataset = tf.data.Dataset.from_tensor_slices(lines).batch(8).map(
    lambda x: tf.io.decode_csv(x, [[0], [0.0], [""]]))
values = [[v.numpy().tolist() for v in batch] for batch in dataset]
bad = None
try:
    tf.io.decode_csv(["1,2"], [[0], [0.0], [""]])
except tf.errors.InvalidArgumentError as error:
    bad = error.message.split("\\n")[0]
values = [[[x.decode() if isinstance(x, bytes) else x for x in column] for column in batch] for batch in values]
print(json.dumps({"before": before, "after": after, "values": values, "bad": bad}))
"""
        result = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        seen = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(seen["before"], [0])
        self.assertEqual(seen["after"], [0, 1])
        lines = ["{},{},r{}".format(i, i * 0.25, "|".join(["7"] * (i % 9))) for i in range(50)]
        fields = [line.split(",") for line in lines]
        expected = [[[int(f[0]) for f in fields[b:b + 8]], [float(f[1]) for f in fields[b:b + 8]],
                     [f[2] for f in fields[b:b + 8]]] for b in range(0, 50, 8)]
        self.assertEqual(seen["values"], expected)
        self.assertIn("Expect 3 fields but have 2 in record 0", seen["bad"])  # TF 2.13 prefixes the function


class CompositeLazyAdamOptimizer(tf.compat.v1.train.AdamOptimizer):
    """The reference: AdamOptimizer for dense, tfa's gather/compute/scatter lazy Adam in plain TF for sparse."""

    def _resource_apply_sparse(self, grad, var, indices):
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = (tf.cast(p, dtype) for p in self._get_beta_accumulators())
        lr, beta1, beta2, epsilon = (tf.cast(t, dtype) for t in (self._lr_t, self._beta1_t, self._beta2_t,
                                                                 self._epsilon_t))
        lr = lr * (tf.sqrt(1 - beta2_power) / (1 - beta1_power))
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_t = beta1 * tf.gather(m, indices) + (1 - beta1) * grad
        v_t = beta2 * tf.gather(v, indices) + (1 - beta2) * tf.square(grad)
        with tf.control_dependencies([m.scatter_update(tf.IndexedSlices(m_t, indices)),
                                      v.scatter_update(tf.IndexedSlices(v_t, indices))]):
            return var.scatter_sub(tf.IndexedSlices(lr * m_t / (tf.sqrt(v_t) + epsilon), indices))


class CompositeLazyAdam(tf.keras.optimizers.Adam):
    """Keras reference: Keras Adam for dense, the same composite for sparse (as tfa.optimizers.LazyAdam)."""

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        k = self._fallback_apply_state(var.device, var.dtype.base_dtype)
        lr = k["lr_t"] * (tf.sqrt(1 - k["beta_2_power"]) / (1 - k["beta_1_power"]))
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_t = k["beta_1_t"] * tf.gather(m, indices) + (1 - k["beta_1_t"]) * grad
        v_t = k["beta_2_t"] * tf.gather(v, indices) + (1 - k["beta_2_t"]) * tf.square(grad)
        with tf.control_dependencies([m.scatter_update(tf.IndexedSlices(m_t, indices)),
                                      v.scatter_update(tf.IndexedSlices(v_t, indices))]):
            return var.scatter_sub(tf.IndexedSlices(lr * m_t / (tf.sqrt(v_t) + k["epsilon"]), indices))


# Final losses of optimizer and reference, 40 steps of float32 training, agree to this.
LOSS_RTOL = 1e-5


class V1OptimizerTest(unittest.TestCase):
    def train(self, make_optimizer, use_resource, lookup=retf.nn.embedding_lookup_sparse, steps=40):
        indices, ids, weights, labels = synthetic_data(seed=6)
        with tf.Graph().as_default():
            tf.compat.v1.set_random_seed(7)
            init = np.random.RandomState(8)
            table = tf.compat.v1.Variable(init.normal(scale=0.1, size=(60, 8)).astype(np.float32),
                                          use_resource=use_resource)
            dense = tf.compat.v1.Variable(init.normal(scale=0.1, size=(8, 1)).astype(np.float32),
                                          use_resource=use_resource)
            bias = tf.compat.v1.Variable(np.zeros(1, np.float32), use_resource=use_resource)
            features = lookup(table, sparse(indices, ids, 256, 4), sparse(indices, weights, 256, 4),
                              combiner="mean")
            logits = tf.matmul(features, dense) + bias
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
            train = make_optimizer().minimize(loss)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                losses = [session.run([loss, train])[0] for _ in range(steps)]
                losses.append(session.run(loss))
                return losses, session.run([table, dense, bias])

    def test_trains_like_adam_plus_composite_lazy_adam(self):
        for use_resource in (True, False):
            with self.subTest(use_resource=use_resource):
                ours, ours_vars = self.train(lambda: retf.train.LazyAdamOptimizer(0.05), use_resource)
                reference, reference_vars = self.train(lambda: CompositeLazyAdamOptimizer(0.05), use_resource)
                self.assertLess(ours[-1], 0.8 * ours[0])  # it learns
                np.testing.assert_allclose(ours, reference, rtol=LOSS_RTOL)
                for a, b in zip(ours_vars, reference_vars):
                    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    def test_dense_updates_are_adams_bitwise(self):
        rng = np.random.RandomState(15)
        x = rng.normal(size=(64, 5)).astype(np.float32)
        y = (x[:, :1] > 0).astype(np.float32)
        results = []
        for make_optimizer in (tf.compat.v1.train.AdamOptimizer, retf.train.LazyAdamOptimizer):
            with tf.Graph().as_default():
                weights = tf.compat.v1.Variable(np.full((5, 1), 0.1, np.float32))
                loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=tf.matmul(x, weights)))
                train = make_optimizer(0.05).minimize(loss)
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    for _ in range(10):
                        session.run(train)
                    results.append(session.run(weights))
        np.testing.assert_array_equal(results[0], results[1])

    def test_slots_and_accumulators_are_adams(self):
        with tf.Graph().as_default():
            var = tf.compat.v1.Variable(tf.zeros([3, 2]))
            optimizer = retf.train.LazyAdamOptimizer()
            optimizer.minimize(tf.reduce_sum(tf.gather(var, [0, 2])))
            self.assertEqual(sorted(optimizer.get_slot_names()), ["m", "v"])
            self.assertEqual(len(optimizer._get_beta_accumulators()), 2)


class FusedV1OptimizersTest(unittest.TestCase):
    """retf.train's Adagrad and FTRL against tf.compat.v1.train's own, on the embedding + logistic model."""

    CASES = {
        "adagrad": (lambda: retf.train.AdagradOptimizer(1.0), lambda: tf.compat.v1.train.AdagradOptimizer(1.0)),
        "ftrl": (lambda: retf.train.FtrlOptimizer(1.0, l1_regularization_strength=1e-4,
                                                  l2_regularization_strength=1e-3),
                 lambda: tf.compat.v1.train.FtrlOptimizer(1.0, l1_regularization_strength=1e-4,
                                                          l2_regularization_strength=1e-3)),
        "ftrl_shrinkage": (lambda: retf.train.FtrlOptimizer(1.0, l2_shrinkage_regularization_strength=1e-3),
                           lambda: tf.compat.v1.train.FtrlOptimizer(1.0, l2_shrinkage_regularization_strength=1e-3)),
    }

    def test_trains_like_tensorflows_optimizers(self):
        lookup = tf.compat.v1.nn.embedding_lookup_sparse  # gathers: gradients with duplicate indices
        for name, (ours_factory, stock_factory) in sorted(self.CASES.items()):
            for use_resource in (True, False):
                with self.subTest(optimizer=name, use_resource=use_resource):
                    ours, ours_vars = V1OptimizerTest.train(self, ours_factory, use_resource, lookup)
                    stock, stock_vars = V1OptimizerTest.train(self, stock_factory, use_resource, lookup)
                    self.assertLess(ours[-1], 0.9 * ours[0])  # it learns
                    np.testing.assert_allclose(ours, stock, rtol=LOSS_RTOL)
                    for a, b in zip(ours_vars, stock_vars):
                        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    def test_slots_and_names_are_tensorflows(self):
        for ours, stock in (self.CASES["adagrad"], self.CASES["ftrl"]):
            names = []
            for factory in (ours, stock):
                with tf.Graph().as_default():
                    var = tf.compat.v1.Variable(tf.zeros([3, 2]), name="table")
                    factory().minimize(tf.reduce_sum(tf.gather(var, [0, 2, 0])))
                    names.append(sorted(v.op.name for v in tf.compat.v1.global_variables()))
            self.assertEqual(names[0], names[1])

    def test_float16_takes_the_base_class_path(self):
        results = []
        for factory in (tf.compat.v1.train.AdagradOptimizer, retf.train.AdagradOptimizer):
            with tf.Graph().as_default():
                table = tf.compat.v1.Variable(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float16))
                train = factory(0.1).minimize(tf.reduce_sum(tf.gather(table, [0, 2, 0]) * np.float16(0.5)))
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    for _ in range(3):
                        session.run(train)
                    results.append(session.run(table))
        np.testing.assert_array_equal(results[0], results[1])


def run_v1_steps(make_optimizer, values, grads, use_resource, dense=False):
    """Applies make_optimizer(global_step) to one variable over the gradients (indices, values) or dense
    gradients; returns the variable and every slot after each step, by slot name."""
    with tf.Graph().as_default():
        var = tf.compat.v1.Variable(values, use_resource=use_resource, name="table")
        step = tf.compat.v1.train.get_or_create_global_step()
        optimizer = make_optimizer(step)
        indices_ph = tf.compat.v1.placeholder(tf.int64, [None])
        grad_ph = tf.compat.v1.placeholder(values.dtype, [None] + list(values.shape[1:]) if not dense else values.shape)
        grad = grad_ph if dense else tf.IndexedSlices(grad_ph, indices_ph, tf.constant(values.shape, tf.int64))
        train = optimizer.apply_gradients([(grad, var)], global_step=step)
        slots = {name: optimizer.get_slot(var, name) for name in optimizer.get_slot_names()}
        history = []
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for indices, values_ in grads:
                feed = {grad_ph: values_} if dense else {grad_ph: values_, indices_ph: indices}
                session.run(train, feed)
                history.append(session.run(dict(slots, var=var)))
    return history


def f32(x):
    """A Python float hyperparameter as the optimizers see it: a float32 tensor, cast to the variable's dtype."""
    return float(np.float32(x))


class DeepRecOptimizersTest(unittest.TestCase):
    """retf.train.AdamAsyncOptimizer and AdagradDecayOptimizer (DeepRec's semantics) against NumPy."""

    def gradients(self, rng, dtype, shape, steps):
        out = []
        for step in range(steps):
            indices = np.asarray(FUSED_INDEX_STEPS[step % len(FUSED_INDEX_STEPS)], np.int64)
            out.append((indices, rng.uniform(-1, 1, (len(indices),) + shape[1:]).astype(dtype)))
        return out

    def test_adam_async_sparse_matches_numpy(self):
        for dtype in FLOATS:
            for use_resource in (True, False):
                with self.subTest(dtype=dtype.__name__, use_resource=use_resource):
                    rng = np.random.RandomState(21)
                    start = rng.uniform(-1, 1, (10, 3)).astype(dtype)
                    grads = self.gradients(rng, dtype, start.shape, 5)
                    history = run_v1_steps(lambda step: retf.train.AdamAsyncOptimizer(0.02), start, grads,
                                           use_resource)
                    var, m, v = start, np.zeros_like(start), np.zeros_like(start)
                    power1, power2 = dtype(0.9), dtype(0.999)  # the slots start at beta in the variable's dtype
                    for (indices, grad), got in zip(grads, history):
                        var, m, v = adam_async_reference(var, m, v, grad, indices, f32(0.02), f32(0.9), f32(0.999),
                                                         f32(1e-8), power1, power2)
                        power1, power2 = power1 * dtype(f32(0.9)), power2 * dtype(f32(0.999))
                        for name, want in (("var", var), ("m", m), ("v", v), ("beta1_power", power1),
                                           ("beta2_power", power2)):
                            np.testing.assert_array_equal(got[name], want, err_msg=name)

    def test_adam_async_dense_matches_numpy(self):
        rng = np.random.RandomState(22)
        start = rng.uniform(-1, 1, (4, 3)).astype(np.float64)
        grads = [(None, rng.uniform(-1, 1, start.shape)) for _ in range(4)]
        history = run_v1_steps(lambda step: retf.train.AdamAsyncOptimizer(0.02), start, grads, True, dense=True)
        var, m, v, power1, power2 = start, np.zeros_like(start), np.zeros_like(start), 0.9, 0.999
        for (_, grad), got in zip(grads, history):
            var, m, v = adam_async_reference(var, m, v, grad, np.arange(4), f32(0.02), f32(0.9), f32(0.999), f32(1e-8),
                                             power1, power2)
            power1, power2 = power1 * f32(0.9), power2 * f32(0.999)
            for name, want in (("var", var), ("m", m), ("v", v), ("beta1_power", power1)):
                np.testing.assert_allclose(got[name], want, rtol=1e-13, err_msg=name)

    def test_adam_async_powers_are_per_variable(self):
        with tf.Graph().as_default():
            a, b = tf.compat.v1.Variable(tf.zeros([3, 2]), name="a"), tf.compat.v1.Variable(tf.zeros([2]), name="b")
            retf.train.AdamAsyncOptimizer().minimize(tf.reduce_sum(tf.gather(a, [0, 2])) + tf.reduce_sum(b))
            names = sorted(v.op.name for v in tf.compat.v1.global_variables())
        self.assertEqual(names, ["a", "a/AdamAsync", "a/AdamAsync_1", "a/AdamAsync_2", "a/AdamAsync_3", "b",
                                 "b/AdamAsync", "b/AdamAsync_1", "b/AdamAsync_2", "b/AdamAsync_3"])

    def test_adam_async_sparse_rmsprop_matches_numpy(self):
        rng = np.random.RandomState(25)
        start = rng.uniform(-1, 1, (10, 3)).astype(np.float64)
        grads = self.gradients(rng, np.float64, start.shape, 5)
        for use_resource in (True, False):
            history = run_v1_steps(lambda step: retf.train.AdamAsyncOptimizer(0.02, apply_sparse_rmsprop=True), start,
                                   grads, use_resource)
            var, m, v = start, np.zeros_like(start), np.zeros_like(start)
            lr, beta1, beta2, epsilon = f32(0.02), f32(0.9), f32(0.999), f32(1e-8)
            for (indices, grad), got in zip(grads, history):
                for row, g in summed_rows(grad, indices).items():
                    v[row] = v[row] * beta2 + g * g * (1 - beta2)
                    m[row] = m[row] * beta1 + (1 / np.sqrt(v[row] + epsilon)) * lr * g
                    var[row] = var[row] - m[row]
                for name, want in (("var", var), ("m", m), ("v", v)):
                    np.testing.assert_allclose(got[name], want, rtol=1e-12, err_msg=name)
                self.assertEqual(got["beta1_power"], 0.9)  # this rule leaves the powers alone

    def test_adagrad_decay_sparse_matches_numpy(self):
        for dtype in FLOATS:
            for use_resource in (True, False):
                with self.subTest(dtype=dtype.__name__, use_resource=use_resource):
                    rng = np.random.RandomState(23)
                    start = rng.uniform(-1, 1, (10, 3)).astype(dtype)
                    grads = self.gradients(rng, dtype, start.shape, 7)
                    make = lambda step: retf.train.AdagradDecayOptimizer(  # noqa: E731
                        0.1, step, initial_accumulator_value=0.2, accumulator_decay_step=2, accumulator_decay_rate=0.5)
                    history = run_v1_steps(make, start, grads, use_resource)
                    var, accum, counts = start, np.full_like(start, dtype(0.2)), np.zeros(10, np.int64)
                    for step, ((indices, grad), got) in enumerate(zip(grads, history), 1):
                        var, accum, counts = adagrad_decay_reference(var, accum, counts, grad, indices, f32(0.1), 2,
                                                                     f32(0.5), f32(0.2), step)
                        np.testing.assert_array_equal(got["var"], var)
                        np.testing.assert_array_equal(got["accumulator"], accum)
                        np.testing.assert_array_equal(got["accumulator_decay_power"], counts)
                    self.assertGreater(counts.max(), 1)  # rows decayed, more than once

    def test_adagrad_decay_dense_matches_numpy(self):
        rng = np.random.RandomState(24)
        start = rng.uniform(-1, 1, (4, 3)).astype(np.float64)
        grads = [(None, rng.uniform(-1, 1, start.shape)) for _ in range(5)]
        make = lambda step: retf.train.AdagradDecayOptimizer(  # noqa: E731
            0.1, step, initial_accumulator_value=0.2, accumulator_decay_step=2, accumulator_decay_rate=0.5)
        history = run_v1_steps(make, start, grads, True, dense=True)
        var, accum, count = start, np.full_like(start, 0.2), 0
        for step, ((_, grad), got) in enumerate(zip(grads, history), 1):
            if step // 2 > count:
                accum, count = np.maximum(accum * f32(0.5), f32(0.2)), count + 1
            accum = accum + grad * grad
            var = var - grad * f32(0.1) * (1 / np.sqrt(accum))
            np.testing.assert_allclose(got["var"], var, rtol=1e-13)
            np.testing.assert_allclose(got["accumulator"], accum, rtol=1e-13)
            self.assertEqual(got["accumulator_decay_power"][0], count)


class KerasOptimizerTest(unittest.TestCase):
    def train(self, optimizer, steps=40):
        indices, ids, _, labels = synthetic_data(seed=9)
        dense_ids = np.zeros((256, 4), np.int64)
        dense_ids[indices[:, 0], indices[:, 1]] = ids
        mask = np.zeros((256, 4, 1), np.float32)
        mask[indices[:, 0], indices[:, 1]] = 1
        tf.random.set_seed(10)
        embedding = tf.keras.layers.Embedding(60, 8, embeddings_initializer=tf.keras.initializers.RandomNormal(
            stddev=0.1, seed=11))
        head = tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=12))

        def loss_fn():
            features = tf.reduce_sum(embedding(dense_ids) * mask, axis=1) / tf.reduce_sum(mask, axis=1)
            logits = head(features)
            return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = loss_fn()
            variables = embedding.trainable_variables + head.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        losses = [float(step()) for _ in range(steps)] + [float(loss_fn())]
        return losses, [v.numpy() for v in embedding.trainable_variables + head.trainable_variables]

    def test_trains_like_keras_adam_plus_composite_lazy_adam(self):
        ours, ours_vars = self.train(retf.keras.optimizers.LazyAdam(0.05))
        reference, reference_vars = self.train(CompositeLazyAdam(0.05))
        self.assertLess(ours[-1], 0.8 * ours[0])
        np.testing.assert_allclose(ours, reference, rtol=LOSS_RTOL)
        for a, b in zip(ours_vars, reference_vars):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    def test_dense_updates_are_keras_adams_bitwise(self):
        rng = np.random.RandomState(16)
        x = tf.constant(rng.normal(size=(64, 5)).astype(np.float32))
        y = tf.constant((rng.normal(size=(64, 1)) > 0).astype(np.float32))
        results = []
        for optimizer in (tf.keras.optimizers.Adam(0.05), retf.keras.optimizers.LazyAdam(0.05)):
            weights = tf.Variable(np.full((5, 1), 0.1, np.float32))
            for _ in range(10):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=x @ weights))
                optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
            results.append(weights.numpy())
        np.testing.assert_array_equal(results[0], results[1])

    def test_fit_and_config_round_trip(self):
        optimizer = retf.keras.optimizers.LazyAdam(0.01)
        clone = retf.keras.optimizers.LazyAdam.from_config(optimizer.get_config())
        self.assertEqual(clone.get_config(), optimizer.get_config())
        model = tf.keras.Sequential([tf.keras.layers.Embedding(30, 4, input_length=3), tf.keras.layers.Flatten(),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer=optimizer, loss="mse")
        x = np.random.RandomState(13).randint(0, 30, size=(64, 3))
        history = model.fit(x, np.ones((64, 1)), epochs=2, batch_size=16, verbose=0)
        self.assertLess(history.history["loss"][-1], history.history["loss"][0])
        with self.assertRaises(ValueError):
            retf.keras.optimizers.LazyAdam(amsgrad=True)


def threaded_outputs(threads):
    """Outputs of every kernel on one large problem, computed with `threads` intra-op threads."""
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    rng = np.random.RandomState(14)
    shape = (20000, 32)
    var, m, v = (tf.Variable(rng.uniform(0.1, 1, shape).astype(np.float32)) for _ in range(3))
    indices = rng.randint(0, 5000, size=40000)  # heavy duplication
    grad = rng.uniform(-1, 1, (len(indices), shape[1])).astype(np.float32)
    for step in (1, 2):
        retf.ops.sparse_apply_adam(var, m, v, 0.9 ** step, 0.999 ** step, 0.01, 0.9, 0.999, 1e-7, grad, indices)
    # Distinct rows about 50 rows of 128 bytes apart, out of order: walked in the gradient's order.
    far = [tf.Variable(rng.uniform(0.1, 1, (100000, 32)).astype(np.float32)) for _ in range(3)]
    far_indices = rng.choice(100000, size=2000, replace=False)
    far_grad = rng.uniform(-1, 1, (len(far_indices), 32)).astype(np.float32)
    for step in (1, 2):
        retf.ops.sparse_apply_adam(*far, 0.9 ** step, 0.999 ** step, 0.01, 0.9, 0.999, 1e-7, far_grad, far_indices)
    # Rows of 5 floats: chunk and packet boundaries fall inside rows.
    dense = [tf.Variable(rng.uniform(0.1, 1, (20011, 5)).astype(np.float32)) for _ in range(3)]
    dense_grad = rng.uniform(-1, 1, (len(indices), 5)).astype(np.float32)
    for step in (1, 2):
        retf.ops.sparse_apply_adam_dense(*dense, 0.9 ** step, 0.999 ** step, 0.01, 0.9, 0.999, 1e-7, dense_grad,
                                         indices)
    # A product of many chunks, its output's rows and columns ending inside tiles.
    product = retf.ops.transposed_matmul(rng.uniform(-1, 1, (5000, 37)).astype(np.float32),
                                         rng.uniform(-1, 1, (5000, 23)).astype(np.float32)).numpy()
    fused = {"transposed_matmul": product}
    # DIN's activation-unit gradient over many rows (each row on one thread).
    pair_inputs = [rng.uniform(-1, 1, (30000, width)).astype(np.float32) for width in (4 * 18, 18, 18)]
    pair = retf.ops.pair_concat_grad(*pair_inputs, ["x", "y", "x-y", "x*y"])
    fused.update(pair_x=pair[0].numpy(), pair_y=pair[1].numpy(), pair_slice=pair[2][3].numpy())
    # The dense layer's lazy input gradient, whole and one piece, over many rows.
    dense_inputs = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in ((30000, 40), (72, 40), (30000, 18))]
    dense_whole, dense_pieces = retf.ops.pair_dense_input_grad(*dense_inputs, 4)
    fused.update(pair_dense_whole=dense_whole.numpy(), pair_dense_piece=dense_pieces[2].numpy())
    # ... and where x repeats a query over 60 steps: 500 queries' gradients over 30000 rows.
    repeated = retf.ops.repeated_pair_grad(*[rng.uniform(-1, 1, shape).astype(np.float32) for shape in (
        (30000, 36), (500, 18), (500, 60, 18), (30000, 40), (18, 40), (500, 40))])
    fused.update(repeated_y=repeated[0].numpy(), repeated_query=repeated[1].numpy(), repeated_x=repeated[2].numpy())
    for name in ("adagrad", "ftrl", "adagrad_decay"):
        tables = [tf.Variable(rng.uniform(0.1, 1, shape).astype(np.float32)) for _ in range(3)]
        counts = tf.Variable(np.zeros(shape[0], np.int64))
        for step in (1, 2):
            if name == "adagrad":
                retf.ops.sparse_apply_adagrad(tables[0], tables[1], np.float32(0.1), grad, indices)
            elif name == "ftrl":
                retf.ops.sparse_apply_ftrl(*tables, grad, indices, *(np.float32(x) for x in (0.1, 0.01, 0.01, -0.5)))
            else:
                retf.ops.sparse_apply_adagrad_decay(tables[0], tables[1], counts, np.float32(0.1), np.int64(1),
                                                    np.float32(0.5), np.float32(0.1), np.int64(step), grad, indices)
        fused.update(("{}_{}".format(name, number), table.numpy()) for number, table in enumerate(tables + [counts]))
    sp_indices, ids, weights = random_sparse_batch(rng, 4000, 20000, 30)
    sp_ids = sparse(sp_indices, ids, 4000, 30)
    sp_weights = sparse(sp_indices, weights.astype(np.float32), 4000, 30)
    outputs = {"var": var.numpy(), "m": m.numpy(), "v": v.numpy()}
    outputs.update(("dense_" + name, variable.numpy()) for name, variable in zip(("var", "m", "v"), dense))
    outputs.update(("far_" + name, variable.numpy()) for name, variable in zip(("var", "m", "v"), far))
    outputs.update(fused)
    for combiner in COMBINERS:
        with tf.GradientTape() as tape:
            out = retf.nn.embedding_lookup_sparse(var, sp_ids, sp_weights, combiner=combiner)
            loss = tf.reduce_sum(out * out)
        grad = tape.gradient(loss, var)
        outputs["lookup_" + combiner] = out.numpy()
        outputs["grad_values_" + combiner] = grad.values.numpy()
        outputs["grad_indices_" + combiner] = grad.indices.numpy()
    return outputs


class ThreadingTest(unittest.TestCase):
    def test_two_threads_match_one_bitwise(self):
        runs = []
        with tempfile.TemporaryDirectory() as scratch:
            for threads in (1, 2):
                path = os.path.join(scratch, "{}.npz".format(threads))
                subprocess.check_call([sys.executable, os.path.abspath(__file__), "--threaded-outputs",
                                       str(threads), path])
                with np.load(path) as data:
                    runs.append({key: data[key] for key in data.files})
        one, two = runs
        self.assertEqual(sorted(one), sorted(two))
        for key in one:
            np.testing.assert_array_equal(one[key], two[key], err_msg=key)


class LoaderTest(unittest.TestCase):
    def run_with_package_copy(self, prepare):
        """Run retf from a copy of the package, after prepare(copy_dir); returns (code, output)."""
        with tempfile.TemporaryDirectory() as scratch:
            package = os.path.join(scratch, "retf")
            shutil.copytree(os.path.dirname(retf.__file__), package,
                            ignore=shutil.ignore_patterns("__pycache__"))
            prepare(package)
            script = ("import retf, tensorflow as tf\n"
                      "assert retf._library._module is None, 'loaded on import'\n"
                      "retf.ops.embedding_lookup_sparse(tf.ones([2, 2]), tf.constant([0]), tf.constant([0], tf.int64))\n")
            env = dict(os.environ, PYTHONPATH=scratch)
            result = subprocess.run([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, universal_newlines=True)
            return result.returncode, result.stdout

    def test_keras_loads_on_first_use(self):
        """import retf (what the 1.x API mode does inside import tensorflow) leaves Keras unloaded."""
        script = ("import sys, tensorflow, retf\n"
                  "assert 'retf.keras' not in sys.modules, 'retf.keras imported eagerly'\n"
                  "assert retf.keras.optimizers.LazyAdam.__name__ == 'LazyAdam'\n"
                  "assert 'retf.keras' in sys.modules\n"
                  "try:\n"
                  "    retf.absent\n"
                  "except AttributeError as error:\n"
                  "    assert 'absent' in str(error)\n"
                  "else:\n"
                  "    raise AssertionError('retf.absent did not raise')\n")
        subprocess.check_call([sys.executable, "-c", script])

    def test_version_mismatch_names_both_versions(self):
        def write_info(package):
            with open(os.path.join(package, "_build_info.json"), "w") as stream:
                json.dump({"tensorflow_version": "2.99.0"}, stream)

        code, output = self.run_with_package_copy(write_info)
        self.assertNotEqual(code, 0)
        self.assertIn("OpLibraryError", output)
        self.assertIn("2.99.0", output)
        running = versions.__version__  # the build's own version, whatever API it serves
        self.assertIn("TensorFlow {} is running".format(running), output)
        self.assertIn("rebuild the wheel with retfwheel against TensorFlow {}".format(running), output)

    def test_undefined_symbol_says_rebuild(self):
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            self.skipTest("no C compiler to make a library with an undefined symbol")

        def plant_broken_library(package):
            source = os.path.join(package, "broken.c")
            with open(source, "w") as stream:
                stream.write("extern void retf_symbol_from_another_tensorflow(void);\n"
                             "void retf_probe(void) { retf_symbol_from_another_tensorflow(); }\n")
            subprocess.check_call([compiler, "-shared", "-fPIC", source, "-o", os.path.join(package, "_retf_ops.so")])

        code, output = self.run_with_package_copy(plant_broken_library)
        self.assertNotEqual(code, 0)
        self.assertIn("OpLibraryError", output)
        self.assertIn("undefined symbol", output)
        self.assertIn("rebuild the wheel with retfwheel", output)


def isa_outputs():
    """TransposedMatMulTest's shapes in float32 with the path this process's RETF_TRANSPOSED_MATMUL_ISA allows."""
    rng = np.random.RandomState(23)
    outputs = {}
    for k_size, m_size, n_size in TransposedMatMulTest.SHAPES:
        a = rng.uniform(-1, 1, (k_size, m_size)).astype(np.float32)
        b = rng.uniform(-1, 1, (k_size, n_size)).astype(np.float32)
        outputs["{}x{}x{}".format(k_size, m_size, n_size)] = retf.ops.transposed_matmul(a, b).numpy()
    return outputs


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--threaded-outputs":
        np.savez(sys.argv[3], **threaded_outputs(int(sys.argv[2])))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--allocator-outputs":
        with open(sys.argv[2], "w") as stream:
            json.dump(allocator_outputs(), stream)
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--isa-outputs":
        np.savez(sys.argv[3], **isa_outputs())
        return
    unittest.main()


if __name__ == "__main__":
    main()
