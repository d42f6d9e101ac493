"""Retf>GRURecurrence and its gradient (ops/cc/kernels/gru_kernels.cc), and retf.ops.route_dynamic_rnn, against
TensorFlow's own tf.nn.dynamic_rnn loop over the same GRUCell."""

import unittest

import numpy as np
import tensorflow as tf

import retf

v1 = tf.compat.v1


def _loop_ops(graph):
    return [op.name for op in graph.get_operations() if op.type in ("Enter", "While", "StatelessWhile")]


class GRURecurrenceTest(unittest.TestCase):
    """tf.compat.v1.nn.dynamic_rnn over a GRUCell, TensorFlow's loop against the routed retf kernel: the same
    variables, outputs, final states and gradients for the inputs, the initial state and every weight."""

    def setUp(self):
        from tensorflow.python.ops import rnn
        self.rnn = rnn
        self.loop = rnn._dynamic_rnn_loop
        while getattr(self.loop, "original", None) is not None:  # a wheel's bootstrap may have routed it
            self.loop = self.loop.original
        self.saved = rnn._dynamic_rnn_loop
        rnn._dynamic_rnn_loop = self.loop

    def tearDown(self):
        self.rnn._dynamic_rnn_loop = self.saved

    def run_rnn(self, routed, x, lengths, h0, time_major, units, cell_class=None, seed=7):
        """Outputs, final state and the gradients of a weighted sum of both, and the graph's variable names
        and while-loop ops, for one graph built with TensorFlow's loop or the routed one."""
        self.rnn._dynamic_rnn_loop = self.loop
        if routed:
            self.assertTrue(retf.ops.route_dynamic_rnn())
            self.assertFalse(retf.ops.route_dynamic_rnn())
        graph = tf.Graph()
        with graph.as_default():
            v1.set_random_seed(seed)
            inputs = tf.constant(x)
            initial = None if h0 is None else tf.constant(h0)
            cell = (cell_class or v1.nn.rnn_cell.GRUCell)(units)
            with v1.variable_scope("encoder"):
                outputs, final = v1.nn.dynamic_rnn(
                    cell, inputs, sequence_length=None if lengths is None else tf.constant(lengths),
                    initial_state=initial, dtype=None if initial is not None else tf.float32,
                    time_major=time_major, scope="gru")
            rng = np.random.RandomState(3)
            loss = (tf.reduce_sum(outputs * rng.uniform(-1, 1, x.shape[:2] + (units,)).astype(np.float32))
                    + tf.reduce_sum(final * rng.uniform(-1, 1, (x.shape[1 if time_major else 0], units))
                                    .astype(np.float32)))
            variables = v1.trainable_variables()
            wrt = [inputs] + ([] if initial is None else [initial]) + variables
            grads = tf.gradients(loss, wrt)
            with v1.Session(graph=graph) as session:
                session.run(v1.global_variables_initializer())
                # the same weights on both paths: an initializer without an op seed draws by the graph's op count
                # (and, in newer TensorFlows, by process-wide counters), in which the two graphs differ
                weights = np.random.RandomState(seed)
                for variable in variables:
                    shape = variable.shape.as_list()
                    variable.load(weights.uniform(-0.5, 0.5, shape).astype(np.float32), session)
                values = session.run([outputs, final] + grads)
        self.rnn._dynamic_rnn_loop = self.loop
        return values, [v.name for v in variables], _loop_ops(graph)

    def assert_same(self, got, want):
        for index, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg="value %d" % index)

    def test_matches_tensorflows_loop_over_lengths_layouts_and_states(self):
        rng = np.random.RandomState(11)
        cases = [  # (batch, steps, depth, units, lengths, initial state, time-major)
            (6, 9, 5, 4, [9, 0, 3, 12, 1, 7], True, False),
            (5, 7, 8, 6, None, False, False),
            (4, 6, 3, 5, [2, 6, 6, 1], False, True),
            (3, 1, 2, 3, [1, 0, 1], True, True),
        ]
        for batch, steps, depth, units, lengths, with_state, time_major in cases:
            with self.subTest(batch=batch, steps=steps, lengths=lengths, time_major=time_major):
                shape = (steps, batch, depth) if time_major else (batch, steps, depth)
                x = rng.uniform(-1, 1, shape).astype(np.float32)
                h0 = rng.uniform(-1, 1, (batch, units)).astype(np.float32) if with_state else None
                lengths = None if lengths is None else np.array(lengths, np.int64)
                want, want_names, want_loops = self.run_rnn(False, x, lengths, h0, time_major, units)
                got, got_names, got_loops = self.run_rnn(True, x, lengths, h0, time_major, units)
                self.assertTrue(want_loops)
                self.assertEqual(got_loops, [])
                self.assertEqual(got_names, want_names)
                self.assertEqual(got_names[0], "encoder/gru/gru_cell/gates/kernel:0")
                self.assertEqual(len(got), len(want))
                self.assert_same(got, want)

    def test_other_cells_keep_tensorflows_loop(self):
        class ScaledGRU(v1.nn.rnn_cell.GRUCell):
            def call(self, inputs, state):
                output, state = super(ScaledGRU, self).call(inputs, state)
                return 0.5 * output, 0.5 * state

        x = np.random.RandomState(5).uniform(-1, 1, (3, 4, 2)).astype(np.float32)
        for cell_class in (ScaledGRU, v1.nn.rnn_cell.BasicRNNCell):
            with self.subTest(cell=cell_class.__name__):
                want, _, _ = self.run_rnn(False, x, None, None, False, 3, cell_class)
                got, _, loops = self.run_rnn(True, x, None, None, False, 3, cell_class)
                self.assertTrue(loops)
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)

    def test_bad_shapes_are_invalid_argument(self):
        zeros = np.zeros
        with self.assertRaises(tf.errors.InvalidArgumentError):
            retf.ops.gru_recurrence(zeros((2, 3, 8), np.float32), zeros((2, 3, 4), np.float32),
                                    zeros((3, 4), np.float32), zeros([2], np.int32), zeros((4, 8), np.float32),
                                    zeros((4, 4), np.float32))
        with self.assertRaises((tf.errors.InvalidArgumentError, ValueError)):
            retf.ops.gru_recurrence(zeros((2, 3, 6), np.float32), zeros((2, 3, 4), np.float32),
                                    zeros((3, 4), np.float32), zeros([3], np.int32), zeros((4, 8), np.float32),
                                    zeros((4, 4), np.float32))
