"""Retf>Moments, Retf>BatchNormalize and their gradients (ops/cc/kernels/moments_kernels.cc), and their routing into
tf.nn.moments and tf.nn.batch_normalization (batch_moments)."""

import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import FLOATS

# Relative to the largest magnitude of what is compared: TensorFlow sums a column in its dtype, retf in double, and the
# normalization's x * inv + (offset - mean * inv) cancels where x is near the mean.
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-10}


def tensorflows(x, offset, scale, epsilon, weights):
    """TensorFlow's own moments and normalization of x (the arithmetic tf.nn.moments and tf.nn.batch_normalization
    build), and the gradients of a loss over all three outputs."""
    x, offset, scale = tf.constant(x), tf.constant(offset), tf.constant(scale)
    with tf.GradientTape() as tape:
        tape.watch([x, offset, scale])
        mean = tf.reduce_mean(x, 0)
        variance = tf.reduce_mean(tf.math.squared_difference(x, tf.stop_gradient(mean)), 0)
        inv = tf.math.rsqrt(variance + epsilon) * scale
        y = x * inv + (offset - mean * inv)
        loss = loss_of(y, mean, variance, weights)
    return [t.numpy() for t in [mean, variance, y] + tape.gradient(loss, [x, offset, scale])]


def retfs(x, offset, scale, epsilon, weights):
    x, offset, scale = tf.constant(x), tf.constant(offset), tf.constant(scale)
    with tf.GradientTape() as tape:
        tape.watch([x, offset, scale])
        mean, variance = retf.ops.moments(x)
        y = retf.ops.batch_normalize(x, mean, variance, offset, scale, epsilon)
        loss = loss_of(y, mean, variance, weights)
    return [t.numpy() for t in [mean, variance, y] + tape.gradient(loss, [x, offset, scale])]


def assert_outputs_agree(test, got, expected, dtype, where):
    """Each of retf's outputs (mean, variance, y and the gradients of x, offset and scale) in dtype and the shape of
    TensorFlow's, within TOLERANCE of it relative to its largest magnitude."""
    for what, ours, theirs in zip(["mean", "variance", "y", "x's gradient", "offset's gradient", "scale's gradient"],
                                  got, expected):
        test.assertEqual(ours.dtype, dtype)
        test.assertEqual(ours.shape, theirs.shape)
        error = np.max(np.abs(ours.astype(np.float64) - theirs)) / (np.max(np.abs(theirs)) + 1e-30)
        test.assertLessEqual(error, TOLERANCE[dtype], "{} {} {}".format(dtype.__name__, where, what))


def penalty_gradient(moments_and_normalization, x, weights):
    """The gradient of a gradient penalty through a normalization: of the squared gradient of x of a loss over the
    normalized output and the moments, ``moments_and_normalization`` the functions (x) -> (mean, variance) and
    (x, mean, variance) -> y."""
    moments, normalization = moments_and_normalization
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            mean, variance = moments(x)
            y = normalization(x, mean, variance)
            loss = tf.reduce_sum(tf.square(y) * weights) + tf.reduce_sum(mean * variance)
        penalty = tf.reduce_sum(tf.square(inner.gradient(loss, x)))
    return outer.gradient(penalty, x)


def assert_second_order_agrees(ours, theirs, x_value, weights):
    """penalty_gradient of retf's functions and of TensorFlow's, eagerly and in a graph, within 1e-9."""
    eager = [penalty_gradient(form, tf.constant(x_value), weights).numpy() for form in (ours, theirs)]
    with tf.Graph().as_default():
        x = tf.constant(x_value)
        graph = [penalty_gradient(form, x, weights) for form in (ours, theirs)]
        with tf.compat.v1.Session() as session:
            graph = session.run(graph)
    for got, expected in (eager, graph):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def loss_of(y, mean, variance, weights):
    """A loss that reads every output, so every gradient path runs (the moments' too, as a moving average would not)."""
    y_weights, mean_weights, variance_weights = weights
    return (tf.reduce_sum(y * y_weights) + tf.reduce_sum(mean * mean_weights)
            + tf.reduce_sum(variance * variance_weights))


