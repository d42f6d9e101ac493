"""DeepRec's EmbeddingVariable (retf.embedding_variable) against NumPy references of its semantics: a lookup
creates the initializer's row, a filtered key reads the no-permission value and is not updated, every optimizer
updates only the keys of its gradient, evicted keys are gone after a save, checkpoints restore into any number of
partitions and from DeepRec's own layout, and concurrent steps keep every key."""

import os
import shutil
import tempfile
import threading
import time
import unittest

import numpy as np
import tensorflow as tf

from retf import embedding_variable as ev
from retf import train as retf_train

from .sparse_apply_adagrad_ftrl import adagrad_decay_reference, adagrad_reference, ftrl_reference
from .sparse_apply_adam import lazy_adam_reference

v1 = tf.compat.v1
ev.install()

DIM = 4
DEFAULT_ROWS = 8
# Keys of every kind an id column produces: small, huge, negative, hashed strings' 63-bit values.
KEYS = np.array([5, 1000003, -7, 2 ** 40 + 3, 3, 9 * 10 ** 18], np.int64)
# Per step, positions in KEYS: duplicates, a single key, every key.
STEPS = [[0, 1, 0, 3], [2], [4, 5, 4, 4, 1], [0, 1, 2, 3, 4, 5]]


def default_rows(seed=7):
    return np.random.RandomState(seed).uniform(-1, 1, (DEFAULT_ROWS, DIM)).astype(np.float32)


def initial_rows(defaults, keys):
    """DeepRec's start of a new key: default row key mod default_value_dim."""
    return defaults[np.mod(keys, len(defaults))].copy()


def option(**kwargs):
    init = kwargs.pop("init", ev.InitializerOption(default_value_dim=DEFAULT_ROWS))
    return ev.EmbeddingVariableOption(init_option=init, **kwargs)


def make_variable(name, defaults, ev_option=None, partitioner=None):
    return ev.get_embedding_variable(name, DIM, initializer=lambda shape, dtype=None: tf.constant(defaults),
                                     ev_option=ev_option or option(), partitioner=partitioner)


class Model(object):
    """loss = sum(lookup(variable, keys) * grad): the optimizer sees grad as the keys' gradient."""

    def __init__(self, variable, optimizer):
        self.keys = v1.placeholder(tf.int64, [None])
        self.grad = v1.placeholder(tf.float32, [None, DIM])
        self.rows = tf.nn.embedding_lookup(variable, self.keys)
        self.step = v1.train.get_or_create_global_step()
        self.train = optimizer.minimize(tf.reduce_sum(self.rows * self.grad), global_step=self.step) \
            if optimizer is not None else None


def read_rows(session, variable, keys):
    """The rows of keys without counting (a slot's, or the variable's after training)."""
    parts = list(variable) if isinstance(variable, list) else [variable]
    out = []
    for key in keys:
        part = parts[int(np.mod(np.mod(key, 1000), len(parts)))]
        out.append(session.run(part.sparse_read(tf.constant([key], tf.int64)))[0])
    return np.array(out)


