"""retf's BatchMatMulV2 kernel (ops/cc/kernels/batch_matmul_kernels.cc, kernel label "retf") against TensorFlow's
own, and retf.ops.route_batch_matmul, which labels tf.matmul's small batch products in graphs."""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import RUNNER

v1 = tf.compat.v1

# (x's shape, y's shape, adj_x, adj_y): every adjoint form; output columns of one and two vectors, every tail
# 1-7 and none; rows in fours and every remainder; K of 1 and long; ranks 3 and 4; batches broadcast from 1,
# from a missing dimension, on either side; an empty batch and an empty K.
SHAPES = [((6, 5, 3), (6, 3, 16), False, False), ((6, 3, 5), (6, 3, 16), True, False),
          ((6, 5, 3), (6, 16, 3), False, True), ((6, 3, 5), (6, 16, 3), True, True),
          ((4, 50, 8), (4, 50, 8), False, True), ((4, 50, 50), (4, 50, 8), False, False),
          ((4, 50, 50), (4, 50, 8), True, False), ((4, 50, 8), (4, 8, 50), False, False),
          ((3, 7, 1), (3, 1, 13), False, False), ((3, 1, 40), (3, 40, 23), False, False),
          ((3, 2, 9), (3, 9, 31), False, False), ((3, 13, 200), (3, 200, 9), False, False),
          ((2, 3, 6, 10), (2, 3, 10, 24), False, False), ((2, 3, 10, 6), (2, 3, 24, 10), True, True),
          ((1, 9, 12), (5, 12, 17), False, False), ((5, 9, 12), (1, 12, 17), False, False),
          ((9, 12), (2, 5, 12, 20), False, False), ((2, 1, 9, 12), (1, 4, 12, 8), False, False),
          ((0, 5, 4), (0, 4, 8), False, False), ((3, 5, 0), (3, 0, 8), False, False)]
# Products the kernel hands to TensorFlow's own (fewer than 8 columns; y past 65,536 values): TensorFlow's bits.
HANDED_ON = [((4, 50, 8), (4, 8, 1), False, False), ((4, 50, 8), (4, 7, 8), False, True),
             ((2, 10, 300), (2, 300, 300), False, False), ((2, 300, 10), (2, 256, 300), True, True)]


def product_bound(x, y):
    """What a float32 product may differ from the exact one by: K units of rounding on each term's magnitude."""
    unit = np.finfo(np.float32).eps / 2
    depth = x.shape[-1]
    return 2 * depth * unit * (np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)) + 1e-30


def _adjoint(value, adjoint):
    return np.swapaxes(value, -1, -2) if adjoint else value


def labelled_products(shapes, seed):
    """{name: (x, y, TensorFlow's product, retf's product)}: each shape's BatchMatMulV2 run on both kernels in one
    graph, retf's selected by the kernel label."""
    rng = np.random.RandomState(seed)
    inputs = [(rng.uniform(-1, 1, xs).astype(np.float32), rng.uniform(-1, 1, ys).astype(np.float32), ax, ay)
              for xs, ys, ax, ay in shapes]
    with tf.Graph().as_default() as graph:
        fetches = []
        for x, y, ax, ay in inputs:
            xt, yt = v1.placeholder_with_default(x, x.shape), v1.placeholder_with_default(y, y.shape)
            stock = tf.raw_ops.BatchMatMulV2(x=xt, y=yt, adj_x=ax, adj_y=ay)
            with graph._kernel_label_map({"BatchMatMulV2": retf.ops.BATCH_MATMUL_LABEL}):
                ours = tf.raw_ops.BatchMatMulV2(x=xt, y=yt, adj_x=ax, adj_y=ay)
            fetches.append((stock, ours))
        with v1.Session(graph=graph) as session:
            results = session.run(fetches)
    return {"{}{}{}{}".format(x.shape, y.shape, int(ax), int(ay)): (x, y, stock, ours)
            for (x, y, ax, ay), (stock, ours) in zip(inputs, results)}, inputs


