"""retf's BiasAddGrad kernel (ops/cc/kernels/bias_add_grad_kernels.cc, kernel label "retf") against the exact column
sums and TensorFlow's own kernel, and retf.ops.route_bias_gradients, which labels BiasAdd's gradients in graphs."""

import unittest

import numpy as np
import tensorflow as tf

import retf
from retf._library import load_library

v1 = tf.compat.v1

# Gradients of every rank the op takes; one, two and three columns (a score's, the lane fold's divisors and not);
# a sequence's tall [rows, 80] and [rows, 40] past many chunks with a ragged last one; wide rows (a Criteo MLP's);
# channels past a chunk's values; no rows; no columns.
SHAPES = [(7, 1), (3001, 1), (4099, 2), (1001, 3), (5, 16), (2049, 80), (102400 // 50, 50, 40), (37, 5, 4, 24),
          (300, 1024), (9, 10000), (0, 8), (6, 0), (4, 3, 0)]


def as_rows(x):
    """x [..., channels] as float64 [rows, channels]."""
    return x.astype(np.float64).reshape(int(np.prod(x.shape[:-1])), x.shape[-1])


def column_bound(x):
    """What a float32 column sum may differ from the exact one by: one unit of rounding per row on the column's
    magnitude."""
    unit = np.finfo(np.float32).eps / 2
    return max(1, as_rows(x).shape[0]) * unit * np.abs(as_rows(x)).sum(0) + 1e-30


def labelled_gradients(shapes, seed, threads=None):
    """[(x, TensorFlow's BiasAddGrad of x, retf's)]: each shape's node on both kernels in one graph, retf's selected by
    the kernel label."""
    load_library()  # the kernel the label names registers with the library
    rng = np.random.RandomState(seed)
    inputs = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in shapes]
    with tf.Graph().as_default() as graph:
        fetches = []
        for x in inputs:
            xt = v1.placeholder_with_default(x, x.shape)
            stock = tf.raw_ops.BiasAddGrad(out_backprop=xt)
            with graph._kernel_label_map({"BiasAddGrad": retf.ops.BIAS_ADD_GRAD_LABEL}):
                ours = tf.raw_ops.BiasAddGrad(out_backprop=xt)
            fetches.append((stock, ours))
        config = v1.ConfigProto(intra_op_parallelism_threads=threads) if threads else None
        with v1.Session(graph=graph, config=config) as session:
            results = session.run(fetches)
    return [(x, stock, ours) for x, (stock, ours) in zip(inputs, results)]


class BiasAddGradKernelTest(unittest.TestCase):
    """The labelled kernel computes TensorFlow's BiasAddGrad: its shapes, within the rounding bound of the exact
    sums; its bits whatever the threads; TensorFlow's error for what it refuses."""

    def test_every_shape_within_the_bound_of_the_exact_sums(self):
        for x, stock, ours in labelled_gradients(SHAPES, seed=41):
            name = str(x.shape)
            exact = as_rows(x).sum(0)
            self.assertEqual(ours.dtype, np.float32, name)
            self.assertEqual(ours.shape, stock.shape, name)
            self.assertEqual(ours.shape, (x.shape[-1],), name)
            bound = column_bound(x)
            error = np.abs(ours - exact)
            self.assertTrue(np.all(error <= bound), "{}: error {} over the bound".format(name, error.max(initial=0)))
            self.assertTrue(np.all(np.abs(stock - exact) <= bound), name)  # the bound holds TensorFlow's too

    def test_results_do_not_depend_on_the_threads(self):
        shapes = [(20480, 80), (5000, 1), (300, 1024)]
        runs = [labelled_gradients(shapes, seed=43, threads=threads) for threads in (1, 2, 4)]
        for run in runs[1:]:
            for (_, _, ours), (_, _, first) in zip(run, runs[0]):
                np.testing.assert_array_equal(ours, first)

    def test_what_tensorflow_refuses_it_refuses(self):
        """A vector has no channels to sum into: the labelled node raises TensorFlow's words (newer TensorFlows put
        "Graph execution error:" before them)."""
        load_library()
        raised = []
        with tf.Graph().as_default() as graph:
            x = v1.placeholder(tf.float32)
            stock = tf.raw_ops.BiasAddGrad(out_backprop=x)
            with graph._kernel_label_map({"BiasAddGrad": retf.ops.BIAS_ADD_GRAD_LABEL}):
                ours = tf.raw_ops.BiasAddGrad(out_backprop=x)
            with v1.Session(graph=graph) as session:
                for node in (stock, ours):
                    with self.assertRaises(tf.errors.InvalidArgumentError) as caught:
                        session.run(node, {x: np.ones(5, np.float32)})
                    raised.append(caught.exception.message)
        for message in raised:
            self.assertIn("Input tensor must be at least 2D: [5]", message)


