"""Retf>LayerMoments, Retf>LayerNormalize and their gradients (ops/cc/kernels/moments_kernels.cc), and their routing
into tf.nn.moments and tf.nn.batch_normalization over a tensor's last axis (layer_norm_kernels)."""

import unittest

import numpy as np
import tensorflow as tf

import retf

from .batch_moments import assert_outputs_agree, assert_second_order_agrees, loss_of
from .common import FLOATS


def tensorflows(x, offset, scale, epsilon, weights):
    """TensorFlow's own moments and normalization of x's rows (the arithmetic tf.nn.moments(x, [-1], keep_dims=True)
    and tf.nn.batch_normalization build), and the gradients of a loss over all three outputs."""
    x, offset, scale = tf.constant(x), tf.constant(offset), tf.constant(scale)
    with tf.GradientTape() as tape:
        tape.watch([x, offset, scale])
        mean = tf.reduce_mean(x, 1, keepdims=True)
        variance = tf.reduce_mean(tf.math.squared_difference(x, tf.stop_gradient(mean)), 1, keepdims=True)
        inv = tf.math.rsqrt(variance + epsilon) * scale
        y = x * inv + (offset - mean * inv)
        mean, variance = mean[:, 0], variance[:, 0]
        loss = loss_of(y, mean, variance, weights)
    return [t.numpy() for t in [mean, variance, y] + tape.gradient(loss, [x, offset, scale])]


def retfs(x, offset, scale, epsilon, weights):
    x, offset, scale = tf.constant(x), tf.constant(offset), tf.constant(scale)
    with tf.GradientTape() as tape:
        tape.watch([x, offset, scale])
        mean, variance = retf.ops.layer_moments(x)
        y = retf.ops.layer_normalize(x, mean, variance, offset, scale, epsilon)
        loss = loss_of(y, mean, variance, weights)
    return [t.numpy() for t in [mean, variance, y] + tape.gradient(loss, [x, offset, scale])]