class BatchMatMulKernelTest(unittest.TestCase):
    """The labelled kernel computes TensorFlow's BatchMatMulV2: its shapes, within the rounding bound of the exact
    product, on every instruction set the CPU has; TensorFlow's errors for what it refuses."""

    def test_every_shape_and_adjoint_within_the_bound_of_the_exact_product(self):
        products, inputs = labelled_products(SHAPES + HANDED_ON, seed=31)
        handed_on = set(list(products)[len(SHAPES):])
        for name, (x, y, stock, ours) in products.items():
            if name in handed_on:
                np.testing.assert_array_equal(ours, stock, err_msg=name)
            ax, ay = [(a, b) for xx, yy, a, b in inputs if xx is x][0]
            exact = _adjoint(x, ax).astype(np.float64) @ _adjoint(y, ay).astype(np.float64)
            self.assertEqual(ours.shape, stock.shape, name)
            self.assertEqual(ours.shape, exact.shape, name)
            bound = product_bound(_adjoint(x, ax), _adjoint(y, ay))
            error = np.abs(ours - exact)
            self.assertTrue(np.all(error <= bound), "{}: error {} over the bound".format(name, error.max(initial=0)))
            self.assertTrue(np.all(np.abs(stock - exact) <= bound), name)  # the bound holds TensorFlow's too

    def test_every_instruction_set_within_the_bound(self):
        """Each path the CPU has (RETF_BATCH_MATMUL_ISA caps it, per process) stays within the bound, and the cap
        takes effect: rounding once per multiply-add (FMA), not twice, moves some last bits."""
        runs = {}
        with tempfile.TemporaryDirectory() as scratch:
            for isa in ("fma", "avx", "plain"):
                path = os.path.join(scratch, isa + ".npz")
                env = dict(os.environ, RETF_BATCH_MATMUL_ISA=isa)
                subprocess.check_call([sys.executable, RUNNER, "--isa-outputs", "batch_matmul", path], env=env)
                with np.load(path) as data:
                    runs[isa] = {key: data[key] for key in data.files}
        products, inputs = labelled_products(SHAPES, seed=32)
        for name, (x, y, _, _) in products.items():
            ax, ay = [(a, b) for xx, yy, a, b in inputs if xx is x][0]
            exact = _adjoint(x, ax).astype(np.float64) @ _adjoint(y, ay).astype(np.float64)
            bound = product_bound(_adjoint(x, ax), _adjoint(y, ay))
            for isa, outputs in runs.items():
                self.assertTrue(np.all(np.abs(outputs[name] - exact) <= bound), (isa, name))
        with open("/proc/cpuinfo") as stream:
            flags = " " + stream.read().replace("\n", " ") + " "
        long_k = "(3, 13, 200)(3, 200, 9)00"
        if " fma " in flags:
            self.assertFalse(np.array_equal(runs["fma"][long_k], runs["avx"][long_k]))
        if " avx " in flags:  # the vector tiles and the plain loops sum in one order, each with its own rounding
            np.testing.assert_array_equal(runs["avx"][long_k], runs["plain"][long_k])

    def test_results_do_not_depend_on_the_threads(self):
        rng = np.random.RandomState(33)
        x = rng.uniform(-1, 1, (64, 50, 8)).astype(np.float32)
        y = rng.uniform(-1, 1, (64, 50, 8)).astype(np.float32)
        results = []
        for threads in (1, 2, 4):
            with tf.Graph().as_default() as graph:
                with graph._kernel_label_map({"BatchMatMulV2": retf.ops.BATCH_MATMUL_LABEL}):
                    product = tf.raw_ops.BatchMatMulV2(x=x, y=y, adj_x=False, adj_y=True)
                config = v1.ConfigProto(intra_op_parallelism_threads=threads)
                with v1.Session(graph=graph, config=config) as session:
                    results.append(session.run(product))
        for result in results[1:]:
            np.testing.assert_array_equal(result, results[0])

    def test_what_tensorflow_refuses_it_refuses_in_tensorflows_words(self):
        """Matrices that do not multiply, batches that do not broadcast: the labelled node raises what the running
        TensorFlow's kernel raises (its kernel words it)."""
        for x_shape, y_shape in [((3, 4, 5), (3, 6, 16)), ((3, 4, 5), (2, 5, 16)), ((2, 3, 4, 5), (3, 2, 5, 9))]:
            raised = []
            with tf.Graph().as_default() as graph:
                x = v1.placeholder(tf.float32)
                y = v1.placeholder(tf.float32)
                stock = tf.raw_ops.BatchMatMulV2(x=x, y=y)
                with graph._kernel_label_map({"BatchMatMulV2": retf.ops.BATCH_MATMUL_LABEL}):
                    ours = tf.raw_ops.BatchMatMulV2(x=x, y=y)
                with v1.Session(graph=graph) as session:
                    for product in (stock, ours):
                        with self.assertRaises(tf.errors.InvalidArgumentError) as caught:
                            session.run(product, {x: np.ones(x_shape, np.float32), y: np.ones(y_shape, np.float32)})
                        raised.append(caught.exception.message.splitlines()[0])
            self.assertEqual(raised[0], raised[1], (x_shape, y_shape))