class BatchMomentsTest(unittest.TestCase):
    # Rows: one, a few, many; columns: one, a block's 64 and past it, a block's tail, a wide layer.
    SHAPES = [(1, 3), (7, 1), (5, 64), (300, 65), (130, 130), (2048, 1024), (512, 16)]

    def test_moments_normalization_and_gradients_match_tensorflows_arithmetic(self):
        rng = np.random.RandomState(31)
        for dtype in FLOATS:
            for rows, columns in self.SHAPES:
                x = (rng.randn(rows, columns) * 3 + 1).astype(dtype)
                offset = rng.randn(columns).astype(dtype)
                scale = (rng.rand(columns) + 0.5).astype(dtype)
                weights = (rng.randn(rows, columns).astype(dtype), rng.randn(columns).astype(dtype),
                           rng.randn(columns).astype(dtype))
                assert_outputs_agree(self, retfs(x, offset, scale, 1e-3, weights),
                                     tensorflows(x, offset, scale, 1e-3, weights), dtype, (rows, columns))

    def test_variance_is_the_mean_squared_difference_in_double(self):
        """A column far from zero: a one-pass sum of squares would lose the variance; the two passes keep it."""
        x = (1e4 + np.arange(1000) % 7).astype(np.float32).reshape(-1, 1)
        mean, variance = [t.numpy() for t in retf.ops.moments(tf.constant(x))]
        exact = x.astype(np.float64)
        self.assertAlmostEqual(float(mean[0]), float(exact.mean()), delta=1e-3)
        self.assertAlmostEqual(float(variance[0]), float(exact.var()), delta=1e-3)

    def test_second_order_gradients_match_tensorflows(self):
        """A gradient penalty through the normalization: the gradient of a function of the input's gradient, in a
        graph and eagerly, as TensorFlow's ops give it (tf.nn.moments's mean read into its variance through
        tf.stop_gradient, which its second-order gradients do not cross)."""
        rng = np.random.RandomState(33)
        x_value = (rng.randn(50, 7) * 2 + 1).astype(np.float64)
        offset, scale = rng.randn(7), rng.rand(7) + 0.5
        weights = rng.randn(50, 7)
        ours = (retf.ops.moments,
                lambda x, m, v: retf.ops.batch_normalize(x, m, v, tf.constant(offset), tf.constant(scale), 1e-3))
        theirs = (lambda x: (tf.reduce_mean(x, 0),
                             tf.reduce_mean(tf.math.squared_difference(x, tf.stop_gradient(tf.reduce_mean(x, 0))), 0)),
                  lambda x, m, v: x * (tf.math.rsqrt(v + 1e-3) * scale) + (offset - m * tf.math.rsqrt(v + 1e-3) * scale))
        assert_second_order_agrees(ours, theirs, x_value, weights)

    def test_shapes_are_checked(self):
        with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
            retf.ops.moments(tf.zeros([2, 3, 4]))
        with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
            retf.ops.batch_normalize(tf.zeros([2, 3]), tf.zeros([3]), tf.ones([3]), tf.zeros([4]), tf.ones([3]), 1e-3)

    def test_routing_takes_matrices_over_their_rows_and_leaves_the_rest_to_tensorflow(self):
        """In a graph: tf.nn.moments over a matrix's rows and tf.nn.batch_normalization of a matrix with vectors run
        retf's ops; other axes, ranks and parameter shapes TensorFlow's, and the results agree with the originals."""
        from tensorflow.python.ops import nn_impl
        retf.ops.route_batch_moments()
        self.assertFalse(retf.ops.route_batch_moments())  # idempotent
        rng = np.random.RandomState(32)
        x_value = rng.randn(40, 6).astype(np.float32)
        with tf.Graph().as_default():
            x = tf.constant(x_value)
            offset, scale = tf.constant(rng.randn(6).astype(np.float32)), tf.constant(rng.rand(6).astype(np.float32))
            mean, variance = nn_impl.moments(x, [0])
            kept_mean, kept_variance = nn_impl.moments(x, [0], keep_dims=True)
            y = nn_impl.batch_normalization(x, mean, variance, offset, scale, 1e-3)
            self.assertEqual(mean.op.type, "Retf>Moments")
            self.assertEqual(kept_mean.shape.as_list(), [1, 6])
            self.assertEqual(y.op.type, "Retf>BatchNormalize")
            # over the columns (a layer normalization's, routed as such where that is routed too: LayerMomentsTest),
            # a rank-3 input, broadcast parameters: TensorFlow's ops
            rows_mean, _ = nn_impl.moments(x, [1])
            cube_mean, _ = nn_impl.moments(tf.reshape(x, [40, 2, 3]), [0])
            broadcast = nn_impl.batch_normalization(x, kept_mean, kept_variance, offset, scale, 1e-3)
            self.assertNotEqual(rows_mean.op.type, "Retf>Moments")
            self.assertNotIn("Retf", cube_mean.op.type + broadcast.op.type)
            original_mean, original_variance = nn_impl.moments.original(x, [0])
            original = nn_impl.batch_normalization.original(x, original_mean, original_variance, offset, scale, 1e-3)
            gradients = tf.gradients(tf.reduce_sum(y * y), [x, offset, scale])
            original_gradients = tf.gradients(tf.reduce_sum(original * original), [x, offset, scale])
            with tf.compat.v1.Session() as session:
                ours, theirs = session.run([[y, broadcast] + gradients, [original, original] + original_gradients])
        for got, expected in zip(ours, theirs):
            np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


if __name__ == "__main__":
    unittest.main()