class LayerMomentsTest(unittest.TestCase):
    # Rows: one, a few, a chunk's 128 and past it, many; columns: one, narrow, BERT's 768.
    SHAPES = [(1, 3), (7, 1), (5, 64), (300, 65), (130, 130), (4096, 768), (20000, 8)]

    def test_moments_normalization_and_gradients_match_tensorflows_arithmetic(self):
        rng = np.random.RandomState(41)
        for dtype in FLOATS:
            for rows, columns in self.SHAPES:
                x = (rng.randn(rows, columns) * 3 + 1).astype(dtype)
                offset = rng.randn(columns).astype(dtype)
                scale = (rng.rand(columns) + 0.5).astype(dtype)
                weights = (rng.randn(rows, columns).astype(dtype), rng.randn(rows).astype(dtype),
                           rng.randn(rows).astype(dtype))
                assert_outputs_agree(self, retfs(x, offset, scale, 1e-3, weights),
                                     tensorflows(x, offset, scale, 1e-3, weights), dtype, (rows, columns))

    def test_variance_is_the_mean_squared_difference_in_double(self):
        """A row far from zero: a one-pass sum of squares would lose the variance; the two passes keep it."""
        x = (1e4 + np.arange(3000) % 7).astype(np.float32).reshape(3, 1000)
        mean, variance = [t.numpy() for t in retf.ops.layer_moments(tf.constant(x))]
        exact = x.astype(np.float64)
        np.testing.assert_allclose(mean, exact.mean(1), atol=1e-3)
        np.testing.assert_allclose(variance, exact.var(1), atol=1e-3)

    def test_second_order_gradients_match_tensorflows(self):
        """A gradient penalty through the normalization, in a graph and eagerly, as TensorFlow's ops give it."""
        rng = np.random.RandomState(43)
        x_value = (rng.randn(9, 50) * 2 + 1).astype(np.float64)
        offset, scale = rng.randn(50), rng.rand(50) + 0.5
        weights = rng.randn(9, 50)

        def tensorflows_moments(x):
            mean = tf.reduce_mean(x, 1)
            return mean, tf.reduce_mean(tf.math.squared_difference(x, tf.stop_gradient(mean)[:, None]), 1)

        def tensorflows_normalization(x, mean, variance):
            inv = tf.math.rsqrt(variance + 1e-3)[:, None] * scale
            return x * inv + (offset - mean[:, None] * inv)

        ours = (retf.ops.layer_moments,
                lambda x, m, v: retf.ops.layer_normalize(x, m, v, tf.constant(offset), tf.constant(scale), 1e-3))
        assert_second_order_agrees(ours, (tensorflows_moments, tensorflows_normalization), x_value, weights)

    def test_shapes_are_checked(self):
        with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
            retf.ops.layer_moments(tf.zeros([2, 3, 4]))
        with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):  # a mean per column, not per row
            retf.ops.layer_normalize(tf.zeros([2, 3]), tf.zeros([3]), tf.ones([2]), tf.zeros([3]), tf.ones([3]), 1e-3)
        with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
            retf.ops.layer_normalize(tf.zeros([2, 3]), tf.zeros([2]), tf.ones([2]), tf.zeros([2]), tf.ones([3]), 1e-3)

    def test_routing_takes_the_last_axis_and_leaves_the_rest_to_tensorflow(self):
        """In a graph: tf.nn.moments over the last axis of a matrix or a higher-rank tensor and
        tf.nn.batch_normalization with those moments (kept dimensions) and a vector offset and scale run retf's ops,
        in the input's shape; other axes, broadcast moments and a missing scale TensorFlow's, and the results and
        gradients agree with the original functions'."""
        from tensorflow.python.ops import nn_impl
        retf.ops.route_layer_moments()
        self.assertFalse(retf.ops.route_layer_moments())  # idempotent
        rng = np.random.RandomState(42)
        with tf.Graph().as_default():
            offset = tf.constant(rng.randn(6).astype(np.float32))
            scale = tf.constant((rng.rand(6) + 0.5).astype(np.float32))
            fetched, originals = [], []
            for shape, axes in (([40, 6], [-1]), ([40, 6], [1]), ([5, 8, 6], [2]), ([5, 8, 6], [-1])):
                x = tf.compat.v1.placeholder_with_default(rng.randn(*shape).astype(np.float32),
                                                          [None] + shape[1:])  # a batch of unknown size
                mean, variance = nn_impl.moments(x, axes, keep_dims=True)
                flat_mean, _ = nn_impl.moments(x, axes)
                y = nn_impl.batch_normalization(x, mean, variance, offset, scale, 1e-3)
                self.assertEqual(mean.op.inputs[0].op.type, "Retf>LayerMoments")
                self.assertEqual(mean.shape.as_list(), [None] + shape[1:-1] + [1])
                self.assertEqual(flat_mean.shape.as_list(), [None] + shape[1:-1])
                self.assertIn("Retf>LayerNormalize", [op.type for op in y.graph.get_operations()])
                self.assertEqual(y.shape.as_list(), [None] + shape[1:])
                original_mean, original_variance = nn_impl.moments.original(x, axes, keep_dims=True)
                original = nn_impl.batch_normalization.original(x, original_mean, original_variance, offset, scale,
                                                                1e-3)
                weights = tf.constant(rng.randn(*shape).astype(np.float32))
                fetched += [y, flat_mean] + tf.gradients(tf.reduce_sum(y * weights), [x, offset, scale])
                originals += [original, original_mean[..., 0]] + tf.gradients(tf.reduce_sum(original * weights),
                                                                              [x, offset, scale])
            # several axes, moments broadcast over the rows, no scale: TensorFlow's ops
            x = tf.constant(rng.randn(5, 8, 6).astype(np.float32))
            both_mean, both_variance = nn_impl.moments(x, [1, 2], keep_dims=True)
            broadcast = nn_impl.batch_normalization(x, both_mean, both_variance, offset, scale, 1e-3)
            unscaled_mean, unscaled_variance = nn_impl.moments(x, [-1], keep_dims=True)
            unscaled = nn_impl.batch_normalization(x, unscaled_mean, unscaled_variance, offset, None, 1e-3)
            self.assertNotIn("Retf", both_mean.op.type + broadcast.op.type + unscaled.op.type)
            with tf.compat.v1.Session() as session:
                ours, theirs = session.run([fetched, originals])
        for got, expected in zip(ours, theirs):
            np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


if __name__ == "__main__":
    unittest.main()
