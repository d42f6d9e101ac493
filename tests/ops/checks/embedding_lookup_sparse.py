"""retf.nn.embedding_lookup_sparse and its gradient (ops/cc/kernels/embedding_lookup_sparse_kernels.cc) against
tf.compat.v1.nn.embedding_lookup_sparse."""

import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import COMBINERS, FLOATS, INDEX_TYPES, RTOL, assert_close, random_sparse_batch, sparse


class EmbeddingLookupSparseTest(unittest.TestCase):
    def cases(self):
        rng = np.random.RandomState(3)
        indices, ids, weights = random_sparse_batch(rng, batch=9, vocab=12, max_per_row=5)
        indices[:, 0] = np.minimum(indices[:, 0], 6)  # rows 7, 8 empty: output stops at the last used row
        indices[:, 1] = np.arange(len(ids))
        for dtype in FLOATS:
            params = rng.uniform(-1, 1, (12, 5)).astype(dtype)
            for index_dtype in INDEX_TYPES:
                for combiner in COMBINERS:
                    for weighted in (False, True):
                        yield dtype, index_dtype, combiner, weighted, params, indices, ids.astype(index_dtype), \
                            weights.astype(dtype)

    def lookups(self, params, indices, ids, weights, combiner, weighted):
        sp_ids = sparse(indices, ids, 9, len(ids))
        sp_weights = sparse(indices, weights, 9, len(ids)) if weighted else None
        ours = retf.nn.embedding_lookup_sparse(params, sp_ids, sp_weights, combiner=combiner)
        stock = tf.compat.v1.nn.embedding_lookup_sparse(params, sp_ids, sp_weights, combiner=combiner)
        return ours, stock

    def test_forward_matches_tensorflow(self):
        for dtype, index_dtype, combiner, weighted, params, indices, ids, weights in self.cases():
            with self.subTest(dtype=dtype.__name__, ids=index_dtype.__name__, combiner=combiner, weighted=weighted):
                for table in (tf.constant(params), tf.Variable(params)):
                    ours, stock = self.lookups(table, indices, ids, weights, combiner, weighted)
                    self.assertEqual(ours.shape, stock.shape)
                    assert_close(self, ours.numpy(), stock.numpy(), dtype)

    def test_gradient_matches_tensorflow_and_is_unique_rows(self):
        for dtype, index_dtype, combiner, weighted, params, indices, ids, weights in self.cases():
            with self.subTest(dtype=dtype.__name__, ids=index_dtype.__name__, combiner=combiner, weighted=weighted):
                table = tf.Variable(params)
                grads = []
                for lookup in (retf.nn.embedding_lookup_sparse, tf.compat.v1.nn.embedding_lookup_sparse):
                    with tf.GradientTape() as tape:
                        sp_ids = sparse(indices, ids, 9, len(ids))
                        sp_weights = sparse(indices, weights, 9, len(ids)) if weighted else None
                        out = lookup(table, sp_ids, sp_weights, combiner=combiner)
                        loss = tf.reduce_sum(out * out * np.arange(1, 6, dtype=dtype))
                    grads.append(tape.gradient(loss, table))
                ours, stock = grads
                self.assertIsInstance(ours, tf.IndexedSlices)
                self.assertEqual(len(set(ours.indices.numpy().tolist())), int(ours.indices.shape[0]))
                self.assertEqual(sorted(ours.indices.numpy().tolist()), sorted(set(ids.tolist())))
                assert_close(self, tf.convert_to_tensor(ours).numpy(), tf.convert_to_tensor(stock).numpy(), dtype)

    def test_gradient_groups_ids_up_to_the_largest_int64(self):
        big = 2 ** 63 - 1
        unique, values = retf.ops.embedding_lookup_sparse_grad(
            tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([big, 0, big, 5], tf.int64),
            tf.constant([0, 0, 1, 1], tf.int64), combiner="sum")
        self.assertEqual(unique.numpy().tolist(), [0, 5, big])
        np.testing.assert_array_equal(values.numpy(), [[1, 2], [3, 4], [4, 6]])

    def test_row_widths_of_every_column_block(self):
        # The kernels sum a row in blocks of 64, 32 or 16 bytes, then single columns.
        rng = np.random.RandomState(8)
        indices, ids, weights = random_sparse_batch(rng, batch=6, vocab=10, max_per_row=4)
        for dtype in FLOATS:
            for dim in (1, 2, 3, 4, 8, 12, 16, 24, 32, 36, 64, 67):
                with self.subTest(dtype=dtype.__name__, dim=dim):
                    table = tf.Variable(rng.uniform(-1, 1, (10, dim)).astype(dtype))
                    grads = []
                    for lookup in (retf.nn.embedding_lookup_sparse, tf.compat.v1.nn.embedding_lookup_sparse):
                        with tf.GradientTape() as tape:
                            out = lookup(table, sparse(indices, ids, 6, 4), sparse(indices, weights.astype(dtype), 6, 4),
                                         combiner="mean")
                            loss = tf.reduce_sum(out * out)
                        grads.append((out.numpy(), tf.convert_to_tensor(tape.gradient(loss, table)).numpy()))
                    (ours, ours_grad), (stock, stock_grad) = grads
                    assert_close(self, ours, stock, dtype)
                    assert_close(self, ours_grad, stock_grad, dtype)

    def test_numeric_gradient_float64(self):
        rng = np.random.RandomState(4)
        indices, ids, weights = random_sparse_batch(rng, batch=5, vocab=6, max_per_row=4)
        params = rng.uniform(-1, 1, (6, 3))
        for combiner in COMBINERS:
            for weighted in (False, True):
                with self.subTest(combiner=combiner, weighted=weighted):
                    def lookup(table, w, weighted=weighted, combiner=combiner):
                        sp_weights = sparse(indices, w, 5, 8) if weighted else None
                        return retf.nn.embedding_lookup_sparse(table, sparse(indices, ids, 5, 8), sp_weights,
                                                               combiner=combiner)
                    theoretical, numerical = tf.test.compute_gradient(lookup, [tf.constant(params),
                                                                               tf.constant(weights)])
                    for which, (t, n) in enumerate(zip(theoretical, numerical)):
                        if which == 1 and not weighted:
                            continue
                        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)

    def test_empty_batch(self):
        for combiner in COMBINERS:
            sp_ids = tf.SparseTensor(tf.zeros([0, 2], tf.int64), tf.zeros([0], tf.int64), [3, 2])
            ours, stock = (f(tf.ones([4, 2]), sp_ids, None, combiner=combiner) for f in
                           (retf.nn.embedding_lookup_sparse, tf.compat.v1.nn.embedding_lookup_sparse))
            self.assertEqual(ours.shape, stock.shape)
            self.assertEqual(tuple(ours.shape), (0, 2))

    def test_out_of_range_id_and_unsorted_rows(self):
        params = tf.ones([4, 2])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"ids\[1\] = 4 is not in \[0, 4\)"):
            retf.nn.embedding_lookup_sparse(params, sparse([[0, 0], [1, 0]], np.array([1, 4]), 2, 1), None)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "sorted"):
            retf.ops.embedding_lookup_sparse(params, tf.constant([1, 2]), tf.constant([1, 0], tf.int64))
        # A wild last segment id is refused, not allowed to overflow the output's shape.
        for last in (2 ** 62, 2 ** 63 - 1):
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "segment_ids"):
                retf.ops.embedding_lookup_sparse(params, tf.constant([1, 2]), tf.constant([0, last], tf.int64))
        for segment_ids, message in (([-1, 0], r"segment_ids\[0\] = -1 is negative"),
                                     ([0, 1, -1], r"segment_ids\[2\] = -1 is negative"),
                                     ([0, 2, 1, 3], r"segment_ids\[2\] = 1 follows segment_ids\[1\] = 2")):
            segment_ids = tf.constant(segment_ids, tf.int64)
            ids = tf.zeros_like(segment_ids)
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                retf.ops.embedding_lookup_sparse(params, ids, segment_ids)
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
                retf.ops.embedding_lookup_sparse_grad(tf.ones([4, 2]), ids, segment_ids)

    def test_falls_back_where_fusion_does_not_apply(self):
        rng = np.random.RandomState(5)
        indices, ids, _ = random_sparse_batch(rng, batch=4, vocab=10, max_per_row=3, empty_rows=False)
        sp_ids = sparse(indices, ids, 4, 3)
        params = rng.uniform(-1, 1, (10, 4)).astype(np.float32)
        for kwargs in ({"max_norm": 0.5}, {}):
            shards = [tf.constant(params[0::2]), tf.constant(params[1::2])] if not kwargs else tf.constant(params)
            ours = retf.nn.embedding_lookup_sparse(shards, sp_ids, None, **kwargs)
            stock = tf.compat.v1.nn.embedding_lookup_sparse(shards, sp_ids, None, **kwargs)
            np.testing.assert_array_equal(ours.numpy(), stock.numpy())

    def test_routed_in_place_of_tensorflows_it_serves_the_safe_lookup_with_this_tensorflows_keywords(self):
        """The 1.x API routes the module's embedding_lookup_sparse, which safe_embedding_lookup_sparse (feature
        columns' lookups) calls with what this TensorFlow passes: 2.13 adds allow_fast_lookup."""
        from tensorflow.python.ops import embedding_ops
        from tensorflow.python.util import tf_inspect

        rng = np.random.RandomState(6)
        indices, ids, weights = random_sparse_batch(rng, batch=6, vocab=10, max_per_row=3)
        valid = sparse(indices, ids.copy(), 6, 3)
        ids[0] = -1  # pruned by the safe lookup
        sp_ids, sp_weights = sparse(indices, ids, 6, 3), sparse(indices, weights.astype(np.float32), 6, 3)
        params = tf.constant(rng.uniform(-1, 1, (10, 4)).astype(np.float32))
        module_lookup = embedding_ops.embedding_lookup_sparse
        stock = [tf.compat.v1.nn.safe_embedding_lookup_sparse(params, sp_ids, w, default_id=d)
                 for w in (None, sp_weights) for d in (None, 3)]
        embedding_ops.embedding_lookup_sparse = retf.nn.embedding_lookup_sparse
        try:
            routed = [tf.compat.v1.nn.safe_embedding_lookup_sparse(params, sp_ids, w, default_id=d)
                      for w in (None, sp_weights) for d in (None, 3)]
        finally:
            embedding_ops.embedding_lookup_sparse = module_lookup
        for ours, theirs in zip(routed, stock):
            assert_close(self, ours.numpy(), theirs.numpy(), np.float32)
        takes_fast = "allow_fast_lookup" in tf_inspect.getfullargspec(retf.nn._STOCK_LOOKUP).args
        if takes_fast:
            fast = retf.nn.embedding_lookup_sparse(params, valid, None, allow_fast_lookup=True)
            assert_close(self, fast.numpy(), retf.nn.embedding_lookup_sparse(params, valid, None).numpy(),
                         np.float32)
        else:  # as TensorFlow's own function refuses it
            with self.assertRaisesRegex(TypeError, "unexpected keyword argument 'allow_fast_lookup'"):
                retf.nn.embedding_lookup_sparse(params, valid, None, allow_fast_lookup=True)
        with self.assertRaisesRegex(TypeError, "unexpected keyword argument 'fast'"):
            retf.nn.embedding_lookup_sparse(params, valid, None, fast=True)


