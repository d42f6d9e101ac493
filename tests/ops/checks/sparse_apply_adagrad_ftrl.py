"""The fused Adagrad, FTRL and DeepRec kernels (ops/cc/kernels/sparse_apply_adagrad_ftrl_kernels.cc) against
NumPy models of the same operations, and against TensorFlow's own kernels."""

import ctypes
import ctypes.util
import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import FAR_APART_INDEX_STEPS, FLOATS, INDEX_TYPES


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