class EmbeddingVariableTest(unittest.TestCase):

    def setUp(self):
        self.folder = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def test_lookup_creates_the_initializers_row(self):
        defaults = default_rows()
        with tf.Graph().as_default():
            variable = make_variable("emb", defaults)
            model = Model(variable, None)
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                self.assertEqual([], list(session.run(v1.report_uninitialized_variables())))
                got = session.run(model.rows, {model.keys: KEYS})
                np.testing.assert_array_equal(got, initial_rows(defaults, KEYS))
                got = session.run(tf.nn.embedding_lookup(variable, tf.constant([[5, 3], [3, 5]], tf.int64)))
                self.assertEqual((2, 2, DIM), got.shape)
                np.testing.assert_array_equal(got[0, 0], got[1, 1])

    def test_sequence_ids_read_rows_in_their_shape_and_the_fused_lookup_reads_the_same(self):
        """Sequence ids [batch, time, 1] (a sequence column's) read [batch, time, dim], known statically as
        TensorFlow's lookup knows it; DeepRec's fused_safe_embedding_lookup_sparse reads the same."""
        from tensorflow.python.ops import embedding_ops

        defaults = default_rows()
        with tf.Graph().as_default():
            variable = make_variable("emb", defaults)
            ids = tf.SparseTensor([[0, 0, 0], [0, 1, 0], [2, 1, 0], [2, 1, 1]],
                                  tf.constant([5, 3, 1000003, -7], tf.int64),
                                  v1.placeholder_with_default(tf.constant([3, 2, 2], tf.int64), [3]))  # as a batch's
            safe = tf.nn.safe_embedding_lookup_sparse(variable, ids)
            fused = embedding_ops.fused_safe_embedding_lookup_sparse(variable, ids, prune=False)
            self.assertEqual([None, None, DIM], safe.shape.as_list())
            self.assertEqual([None, None, DIM], fused.shape.as_list())
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                got, got_fused = session.run([safe, fused])
        expected = np.zeros((3, 2, DIM), np.float32)  # empty positions read zeros; the negative id is pruned
        expected[0, 0], expected[0, 1], expected[2, 1] = initial_rows(defaults, np.array([5, 3, 1000003]))
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        np.testing.assert_array_equal(got_fused, got)

    def test_features_not_provided_name_the_flag_to_drop(self):
        """(Imported by the module paths DeepRec's scripts use: tests/test_tf1_api.py.)"""
        drop = "not provided.*Fix: drop the script's "
        for make, fix in ((lambda: ev.WorkQueue(["a.csv"]), drop + "--workqueue"),
                          (lambda: ev.ParquetDataset("a.parquet", batch_size=8),
                           "not provided.*Fix: pass the script's --parquet_dataset False"),
                          (lambda: ev.categorical_column_with_adaptive_embedding("C1"), drop + "--adaptive_emb"),
                          (lambda: ev.get_multihash_variable("item", [[50, 8], [60, 8]]), drop + "--multihash"),
                          (lambda: ev.get_dynamic_dimension_embedding_variable("item", 6, 4), drop + "--dynamic_ev"),
                          (lambda: ev.StorageOption(storage_type="DRAM_SSDHASH"), "not provided.*drop storage_option")):
            with self.assertRaisesRegex(ev.EmbeddingVariableError, fix):
                make()

    def test_uninitialized_variable_says_so(self):
        with tf.Graph().as_default():
            variable = make_variable("emb", default_rows())
            model = Model(variable, None)
            with v1.Session() as session:
                self.assertIn(b"emb", list(session.run(v1.report_uninitialized_variables())))
                with self.assertRaisesRegex(tf.errors.FailedPreconditionError, "emb is not initialized"):
                    session.run(model.rows, {model.keys: [1]})

    def run_optimizer(self, make_optimizer, slot_names):
        """Trains over STEPS; the variable's and the named slots' rows of KEYS after each step."""
        defaults = default_rows()
        rng = np.random.RandomState(3)
        grads = [rng.uniform(-1, 1, (len(step), DIM)).astype(np.float32) for step in STEPS]
        history = []
        with tf.Graph().as_default():
            variable = make_variable("emb", defaults)
            optimizer = make_optimizer()
            model = Model(variable, optimizer)
            slots = {name: optimizer.get_slot(variable, name) for name in slot_names}
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                session.run(model.rows, {model.keys: KEYS})  # every key created
                for positions, grad in zip(STEPS, grads):
                    session.run(model.train, {model.keys: KEYS[positions], model.grad: grad})
                    state = {name: read_rows(session, slot, KEYS) for name, slot in slots.items()}
                    state["var"] = read_rows(session, variable, KEYS)
                    history.append(state)
        return initial_rows(defaults, KEYS), grads, history

    def test_gradient_descent_matches_numpy(self):
        start, grads, history = self.run_optimizer(lambda: v1.train.GradientDescentOptimizer(0.1), [])
        var = start
        for positions, grad, got in zip(STEPS, grads, history):
            summed = np.zeros_like(var)
            np.add.at(summed, positions, grad)
            var = var - summed * np.float32(0.1)
            np.testing.assert_allclose(got["var"], var, rtol=1e-6, atol=1e-7)

    def test_adagrad_matches_numpy(self):
        start, grads, history = self.run_optimizer(lambda: v1.train.AdagradOptimizer(0.1), ["accumulator"])
        var, accum = start, np.full_like(start, 0.1)
        for positions, grad, got in zip(STEPS, grads, history):
            var, accum = adagrad_reference(var, accum, grad, np.array(positions), 0.1)
            np.testing.assert_allclose(got["var"], var, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(got["accumulator"], accum, rtol=1e-6)

    def test_adam_is_lazy_and_matches_numpy(self):
        start, grads, history = self.run_optimizer(lambda: v1.train.AdamOptimizer(0.05), ["m", "v"])
        var, m, v = start, np.zeros_like(start), np.zeros_like(start)
        power1, power2 = np.float32(0.9), np.float32(0.999)
        for positions, grad, got in zip(STEPS, grads, history):
            var, m, v = lazy_adam_reference(var, m, v, grad, np.array(positions), 0.05, 0.9, 0.999, 1e-8, power1, power2)
            power1, power2 = power1 * np.float32(0.9), power2 * np.float32(0.999)
            for name, want in (("var", var), ("m", m), ("v", v)):
                np.testing.assert_allclose(got[name], want, rtol=2e-6, atol=1e-7, err_msg=name)

    def test_adam_async_keeps_beta_powers_per_key(self):
        start, grads, history = self.run_optimizer(lambda: retf_train.AdamAsyncOptimizer(0.05),
                                                   ["m", "v", "beta1_power", "beta2_power"])
        var, m, v = start, np.zeros_like(start), np.zeros_like(start)
        power1, power2 = np.full(len(KEYS), 0.9, np.float32), np.full(len(KEYS), 0.999, np.float32)
        for positions, grad, got in zip(STEPS, grads, history):
            summed = {}
            for position, g in zip(positions, grad):
                summed[position] = summed[position] + g if position in summed else g.copy()
            for row, g in summed.items():
                lr = np.float32(0.05) * np.sqrt(np.float32(1) - power2[row]) / (np.float32(1) - power1[row])
                m[row] = m[row] * np.float32(0.9) + g * np.float32(1 - np.float32(0.9))
                v[row] = v[row] * np.float32(0.999) + (g * g) * (np.float32(1) - np.float32(0.999))
                var[row] = var[row] - (m[row] * lr) / (np.sqrt(v[row]) + np.float32(1e-8))
                power1[row] *= np.float32(0.9)
                power2[row] *= np.float32(0.999)
            for name, want in (("var", var), ("m", m), ("v", v), ("beta1_power", power1.reshape(-1, 1)),
                               ("beta2_power", power2.reshape(-1, 1))):
                np.testing.assert_allclose(got[name], want, rtol=2e-6, atol=1e-7, err_msg=name)

    def test_adagrad_decay_matches_numpy(self):
        start, grads, history = self.run_optimizer(
            lambda: retf_train.AdagradDecayOptimizer(0.1, v1.train.get_or_create_global_step(),
                                                     accumulator_decay_step=2, accumulator_decay_rate=0.5),
            ["accumulator", "accumulator_decay_power"])
        var, accum, counts = start, np.full_like(start, 0.1), np.zeros(len(KEYS))
        for step, (positions, grad, got) in enumerate(zip(STEPS, grads, history)):
            var, accum, counts = adagrad_decay_reference(var, accum, counts, grad, np.array(positions), 0.1, 2, 0.5,
                                                         0.1, step + 1)
            np.testing.assert_allclose(got["var"], var, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(got["accumulator"], accum, rtol=1e-6)
            np.testing.assert_array_equal(got["accumulator_decay_power"].ravel(), counts)

    def test_ftrl_matches_numpy(self):
        start, grads, history = self.run_optimizer(
            lambda: v1.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01, l2_regularization_strength=0.02),
            ["accum", "linear"])
        var, accum, linear = start, np.full_like(start, 0.1), np.zeros_like(start)
        for positions, grad, got in zip(STEPS, grads, history):
            var, accum, linear = ftrl_reference(var, accum, linear, grad, np.array(positions), np.float32(0.2),
                                                np.float32(0.01), np.float32(0.02), np.float32(-0.5))
            np.testing.assert_allclose(got["var"], var, rtol=2e-6, atol=1e-7)
            np.testing.assert_allclose(got["linear"], linear, rtol=2e-6, atol=1e-7)

    def test_unsupported_optimizer_names_the_supported_ones(self):
        with tf.Graph().as_default():
            variable = make_variable("emb", default_rows())
            with self.assertRaisesRegex(ev.EmbeddingVariableError, "MomentumOptimizer cannot update "
                                                                   "EmbeddingVariable emb.*GradientDescentOptimizer"):
                Model(variable, v1.train.MomentumOptimizer(0.1, 0.9))

    def test_counter_filter_admits_at_the_nth_sighting(self):
        defaults = default_rows()
        no_permission = 0.25
        options = option(filter_option=ev.CounterFilter(filter_freq=3),
                         init=ev.InitializerOption(default_value_dim=DEFAULT_ROWS,
                                                   default_value_no_permission=no_permission))
        with tf.Graph().as_default():
            variable = make_variable("emb", defaults, options)
            model = Model(variable, v1.train.GradientDescentOptimizer(1.0))
            saver = v1.train.Saver()
            ones = np.ones((1, DIM), np.float32)
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                for _ in range(2):  # sightings 1 and 2, not admitted: reads the no-permission value, the update is dropped
                    rows, _ = session.run([model.rows, model.train], {model.keys: [11], model.grad: ones})
                    np.testing.assert_array_equal(rows, np.full((1, DIM), no_permission, np.float32))
                rows = session.run(model.rows, {model.keys: [11]})  # the third: admitted, the initializer's row
                np.testing.assert_array_equal(rows, initial_rows(defaults, np.array([11])))
                session.run(model.rows, {model.keys: [12, 12]})  # two sightings of another key, saved as filtered
                path = saver.save(session, os.path.join(self.folder, "model"))
            reader = v1.train.load_checkpoint(path)
            np.testing.assert_array_equal(reader.get_tensor("emb-keys"), [11])
            np.testing.assert_array_equal(reader.get_tensor("emb-keys_filtered"), [12])
            np.testing.assert_array_equal(reader.get_tensor("emb-freqs_filtered"), [2])
            with v1.Session() as session:
                saver.restore(session, path)  # the count carries over: one more sighting admits key 12
                rows = session.run(model.rows, {model.keys: [12]})
                np.testing.assert_array_equal(rows, initial_rows(defaults, np.array([12])))

    def test_global_step_evict_drops_keys_not_updated_recently(self):
        options = option(evict_option=ev.GlobalStepEvict(steps_to_live=2))
        with tf.Graph().as_default():
            variable = make_variable("emb", default_rows(), options)
            model = Model(variable, v1.train.GradientDescentOptimizer(0.1))
            saver = v1.train.Saver()
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                session.run(model.rows, {model.keys: [9]})  # looked up, never updated: stamped at save, kept
                for keys in ([1, 2], [2], [3], [3]):  # updated at global steps 0, 1, 2, 3
                    session.run(model.train, {model.keys: keys, model.grad: np.ones((len(keys), DIM), np.float32)})
                path = saver.save(session, os.path.join(self.folder, "model"))  # at step 4: 1 and 2 are gone
                np.testing.assert_array_equal(v1.train.load_checkpoint(path).get_tensor("emb-keys"), [3, 9])
                np.testing.assert_array_equal(v1.train.load_checkpoint(path).get_tensor("emb-versions"), [3, 4])

    def test_l2_weight_evict_drops_small_rows(self):
        defaults = np.array([[0.1] * DIM, [1.0] * DIM], np.float32)  # half sums of squares 0.02 and 2.0
        options = option(evict_option=ev.L2WeightEvict(l2_weight_threshold=1.0),
                         init=ev.InitializerOption(default_value_dim=2))
        with tf.Graph().as_default():
            variable = ev.get_embedding_variable("emb", DIM, initializer=lambda shape, dtype=None: tf.constant(defaults),
                                                 ev_option=options)
            model = Model(variable, None)
            saver = v1.train.Saver()
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                session.run(model.rows, {model.keys: [4, 5, 6, 7]})
                path = saver.save(session, os.path.join(self.folder, "model"))
                np.testing.assert_array_equal(v1.train.load_checkpoint(path).get_tensor("emb-keys"), [5, 7])
                np.testing.assert_array_equal(session.run(model.rows, {model.keys: [4]}), defaults[:1])

    def test_checkpoint_restores_into_other_partitions_with_slots(self):
        defaults = default_rows()
        keys = np.arange(-30, 2000, 37, dtype=np.int64)
        rng = np.random.RandomState(5)
        grad = rng.uniform(-1, 1, (len(keys), DIM)).astype(np.float32)
        path = os.path.join(self.folder, "model")
        saved = {}
        for parts in (3, 2, 1):
            with tf.Graph().as_default():
                partitioner = v1.fixed_size_partitioner(parts) if parts > 1 else None
                variable = make_variable("emb", defaults, partitioner=partitioner)
                optimizer = v1.train.AdamOptimizer(0.1)
                model = Model(variable, optimizer)
                m = [optimizer.get_slot(part, "m") for part in (variable if parts > 1 else [variable])]
                saver = v1.train.Saver()
                with v1.Session() as session:
                    if parts == 3:
                        session.run(v1.global_variables_initializer())
                        session.run(model.train, {model.keys: keys, model.grad: grad})
                        saver.save(session, path)
                        names = [name for name, _ in v1.train.list_variables(path)]
                        self.assertIn("emb/part_2-keys", names)
                        self.assertIn("emb/part_0/Adam-values", names)
                        for key in keys:  # each key lives in part (key mod 1000) mod 3
                            part = int(np.mod(np.mod(key, 1000), 3))
                            self.assertIn(key, v1.train.load_checkpoint(path).get_tensor("emb/part_%d-keys" % part))
                    else:
                        saver.restore(session, path)
                    state = {"var": read_rows(session, variable, keys),
                             "m": read_rows(session, m if parts > 1 else m[0], keys)}
            for name, value in state.items():
                if parts == 3:
                    saved[name] = value
                    if name == "var":  # trained: the restores below must carry more than the initializer's rows
                        self.assertFalse(np.array_equal(value, initial_rows(defaults, keys)))
                else:
                    np.testing.assert_array_equal(value, saved[name], err_msg="%s into %d parts" % (name, parts))

    def test_restores_deeprec_checkpoint_layout(self):
        """A checkpoint as DeepRec writes it: two parts, int64 keys, empty freqs and versions (nothing recorded
        them), a filtered key, partition offsets."""
        path = os.path.join(self.folder, "deeprec")
        rows = {0: np.array([[1, 2, 3, 4]], np.float32), 1: np.array([[5, 6, 7, 8], [9, 10, 11, 12]], np.float32)}
        keys = {0: np.array([1000], np.int64), 1: np.array([1, 2001], np.int64)}
        with tf.Graph().as_default():
            names, tensors = [], []
            for part in (0, 1):
                prefix = "model/emb/part_%d" % part
                for suffix, value in (("-keys", keys[part]), ("-values", rows[part]),
                                      ("-freqs", np.zeros([0], np.int64)), ("-versions", np.zeros([0], np.int64)),
                                      ("-keys_filtered", np.array([7] if part else [], np.int64)),
                                      ("-freqs_filtered", np.array([2] if part else [], np.int64)),
                                      ("-versions_filtered", np.zeros([0], np.int64)),
                                      ("-partition_offset", np.zeros([1001], np.int32)),
                                      ("-partition_filter_offset", np.zeros([1001], np.int32))):
                    names.append(prefix + suffix)
                    tensors.append(tf.constant(value))
            save = tf.raw_ops.SaveV2(prefix=path, tensor_names=names, shape_and_slices=[""] * len(names),
                                     tensors=tensors)
            with v1.Session() as session:
                session.run(save)
        options = option(filter_option=ev.CounterFilter(filter_freq=3))
        with tf.Graph().as_default():
            with v1.variable_scope("model"):
                variable = make_variable("emb", default_rows(), options)
            model = Model(variable, None)
            saver = v1.train.Saver([variable])
            with v1.Session() as session:
                saver.restore(session, path)
                got = session.run(model.rows, {model.keys: [1000, 1, 2001]})
                np.testing.assert_array_equal(got, np.concatenate([rows[0], rows[1]]))
                # key 7 was seen twice: this third sighting admits it (without the count it would read zeros)
                np.testing.assert_array_equal(session.run(model.rows, {model.keys: [7]}),
                                              initial_rows(default_rows(), np.array([7])))

    def test_concurrent_steps_keep_every_key(self):
        with tf.Graph().as_default():
            variable = make_variable("emb", default_rows())
            model = Model(variable, v1.train.AdagradOptimizer(0.01))
            export = ev_export_keys(variable)
            config = v1.ConfigProto(inter_op_parallelism_threads=4, intra_op_parallelism_threads=2)
            seen = set()
            with v1.Session(config=config) as session:
                session.run(v1.global_variables_initializer())

                def work(seed):
                    rng = np.random.RandomState(seed)
                    for _ in range(40):
                        keys = rng.randint(0, 5000, 64).astype(np.int64)
                        seen.update(keys.tolist())
                        session.run(model.train, {model.keys: keys, model.grad: np.ones((64, DIM), np.float32)})

                threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                self.assertEqual(sorted(seen), sorted(session.run(export).tolist()))

    def test_feature_column_trains_string_ids(self):
        with tf.Graph().as_default():
            column = ev.categorical_column_with_embedding("item", dtype=tf.string, ev_option=option())
            embedded = ev.embedding_column_for(v1.feature_column.embedding_column)(column, DIM)
            features = {"item": tf.SparseTensor([[0, 0], [1, 0], [1, 1]], ["a", "b", "a"], [2, 2])}
            dense = v1.feature_column.input_layer(features, [embedded])
            loss = tf.reduce_sum(tf.square(dense - 1.0))
            step = v1.train.get_or_create_global_step()
            train = v1.train.AdagradOptimizer(0.5).minimize(loss, global_step=step)
            weights = [v for v in v1.global_variables() if isinstance(v, ev.EmbeddingVariable)]
            self.assertEqual(["input_layer/item_embedding/embedding_weights",
                              "input_layer/item_embedding/embedding_weights/Adagrad"], [w.op.name for w in weights])
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                first = session.run(loss)
                for _ in range(20):
                    session.run(train)
                self.assertLess(session.run(loss), first / 10)
                keys = session.run(ev_export_keys(weights[0]))
                expected = session.run(tf.strings.to_hash_bucket_fast(["a", "b"], 2 ** 63 - 1))
                self.assertEqual(sorted(expected.tolist()), sorted(keys.tolist()))


class StagedTest(unittest.TestCase):
    """tf.staged (retf.prefetch): the same values, SparseTensors included, computed ahead; the end of the input
    ends the steps."""

    def dataset(self):
        items = tf.data.Dataset.range(10)
        return items.map(lambda i: {"dense": tf.fill([2], i), "ids": tf.SparseTensor([[0, 0], [1, 1]], [i, i + 1],
                                                                                     [2, 2])})

    def test_stage_in_a_monitored_session_with_the_hook(self):
        from retf import prefetch
        with tf.Graph().as_default():
            features = v1.data.make_one_shot_iterator(self.dataset()).get_next()
            staged = prefetch.staged(features, capacity=4, num_threads=1)
            self.assertIsInstance(staged["ids"], tf.SparseTensor)
            self.assertEqual([2], staged["dense"].shape.as_list())
            total = tf.reduce_sum(staged["dense"]) + tf.reduce_sum(tf.sparse.to_dense(staged["ids"]))
            got = []
            with v1.train.MonitoredTrainingSession(hooks=[prefetch.make_prefetch_hook()]) as session:
                while not session.should_stop():
                    got.append(session.run(total))
            self.assertEqual([4 * i + 1 for i in range(10)], got)

    def test_stage_in_a_plain_session_with_queue_runners(self):
        from retf import prefetch
        with tf.Graph().as_default():
            features = v1.data.make_one_shot_iterator(self.dataset()).get_next()
            staged = prefetch.staged(features["dense"], num_threads=3)
            got = []
            with v1.Session() as session:
                coord = v1.train.Coordinator()
                threads = v1.train.start_queue_runners(session, coord)
                try:
                    while True:
                        got.append(int(session.run(staged)[0]))
                except tf.errors.OutOfRangeError:
                    pass
                coord.request_stop()
                coord.join(threads)
            self.assertEqual(list(range(10)), sorted(got))


class IncrementalCheckpointTest(unittest.TestCase):
    """DeepRec's incremental-checkpoint arguments (retf.incremental_checkpoints): a checkpoint at least every
    save_incremental_checkpoint_secs, besides the session's own schedule, each a full one."""

    def saved_steps(self, **incremental):
        from retf import incremental_checkpoints
        sessions, _ = incremental_checkpoints.install()
        folder = tempfile.mkdtemp()
        try:
            with tf.Graph().as_default():
                step = v1.train.get_or_create_global_step()
                increment = v1.assign_add(step, 1)
                saver = v1.train.Saver(max_to_keep=10, incremental_save_restore=True)
                scaffold = v1.train.Scaffold(saver=saver, incremental_save_restore=True)
                with sessions(checkpoint_dir=folder, scaffold=scaffold, save_checkpoint_steps=1000,
                              save_summaries_steps=None, log_step_count_steps=None, **incremental) as session:
                    for _ in range(3):
                        time.sleep(1.2)
                        session.run(increment)
            state = v1.train.get_checkpoint_state(folder)
            return [int(path.rsplit("-", 1)[1]) for path in state.all_model_checkpoint_paths]
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def test_a_checkpoint_every_interval_besides_the_full_schedule(self):
        self.assertEqual([0, 3], self.saved_steps())  # every 1000 steps: the first and the last
        self.assertEqual([0, 1, 2, 3], self.saved_steps(save_incremental_checkpoint_secs=1))


def ev_export_keys(variable):
    from retf.ops import embedding_variable as ev_ops
    return ev_ops.ev_export(variable.handle)[0]


if __name__ == "__main__":
    unittest.main()