def unsafe_batch(rng, batch, vocab, max_per_row, dtype):
    """Row-major pieces of a batch the safe lookup must clean: ids < 0, weights <= 0, empty rows (the last ones
    too)."""
    indices, ids, weights = random_sparse_batch(rng, batch=batch - 2, vocab=vocab, max_per_row=max_per_row)
    ids[::5] = -1 - ids[::5]
    weights[1::4] = 0.0
    weights[2::7] = -weights[2::7]
    return indices, ids, weights.astype(dtype)


class SafeEmbeddingLookupSparseTest(unittest.TestCase):
    """retf.nn.safe_embedding_lookup_sparse against TensorFlow's own function (retf.nn._STOCK_SAFE_LOOKUP)."""

    def lookups(self, table, sp_ids, sp_weights, combiner):
        return [lookup(table, sp_ids, sp_weights, combiner=combiner)
                for lookup in (retf.nn.safe_embedding_lookup_sparse, retf.nn._STOCK_SAFE_LOOKUP)]

    def cases(self):
        rng = np.random.RandomState(11)
        for dtype in FLOATS:
            indices, ids, weights = unsafe_batch(rng, batch=10, vocab=12, max_per_row=5, dtype=dtype)
            params = rng.uniform(-1, 1, (12, 5)).astype(dtype)
            order = rng.permutation(len(ids))  # entries out of row order: TensorFlow's function takes them so
            for index_dtype in INDEX_TYPES:
                for combiner in COMBINERS:
                    for weighted in (False, True):
                        for shuffled in (False, True):
                            pick = order if shuffled else np.arange(len(ids))
                            yield (dict(dtype=dtype.__name__, ids=index_dtype.__name__, combiner=combiner,
                                        weighted=weighted, shuffled=shuffled),
                                   dtype, params, indices[pick], ids[pick].astype(index_dtype), weights[pick])

    def test_forward_and_gradients_match_tensorflow(self):
        for label, dtype, params, indices, ids, weights in self.cases():
            with self.subTest(**label):
                table = tf.Variable(params)
                values = tf.constant(weights)
                results = []
                for lookup in (retf.nn.safe_embedding_lookup_sparse, retf.nn._STOCK_SAFE_LOOKUP):
                    with tf.GradientTape() as tape:
                        tape.watch(values)
                        sp_weights = sparse(indices, values, 10, 5) if label["weighted"] else None
                        out = lookup(table, sparse(indices, ids, 10, 5), sp_weights, combiner=label["combiner"])
                        loss = tf.reduce_sum(out * out * np.arange(1, 6, dtype=dtype))
                    table_grad, weights_grad = tape.gradient(loss, [table, values])
                    results.append((out, table_grad, weights_grad))
                (ours, ours_grad, ours_wgrad), (stock, stock_grad, stock_wgrad) = results
                self.assertEqual(tuple(ours.shape), (10, 5))
                assert_close(self, ours.numpy(), stock.numpy(), dtype)
                self.assertIsInstance(ours_grad, tf.IndexedSlices)
                # The same rows as TensorFlow's: the kept ids, and id 0 for the rows left empty.
                self.assertEqual(sorted(ours_grad.indices.numpy().tolist()),
                                 sorted(set(stock_grad.indices.numpy().tolist())))
                assert_close(self, tf.convert_to_tensor(ours_grad).numpy(), tf.convert_to_tensor(stock_grad).numpy(),
                             dtype)
                if label["weighted"]:  # a weight alone in its row has a gradient of zero, give or take rounding
                    np.testing.assert_allclose(tf.convert_to_tensor(ours_wgrad).numpy(),
                                               tf.convert_to_tensor(stock_wgrad).numpy(), rtol=RTOL[dtype],
                                               atol=1e-5 if dtype == np.float32 else 1e-12)

    def test_id_zero_is_in_the_gradient_only_where_a_row_is_empty(self):
        table = tf.Variable(np.ones([6, 2], np.float32))
        for indices, ids, named in (([[0, 0], [1, 0]], [3, 4], [3, 4]), ([[0, 0], [2, 0]], [3, 4], [0, 3, 4]),
                                    ([[0, 0], [1, 0]], [3, -1], [0, 3]), ([[0, 0], [1, 0]], [0, 4], [0, 4])):
            with self.subTest(indices=indices, ids=ids):
                rows = max(i[0] for i in indices) + 1
                with tf.GradientTape() as tape:
                    out = retf.nn.safe_embedding_lookup_sparse(table, sparse(indices, np.array(ids), rows, 1), None)
                    loss = tf.reduce_sum(out)
                grad = tape.gradient(loss, table)
                self.assertEqual(grad.indices.numpy().tolist(), named)
                dense = tf.convert_to_tensor(grad).numpy()
                self.assertEqual(dense[0].tolist(), [1.0, 1.0] if 0 in ids else [0.0, 0.0])

    def test_higher_rank_ids_and_trailing_empty_rows(self):
        rng = np.random.RandomState(12)
        params = tf.constant(rng.uniform(-1, 1, (9, 3)).astype(np.float32))
        indices = np.array([[0, 0, 0], [0, 0, 1], [0, 2, 0], [1, 1, 0], [1, 1, 2]], np.int64)
        ids = np.array([1, 8, -2, 4, 4])
        sp_ids = tf.SparseTensor(indices, ids, [3, 4, 3])
        for combiner in COMBINERS:
            ours, stock = self.lookups(params, sp_ids, None, combiner)
            self.assertEqual(tuple(ours.shape), (3, 4, 3))
            assert_close(self, ours.numpy(), stock.numpy(), np.float32)

    def test_numeric_gradient_float64(self):
        rng = np.random.RandomState(13)
        indices, ids, weights = unsafe_batch(rng, batch=6, vocab=6, max_per_row=4, dtype=np.float64)
        weights[weights <= 0] = 0.5  # the gradient has a kink where a weight is pruned
        params = rng.uniform(-1, 1, (6, 3))
        for combiner in COMBINERS:
            for weighted in (False, True):
                with self.subTest(combiner=combiner, weighted=weighted):
                    def lookup(table, w, weighted=weighted, combiner=combiner):
                        sp_weights = sparse(indices, w, 6, 4) if weighted else None
                        return retf.nn.safe_embedding_lookup_sparse(table, sparse(indices, ids, 6, 4), sp_weights,
                                                                    combiner=combiner)
                    theoretical, numerical = tf.test.compute_gradient(lookup, [tf.constant(params),
                                                                               tf.constant(weights)])
                    for which, (t, n) in enumerate(zip(theoretical, numerical)):
                        if which == 1 and not weighted:
                            continue
                        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)

    def test_out_of_range_rows_and_ids(self):
        params = tf.ones([4, 2])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"id 4 is not in \[0, 4\)"):
            retf.nn.safe_embedding_lookup_sparse(params, sparse([[0, 0], [1, 0]], np.array([1, 4]), 2, 1), None)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, r"rows\[1\] = 2 is not in \[0, 2\)"):
            retf.ops.safe_embedding_lookup_sparse(params, tf.constant([1, 2]), tf.constant([0, 2], tf.int64), 2)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "negative"):
            retf.ops.safe_embedding_lookup_sparse(params, tf.constant([1]), tf.constant([0], tf.int64), -1)

    def test_falls_back_where_fusion_does_not_apply(self):
        rng = np.random.RandomState(14)
        indices, ids, weights = unsafe_batch(rng, batch=6, vocab=10, max_per_row=3, dtype=np.float32)
        sp_ids, sp_weights = sparse(indices, ids, 6, 3), sparse(indices, weights, 6, 3)
        params = rng.uniform(-1, 1, (10, 4)).astype(np.float32)
        shards = [tf.constant(params[0::2]), tf.constant(params[1::2])]
        for table, kwargs in ((tf.constant(params), {"default_id": 3}), (tf.constant(params), {"max_norm": 0.5}),
                              (shards, {})):
            with self.subTest(kwargs=sorted(kwargs), shards=isinstance(table, list)):
                ours = retf.nn.safe_embedding_lookup_sparse(table, sp_ids, sp_weights, **kwargs)
                stock = retf.nn._STOCK_SAFE_LOOKUP(table, sp_ids, sp_weights, **kwargs)
                np.testing.assert_array_equal(ours.numpy(), stock.numpy())
