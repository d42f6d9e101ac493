"""Retf>PairConcatGrad, Retf>PairDenseInputGrad and Retf>RepeatedPairGrad (ops/cc/kernels/pair_concat_grad_kernels.cc,
pair_dense_grad_kernels.cc) and retf.ops.route_pair_concat_gradients, on DIN's activation unit."""

import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import FLOATS


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
        from tensorflow.python.ops import gen_math_ops
        self.registry = framework_ops._gradient_registry._registry
        self.saved = {name: self.registry[name]["type"] for name in ("ConcatV2", "Sub", "Mul", "MatMul", "Tile")}
        self.saved_mat_mul = gen_math_ops.mat_mul
        self.unroute()

    def unroute(self):
        """TensorFlow's own gradients (a wheel's bootstrap may have routed them at import), MatMul's
        without the dense layer's routing (the weight gradients' may stay), and tf.matmul's own products."""
        from tensorflow.python.ops import gen_math_ops
        for name, function in self.saved.items():
            while getattr(function, "route", None) in ("pair concat", "pair dense"):
                function = function.original
            self.registry[name]["type"] = function
        gen_math_ops.mat_mul = getattr(self.saved_mat_mul, "original", self.saved_mat_mul)

    def tearDown(self):
        from tensorflow.python.ops import gen_math_ops
        for name, function in self.saved.items():
            self.registry[name]["type"] = function
        gen_math_ops.mat_mul = self.saved_mat_mul

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


