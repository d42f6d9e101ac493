"""Every kernel's outputs with 1 and 2 intra-op threads, bit for bit (each in a process of its own)."""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import COMBINERS, RUNNER, random_sparse_batch, sparse


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
                subprocess.check_call([sys.executable, RUNNER, "--threaded-outputs", str(threads), path])
                with np.load(path) as data:
                    runs.append({key: data[key] for key in data.files})
        one, two = runs
        self.assertEqual(sorted(one), sorted(two))
        for key in one:
            np.testing.assert_array_equal(one[key], two[key], err_msg=key)