class BiasAddGradRoutingTest(unittest.TestCase):
    """retf.ops.route_bias_gradients, in graph mode as the 1.x API builds dense layers and their gradients."""

    def setUp(self):
        from tensorflow.python.ops import gen_nn_ops
        self.gen_nn_ops = gen_nn_ops
        self.saved = gen_nn_ops.bias_add_grad
        original = self.saved
        while getattr(original, "original", None) is not None:  # a wheel's bootstrap may have routed it
            original = original.original
        gen_nn_ops.bias_add_grad = original

    def tearDown(self):
        self.gen_nn_ops.bias_add_grad = self.saved

    @staticmethod
    def dense_gradients():
        """A tf.layers.dense over a sequence, a Keras Dense and a tf.nn.bias_add, trained as 1.x code trains them:
        BiasAddGrad's labels, and the bias gradients."""
        rng = np.random.RandomState(44)
        feed = rng.uniform(-1, 1, (64, 10, 12)).astype(np.float32)
        with tf.Graph().as_default() as graph:
            inputs = v1.placeholder(tf.float32, [None, 10, 12])
            hidden = v1.layers.dense(inputs, 40, activation=tf.nn.sigmoid, name="att",
                                     kernel_initializer=v1.glorot_uniform_initializer(seed=1))
            flat = tf.reshape(hidden, [-1, 400])
            logits = tf.keras.layers.Dense(8, kernel_initializer=v1.glorot_uniform_initializer(seed=2))(flat)
            bias = v1.get_variable("bias", [8], initializer=v1.constant_initializer(0.1))
            loss = tf.reduce_sum(tf.sin(tf.nn.bias_add(logits, bias)))
            biases = [v for v in v1.trainable_variables() if len(v.shape) == 1]
            grads = tf.gradients(loss, biases)
            labels = [op.node_def.attr["_kernel"].s.decode() if "_kernel" in op.node_def.attr else ""
                      for op in graph.get_operations() if op.type == "BiasAddGrad"]
            with v1.Session(graph=graph) as session:
                session.run(v1.global_variables_initializer())
                values = session.run(grads, {inputs: feed})
        return labels, values

    def test_dense_layers_bias_gradients_take_the_kernel(self):
        stock_labels, stock = self.dense_gradients()
        self.assertTrue(retf.ops.route_bias_gradients())
        self.assertFalse(retf.ops.route_bias_gradients())  # idempotent
        labels, routed = self.dense_gradients()
        self.assertEqual(stock_labels, ["", "", ""])
        self.assertEqual(labels, ["retf", "retf", "retf"])
        for ours, theirs in zip(routed, stock):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)

    def test_what_the_kernel_does_not_take_keeps_tensorflows(self):
        retf.ops.route_bias_gradients()
        with tf.Graph().as_default() as graph:
            image = v1.placeholder(tf.float32, [None, 3, 4, 4])
            double_bias = tf.zeros([3], tf.float64)
            double = tf.gradients(tf.nn.bias_add(tf.ones([4, 3], tf.float64), double_bias), double_bias)[0]
            channels_first_bias = tf.zeros([3])
            channels_first = tf.gradients(tf.nn.bias_add(image, channels_first_bias, data_format="NCHW"),
                                          channels_first_bias)[0]
            own_bias = tf.zeros([3])
            with graph._kernel_label_map({"BiasAddGrad": "mine"}):
                own = tf.gradients(tf.nn.bias_add(tf.ones([4, 3]), own_bias), own_bias)[0]
        for name, gradient in (("double", double), ("NCHW", channels_first)):
            self.assertEqual(gradient.op.type, "BiasAddGrad", name)
            self.assertNotIn("_kernel", gradient.op.node_def.attr, name)
            self.assertFalse(retf.ops.bias_gradient_takes_retf(gradient.op), name)
        self.assertEqual(own.op.node_def.attr["_kernel"].s, b"mine")  # the graph's own label stays