class PairDenseLinearTest(unittest.TestCase):
    """retf.ops.route_pair_dense_products: a dense layer over DIN's activation-unit concat of a repeated query
    computed by its pieces' linearity, against TensorFlow's product over the concat: values and gradients."""

    setUp, unroute, tearDown = PairConcatGradTest.setUp, PairConcatGradTest.unroute, PairConcatGradTest.tearDown
    REPEATS = PairDenseGradTest.REPEATS

    def dense_layer(self, pieces, dtype, shape, repeat=None, swap=False, known=True):
        """A dense layer (5 units, sigmoid) over concat(pieces) of x and y (x a query repeated over y's sequence;
        with swap, y the repeated query), then a loss, in a fresh graph (known: the graph knows the batch and the
        sequence's length): (whether a step computes the concat, the retf op types, the MatMuls' left operands'
        shapes, then the values of the layer and the loss's gradients for the query, the sequence, the kernel
        and the bias)."""
        rng = np.random.RandomState(41)
        with tf.Graph().as_default() as graph:
            query = tf.constant(rng.uniform(-1, 1, shape[:1] + shape[-1:]).astype(dtype))
            keys = tf.constant(rng.uniform(-1, 1, shape).astype(dtype))
            if not known:
                query = tf.compat.v1.placeholder_with_default(query, [None, shape[-1]])
                keys = tf.compat.v1.placeholder_with_default(keys, [None] * (len(shape) - 1) + [shape[-1]])
            sequence = keys * 1.0
            repeated = self.REPEATS[repeat](query, keys) if repeat else keys * 1.5 + 0.25
            x, y = (sequence, repeated) if swap else (repeated, sequence)
            parts = {"x": x, "y": y, "x-y": x - y, "y-x": y - x, "x*y": x * y}
            net = tf.concat([parts[piece] for piece in pieces], axis=-1)
            kernel = tf.Variable(rng.uniform(-1, 1, (shape[-1] * len(pieces), 5)).astype(dtype))
            bias = tf.Variable(rng.uniform(-1, 1, 5).astype(dtype))
            if len(shape) == 3:  # tf.layers.dense on a sequence: tensordot's reshapes around tf.matmul
                hidden = tf.nn.sigmoid(tf.tensordot(net, kernel, [[2], [0]]) + bias)
            else:
                hidden = tf.nn.sigmoid(tf.matmul(net, kernel) + bias)
            self.assertEqual(hidden.shape.as_list(), (list(shape[:-1]) if known else [None] * (len(shape) - 1)) + [5])
            loss = tf.reduce_sum(tf.sin(3.0 * hidden))
            fetches = [hidden] + [grad for grad in tf.compat.v1.gradients(loss, [query, keys, kernel, bias])
                                  if grad is not None]  # with no repeat, the query is not in the graph
            def before(*ops):
                found, stack = set(), list(ops)
                while stack:
                    for value in stack.pop().inputs:
                        if value.op not in found:
                            found.add(value.op)
                            stack.append(value.op)
                return found

            types = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
            shapes = [op.inputs[0].shape.as_list() for op in before(hidden.op) if op.type == "MatMul"]
            computed = before(*[fetch.op for fetch in fetches])
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return net.op in computed, types, shapes, session.run(fetches)

    def assert_by_pieces(self, pieces, dtype=np.float32, shape=(8, 11, 6), repeat="expand", swap=False,
                         linear=True, known=True):
        """The layer's values and gradients routed and not; returns the routed forward's products' left shapes."""
        self.unroute()
        stock_concat, _, _, stock = self.dense_layer(pieces, dtype, shape, repeat, swap, known)
        self.assertTrue(retf.ops.route_pair_dense_products())
        self.assertFalse(retf.ops.route_pair_dense_products())  # idempotent
        concat, types, shapes, routed = self.dense_layer(pieces, dtype, shape, repeat, swap, known)
        self.assertTrue(stock_concat)
        self.assertEqual(concat, not linear)  # by pieces, no one computes the concat
        self.assertEqual("Retf>RepeatedPairGrad" in types, linear)  # its gradient: retf's kernel
        tolerance = 1e-5 if dtype == np.float32 else 1e-12
        for got, want in zip(routed, stock):
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * np.abs(want).max())
        return shapes

    def test_values_and_gradients_are_tensorflows_over_dtypes_piece_orders_and_repeats(self):
        for dtype in FLOATS:
            for pieces in PairConcatGradTest.PIECE_ORDERS:
                for repeat in sorted(self.REPEATS):
                    for swap in (False, True):
                        with self.subTest(dtype=dtype.__name__, pieces=pieces, repeat=repeat, swap=swap):
                            shapes = self.assert_by_pieces(pieces, dtype, repeat=repeat, swap=swap)
                            # The query's product has the query's rows (halves: 4, each over two rows of keys).
                            self.assertIn([4 if repeat == "halves" else 8, 6], shapes)
                            self.assertEqual(sorted(shapes)[-2:], [[88, 6], [88, 6]])
                            self.assertEqual(len(shapes), 3)

    def test_a_sequence_of_unknown_length_computes_no_concat_for_its_shape(self):
        # tensordot reads the concat's shape where the graph does not know it; the sequence's serves.
        for repeat in ("expand", "reshape"):
            for swap in (False, True):
                with self.subTest(repeat=repeat, swap=swap):
                    shapes = self.assert_by_pieces(["x", "y", "x-y", "x*y"], repeat=repeat, swap=swap, known=False)
                    self.assertEqual(len(shapes), 3)

    def test_other_concats_keep_one_product(self):
        # No repeated query, no product, or a matrix: one product over the concat, as TensorFlow computes it.
        self.assert_by_pieces(["x", "y", "x-y", "x*y"], repeat=None, linear=False)
        self.assert_by_pieces(["x", "y", "x-y"], linear=False)
        self.assert_by_pieces(["x", "y", "x*y"], shape=(9, 18), repeat=None, linear=False)
        with tf.Graph().as_default() as graph:
            x, y = tf.ones([4, 3]), tf.ones([4, 3])
            tf.matmul(tf.concat([x, y, x * 2.0], -1), tf.ones([9, 2]))  # a piece not of x and y
            self.assertFalse([op.name for op in graph.get_operations() if "by_pieces" in op.name])
        # Eager products are TensorFlow's.
        x = tf.ones([2, 3])
        np.testing.assert_allclose(tf.matmul(tf.concat([x, 2 * x, x - 2 * x, x * (2 * x)], -1), tf.ones([12, 1])),
                                   [[12.0], [12.0]])  # 3 + 6 - 3 + 6
