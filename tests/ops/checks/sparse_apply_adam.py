"""Retf>SparseApplyAdam, Retf>SparseApplyAdamDense and dense Adam's split (ops/cc/kernels/sparse_apply_adam_kernels.cc)
and retf.train.AdamOptimizer."""

import os
import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import FAR_APART_INDEX_STEPS, FLOATS, INDEX_TYPES, assert_close
from .optimizers import LOSS_RTOL, train_logistic_model


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


# Index vectors for the sparse Adam NumPy checks, one per step: duplicates, a single index, and
# [1, 3, 5, 7], strictly ascending, which is grouped without the sort. Rows 2, 4, 6, 8 are never named.
MIXED_INDEX_STEPS = [[1, 7, 1, 3, 1], [0, 9, 9], [5], [1, 3, 5, 7]]


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
                ours, ours_vars = train_logistic_model(lambda: retf.train.AdamOptimizer(0.05), use_resource, lookup)
                stock, stock_vars = train_logistic_model(lambda: tf.compat.v1.train.AdamOptimizer(0.05), use_resource,
                                                         lookup)
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
