"""Retf>TransposedMatMul (ops/cc/kernels/transposed_matmul_kernels.cc) and the routing of MatMul's weight
gradients to it."""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import FLOATS, RUNNER


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
                subprocess.check_call([sys.executable, RUNNER, "--isa-outputs", "transposed_matmul", path], env=env)
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

    def input_gradients(self, width, batch, static_batch):
        """(op types of the graph, x's gradient, the branch a cond took: 1 the swapped form, 0 TensorFlow's product,
        None without a cond) for sum(sin(x @ w)), x [batch, width], w [width, 64], built with TF 1.x's control flow
        (the 1.x API's), whose cond says which branch ran."""
        rng = np.random.RandomState(26)
        feed = rng.uniform(-1, 1, (batch, width)).astype(np.float32)
        v2_flow = tf.compat.v1.control_flow_v2_enabled()
        tf.compat.v1.disable_control_flow_v2()
        try:
            with tf.Graph().as_default() as graph:
                x = tf.compat.v1.placeholder(tf.float32, [batch if static_batch else None, width])
                w = tf.Variable(rng.uniform(-1, 1, (width, 64)).astype(np.float32))
                (grad_x,) = tf.compat.v1.gradients(tf.reduce_sum(tf.sin(tf.linalg.matmul(x, w))), [x])
                merges = [op for op in graph.get_operations() if op.type == "Merge"]
                types = {op.type for op in graph.get_operations()}
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    value, taken = session.run([grad_x, [op.outputs[1] for op in merges]], {x: feed})
                    return types, value, (int(taken[0]) if len(taken) == 1 else None)
        finally:
            if v2_flow:
                tf.compat.v1.enable_control_flow_v2()

    def test_a_wide_inputs_gradient_at_a_small_batch_is_the_swapped_product(self):
        width = retf.ops.SWAPPED_INPUT_GRADIENT_MIN_COLUMNS + 44  # 428
        for batch in (width // 2, width // 2 + 1, 7):
            for static_batch in (True, False):
                stock_types, stock, stock_taken = self.input_gradients(width, batch, static_batch)
                self.assertTrue(retf.ops.route_weight_gradients())
                types, routed, taken = self.input_gradients(width, batch, static_batch)
                self.entry["type"] = self.original
                swapped = 2 * batch <= width
                self.assertNotIn("Transpose", stock_types)
                self.assertIsNone(stock_taken)
                # Known batch: the graph holds the form it takes; unknown: a cond, and the step picks the form.
                if static_batch:
                    self.assertEqual("Transpose" in types, swapped, batch)
                    self.assertIsNone(taken)
                else:
                    self.assertEqual(taken, int(swapped), batch)
                # Each value is a sum of 64 products of values in [-1, 1]: the forms may differ in their last bits.
                np.testing.assert_allclose(routed, stock, rtol=0, atol=64 * 64 * np.finfo(np.float32).eps)
                if not swapped:
                    np.testing.assert_array_equal(routed, stock)

    def test_narrow_inputs_and_loops_keep_tensorflows_input_gradient(self):
        retf.ops.route_weight_gradients()
        types, _, taken = self.input_gradients(retf.ops.SWAPPED_INPUT_GRADIENT_MIN_COLUMNS - 1, 4, False)
        self.assertEqual(("Transpose" in types, taken), (False, None))
        # TF 1.x's loops (the 1.x API's), whose bodies' ops are the graph's own.
        v2_loops = tf.compat.v1.control_flow_v2_enabled()
        tf.compat.v1.disable_control_flow_v2()
        try:
            with tf.Graph().as_default() as graph:
                w = tf.Variable(np.ones((400, 400), np.float32))
                state = tf.compat.v1.placeholder(tf.float32, [1, 400])
                _, out = tf.compat.v1.while_loop(lambda i, s: i < 3,
                                                 lambda i, s: (i + 1, tf.tanh(tf.linalg.matmul(s, w))),
                                                 [tf.constant(0), state])
                tf.compat.v1.gradients(tf.reduce_sum(out), [state, w])
                types = {op.type for op in graph.get_operations()}
                self.assertIn("Enter", types)
                self.assertNotIn("Transpose", types)
        finally:
            if v2_loops:
                tf.compat.v1.enable_control_flow_v2()

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


def isa_outputs():
    """TransposedMatMulTest's shapes in float32 with the path this process's RETF_TRANSPOSED_MATMUL_ISA allows."""
    rng = np.random.RandomState(23)
    outputs = {}
    for k_size, m_size, n_size in TransposedMatMulTest.SHAPES:
        a = rng.uniform(-1, 1, (k_size, m_size)).astype(np.float32)
        b = rng.uniform(-1, 1, (k_size, n_size)).astype(np.float32)
        outputs["{}x{}x{}".format(k_size, m_size, n_size)] = retf.ops.transposed_matmul(a, b).numpy()
    return outputs