class BatchMatMulRoutingTest(unittest.TestCase):
    """retf.ops.route_batch_matmul, in graph mode as the 1.x API builds products and their gradients."""

    def setUp(self):
        from tensorflow.python.ops import gen_math_ops
        self.gen_math_ops = gen_math_ops
        self.saved = gen_math_ops.batch_mat_mul_v2
        original = self.saved
        while getattr(original, "original", None) is not None:  # a wheel's bootstrap may have routed it
            original = original.original
        gen_math_ops.batch_mat_mul_v2 = original

    def tearDown(self):
        self.gen_math_ops.batch_mat_mul_v2 = self.saved

    @staticmethod
    def attention(heads=2, steps=10, depth=8):
        """A masked self-attention over [batch, steps, depth], as public transformer code writes it: the products'
        labels by name, and the values and gradients it computes."""
        rng = np.random.RandomState(34)
        feed = rng.uniform(-1, 1, (6, steps, depth)).astype(np.float32)
        with tf.Graph().as_default() as graph:
            v1.set_random_seed(5)
            inputs = v1.placeholder(tf.float32, [None, steps, depth])
            # op seeds: newer TensorFlows draw unseeded initializers by process-wide counters
            query, key, value = (v1.layers.dense(inputs, depth, activation=tf.nn.relu, name=n,
                                                 kernel_initializer=v1.glorot_uniform_initializer(seed=i))
                                 for i, n in enumerate("qkv"))
            query, key, value = (tf.concat(tf.split(t, heads, axis=-1), axis=0) for t in (query, key, value))
            scores = tf.matmul(query, key, transpose_b=True)
            attention = tf.matmul(tf.nn.softmax(scores), value)
            loss = tf.reduce_sum(tf.sin(attention))
            grads = tf.gradients(loss, [inputs] + v1.trainable_variables())
            labels = {}
            for op in graph.get_operations():
                if op.type == "BatchMatMulV2":
                    labels[op.name] = op.node_def.attr["_kernel"].s.decode() if "_kernel" in op.node_def.attr else ""
            with v1.Session(graph=graph) as session:
                session.run(v1.global_variables_initializer())
                values = session.run([attention] + grads, {inputs: feed})
        return labels, values

    def test_attention_and_its_gradient_take_the_kernel(self):
        stock_labels, stock = self.attention()
        self.assertTrue(retf.ops.route_batch_matmul())
        self.assertFalse(retf.ops.route_batch_matmul())  # idempotent
        labels, routed = self.attention()
        self.assertEqual(len(labels), 6)  # two products, two each in their gradients
        self.assertEqual(set(stock_labels.values()), {""})
        self.assertEqual(set(labels.values()), {"retf"}, labels)
        for ours, theirs in zip(routed, stock):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)

    def test_what_the_kernel_does_not_take_keeps_tensorflows(self):
        retf.ops.route_batch_matmul()
        with tf.Graph().as_default() as graph:
            batch = v1.placeholder(tf.float32, [None, 10, 4])
            kept = {
                "double": tf.matmul(tf.ones([2, 4, 4], tf.float64), tf.ones([2, 4, 8], tf.float64)),
                "matrix": tf.matmul(tf.ones([4, 4]), tf.ones([4, 8])),  # MatMul, no batch
            }
            with graph._kernel_label_map({"BatchMatMulV2": "mine"}):
                own = tf.matmul(batch, tf.ones([1, 4, 16]))
            taken = {  # the kernel decides by the shapes it is given
                "small": tf.matmul(batch, tf.ones([1, 4, 16])),
                "narrow": tf.matmul(batch, tf.ones([1, 4, 7])),
                "large": tf.matmul(tf.ones([2, 300, 300]), tf.ones([2, 300, 300])),
                "unknown": tf.matmul(batch, v1.placeholder(tf.float32, [None, 4, None])),
                "any rank": tf.matmul(v1.placeholder(tf.float32), v1.placeholder(tf.float32)),
            }
        for name, product in kept.items():
            self.assertNotIn("_kernel", product.op.node_def.attr, name)
            self.assertFalse(retf.ops.labels_for_retf(product.op), name)
        for name, product in taken.items():
            self.assertEqual(product.op.node_def.attr["_kernel"].s, b"retf", name)
        self.assertEqual(own.op.node_def.attr["_kernel"].s, b"mine")  # the graph's own label stays


def isa_outputs():
    """SHAPES' products on retf's kernel with the path this process's RETF_BATCH_MATMUL_ISA allows."""
    products, _ = labelled_products(SHAPES, seed=32)
    return {name: ours for name, (_, _, _, ours) in products.items()}
