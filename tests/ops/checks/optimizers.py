"""retf.train's and retf.keras's optimizers training against TensorFlow's and plain-TF references."""

import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import FLOATS, random_sparse_batch, sparse
from .sparse_apply_adagrad_ftrl import FUSED_INDEX_STEPS, adagrad_decay_reference, adam_async_reference, summed_rows


def synthetic_data(seed, examples=256, vocab=60, max_per_row=4):
    rng = np.random.RandomState(seed)
    indices, ids, weights = random_sparse_batch(rng, examples, vocab, max_per_row, empty_rows=False)
    hidden = rng.normal(size=vocab)
    score = np.zeros(examples)
    np.add.at(score, indices[:, 0], hidden[ids])
    labels = (score + rng.normal(scale=0.5, size=examples) > 0).astype(np.float32).reshape(-1, 1)
    return indices, ids, weights.astype(np.float32), labels


class CompositeLazyAdamOptimizer(tf.compat.v1.train.AdamOptimizer):
    """The reference: AdamOptimizer for dense, tfa's gather/compute/scatter lazy Adam in plain TF for sparse."""

    def _resource_apply_sparse(self, grad, var, indices):
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = (tf.cast(p, dtype) for p in self._get_beta_accumulators())
        lr, beta1, beta2, epsilon = (tf.cast(t, dtype) for t in (self._lr_t, self._beta1_t, self._beta2_t,
                                                                 self._epsilon_t))
        lr = lr * (tf.sqrt(1 - beta2_power) / (1 - beta1_power))
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_t = beta1 * tf.gather(m, indices) + (1 - beta1) * grad
        v_t = beta2 * tf.gather(v, indices) + (1 - beta2) * tf.square(grad)
        with tf.control_dependencies([m.scatter_update(tf.IndexedSlices(m_t, indices)),
                                      v.scatter_update(tf.IndexedSlices(v_t, indices))]):
            return var.scatter_sub(tf.IndexedSlices(lr * m_t / (tf.sqrt(v_t) + epsilon), indices))


class CompositeLazyAdam(tf.keras.optimizers.Adam):
    """Keras reference: Keras Adam for dense, the same composite for sparse (as tfa.optimizers.LazyAdam)."""

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        k = self._fallback_apply_state(var.device, var.dtype.base_dtype)
        lr = k["lr_t"] * (tf.sqrt(1 - k["beta_2_power"]) / (1 - k["beta_1_power"]))
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_t = k["beta_1_t"] * tf.gather(m, indices) + (1 - k["beta_1_t"]) * grad
        v_t = k["beta_2_t"] * tf.gather(v, indices) + (1 - k["beta_2_t"]) * tf.square(grad)
        with tf.control_dependencies([m.scatter_update(tf.IndexedSlices(m_t, indices)),
                                      v.scatter_update(tf.IndexedSlices(v_t, indices))]):
            return var.scatter_sub(tf.IndexedSlices(lr * m_t / (tf.sqrt(v_t) + k["epsilon"]), indices))


# Final losses of optimizer and reference, 40 steps of float32 training, agree to this.
LOSS_RTOL = 1e-5


def train_logistic_model(make_optimizer, use_resource, lookup=retf.nn.embedding_lookup_sparse, steps=40):
    """An embedding + logistic model trained by make_optimizer() in graph mode: (its loss before each step and
    after the last, its variables after)."""
    indices, ids, weights, labels = synthetic_data(seed=6)
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(7)
        init = np.random.RandomState(8)
        table = tf.compat.v1.Variable(init.normal(scale=0.1, size=(60, 8)).astype(np.float32),
                                      use_resource=use_resource)
        dense = tf.compat.v1.Variable(init.normal(scale=0.1, size=(8, 1)).astype(np.float32),
                                      use_resource=use_resource)
        bias = tf.compat.v1.Variable(np.zeros(1, np.float32), use_resource=use_resource)
        features = lookup(table, sparse(indices, ids, 256, 4), sparse(indices, weights, 256, 4),
                          combiner="mean")
        logits = tf.matmul(features, dense) + bias
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        train = make_optimizer().minimize(loss)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            losses = [session.run([loss, train])[0] for _ in range(steps)]
            losses.append(session.run(loss))
            return losses, session.run([table, dense, bias])


class V1OptimizerTest(unittest.TestCase):
    def test_trains_like_adam_plus_composite_lazy_adam(self):
        for use_resource in (True, False):
            with self.subTest(use_resource=use_resource):
                ours, ours_vars = train_logistic_model(lambda: retf.train.LazyAdamOptimizer(0.05), use_resource)
                reference, reference_vars = train_logistic_model(lambda: CompositeLazyAdamOptimizer(0.05), use_resource)
                self.assertLess(ours[-1], 0.8 * ours[0])  # it learns
                np.testing.assert_allclose(ours, reference, rtol=LOSS_RTOL)
                for a, b in zip(ours_vars, reference_vars):
                    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    def test_dense_updates_are_adams_bitwise(self):
        rng = np.random.RandomState(15)
        x = rng.normal(size=(64, 5)).astype(np.float32)
        y = (x[:, :1] > 0).astype(np.float32)
        results = []
        for make_optimizer in (tf.compat.v1.train.AdamOptimizer, retf.train.LazyAdamOptimizer):
            with tf.Graph().as_default():
                weights = tf.compat.v1.Variable(np.full((5, 1), 0.1, np.float32))
                loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=tf.matmul(x, weights)))
                train = make_optimizer(0.05).minimize(loss)
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    for _ in range(10):
                        session.run(train)
                    results.append(session.run(weights))
        np.testing.assert_array_equal(results[0], results[1])

    def test_slots_and_accumulators_are_adams(self):
        with tf.Graph().as_default():
            var = tf.compat.v1.Variable(tf.zeros([3, 2]))
            optimizer = retf.train.LazyAdamOptimizer()
            optimizer.minimize(tf.reduce_sum(tf.gather(var, [0, 2])))
            self.assertEqual(sorted(optimizer.get_slot_names()), ["m", "v"])
            self.assertEqual(len(optimizer._get_beta_accumulators()), 2)


class FusedV1OptimizersTest(unittest.TestCase):
    """retf.train's Adagrad and FTRL against tf.compat.v1.train's own, on the embedding + logistic model."""

    CASES = {
        "adagrad": (lambda: retf.train.AdagradOptimizer(1.0), lambda: tf.compat.v1.train.AdagradOptimizer(1.0)),
        "ftrl": (lambda: retf.train.FtrlOptimizer(1.0, l1_regularization_strength=1e-4,
                                                  l2_regularization_strength=1e-3),
                 lambda: tf.compat.v1.train.FtrlOptimizer(1.0, l1_regularization_strength=1e-4,
                                                          l2_regularization_strength=1e-3)),
        "ftrl_shrinkage": (lambda: retf.train.FtrlOptimizer(1.0, l2_shrinkage_regularization_strength=1e-3),
                           lambda: tf.compat.v1.train.FtrlOptimizer(1.0, l2_shrinkage_regularization_strength=1e-3)),
    }

    def test_trains_like_tensorflows_optimizers(self):
        lookup = tf.compat.v1.nn.embedding_lookup_sparse  # gathers: gradients with duplicate indices
        for name, (ours_factory, stock_factory) in sorted(self.CASES.items()):
            for use_resource in (True, False):
                with self.subTest(optimizer=name, use_resource=use_resource):
                    ours, ours_vars = train_logistic_model(ours_factory, use_resource, lookup)
                    stock, stock_vars = train_logistic_model(stock_factory, use_resource, lookup)
                    self.assertLess(ours[-1], 0.9 * ours[0])  # it learns
                    np.testing.assert_allclose(ours, stock, rtol=LOSS_RTOL)
                    for a, b in zip(ours_vars, stock_vars):
                        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    def test_slots_and_names_are_tensorflows(self):
        for ours, stock in (self.CASES["adagrad"], self.CASES["ftrl"]):
            names = []
            for factory in (ours, stock):
                with tf.Graph().as_default():
                    var = tf.compat.v1.Variable(tf.zeros([3, 2]), name="table")
                    factory().minimize(tf.reduce_sum(tf.gather(var, [0, 2, 0])))
                    names.append(sorted(v.op.name for v in tf.compat.v1.global_variables()))
            self.assertEqual(names[0], names[1])

    def test_float16_takes_the_base_class_path(self):
        results = []
        for factory in (tf.compat.v1.train.AdagradOptimizer, retf.train.AdagradOptimizer):
            with tf.Graph().as_default():
                table = tf.compat.v1.Variable(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float16))
                train = factory(0.1).minimize(tf.reduce_sum(tf.gather(table, [0, 2, 0]) * np.float16(0.5)))
                with tf.compat.v1.Session() as session:
                    session.run(tf.compat.v1.global_variables_initializer())
                    for _ in range(3):
                        session.run(train)
                    results.append(session.run(table))
        np.testing.assert_array_equal(results[0], results[1])


def run_v1_steps(make_optimizer, values, grads, use_resource, dense=False):
    """Applies make_optimizer(global_step) to one variable over the gradients (indices, values) or dense
    gradients; returns the variable and every slot after each step, by slot name."""
    with tf.Graph().as_default():
        var = tf.compat.v1.Variable(values, use_resource=use_resource, name="table")
        step = tf.compat.v1.train.get_or_create_global_step()
        optimizer = make_optimizer(step)
        indices_ph = tf.compat.v1.placeholder(tf.int64, [None])
        grad_ph = tf.compat.v1.placeholder(values.dtype, [None] + list(values.shape[1:]) if not dense else values.shape)
        grad = grad_ph if dense else tf.IndexedSlices(grad_ph, indices_ph, tf.constant(values.shape, tf.int64))
        train = optimizer.apply_gradients([(grad, var)], global_step=step)
        slots = {name: optimizer.get_slot(var, name) for name in optimizer.get_slot_names()}
        history = []
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for indices, values_ in grads:
                feed = {grad_ph: values_} if dense else {grad_ph: values_, indices_ph: indices}
                session.run(train, feed)
                history.append(session.run(dict(slots, var=var)))
    return history


def f32(x):
    """A Python float hyperparameter as the optimizers see it: a float32 tensor, cast to the variable's dtype."""
    return float(np.float32(x))


class DeepRecOptimizersTest(unittest.TestCase):
    """retf.train.AdamAsyncOptimizer and AdagradDecayOptimizer (DeepRec's semantics) against NumPy."""

    def gradients(self, rng, dtype, shape, steps):
        out = []
        for step in range(steps):
            indices = np.asarray(FUSED_INDEX_STEPS[step % len(FUSED_INDEX_STEPS)], np.int64)
            out.append((indices, rng.uniform(-1, 1, (len(indices),) + shape[1:]).astype(dtype)))
        return out

    def test_adam_async_sparse_matches_numpy(self):
        for dtype in FLOATS:
            for use_resource in (True, False):
                with self.subTest(dtype=dtype.__name__, use_resource=use_resource):
                    rng = np.random.RandomState(21)
                    start = rng.uniform(-1, 1, (10, 3)).astype(dtype)
                    grads = self.gradients(rng, dtype, start.shape, 5)
                    history = run_v1_steps(lambda step: retf.train.AdamAsyncOptimizer(0.02), start, grads,
                                           use_resource)
                    var, m, v = start, np.zeros_like(start), np.zeros_like(start)
                    power1, power2 = dtype(0.9), dtype(0.999)  # the slots start at beta in the variable's dtype
                    for (indices, grad), got in zip(grads, history):
                        var, m, v = adam_async_reference(var, m, v, grad, indices, f32(0.02), f32(0.9), f32(0.999),
                                                         f32(1e-8), power1, power2)
                        power1, power2 = power1 * dtype(f32(0.9)), power2 * dtype(f32(0.999))
                        for name, want in (("var", var), ("m", m), ("v", v), ("beta1_power", power1),
                                           ("beta2_power", power2)):
                            np.testing.assert_array_equal(got[name], want, err_msg=name)

    def test_adam_async_dense_matches_numpy(self):
        rng = np.random.RandomState(22)
        start = rng.uniform(-1, 1, (4, 3)).astype(np.float64)
        grads = [(None, rng.uniform(-1, 1, start.shape)) for _ in range(4)]
        history = run_v1_steps(lambda step: retf.train.AdamAsyncOptimizer(0.02), start, grads, True, dense=True)
        var, m, v, power1, power2 = start, np.zeros_like(start), np.zeros_like(start), 0.9, 0.999
        for (_, grad), got in zip(grads, history):
            var, m, v = adam_async_reference(var, m, v, grad, np.arange(4), f32(0.02), f32(0.9), f32(0.999), f32(1e-8),
                                             power1, power2)
            power1, power2 = power1 * f32(0.9), power2 * f32(0.999)
            for name, want in (("var", var), ("m", m), ("v", v), ("beta1_power", power1)):
                np.testing.assert_allclose(got[name], want, rtol=1e-13, err_msg=name)

    def test_adam_async_powers_are_per_variable(self):
        with tf.Graph().as_default():
            a, b = tf.compat.v1.Variable(tf.zeros([3, 2]), name="a"), tf.compat.v1.Variable(tf.zeros([2]), name="b")
            retf.train.AdamAsyncOptimizer().minimize(tf.reduce_sum(tf.gather(a, [0, 2])) + tf.reduce_sum(b))
            names = sorted(v.op.name for v in tf.compat.v1.global_variables())
        self.assertEqual(names, ["a", "a/AdamAsync", "a/AdamAsync_1", "a/AdamAsync_2", "a/AdamAsync_3", "b",
                                 "b/AdamAsync", "b/AdamAsync_1", "b/AdamAsync_2", "b/AdamAsync_3"])

    def test_adam_async_sparse_rmsprop_matches_numpy(self):
        rng = np.random.RandomState(25)
        start = rng.uniform(-1, 1, (10, 3)).astype(np.float64)
        grads = self.gradients(rng, np.float64, start.shape, 5)
        for use_resource in (True, False):
            history = run_v1_steps(lambda step: retf.train.AdamAsyncOptimizer(0.02, apply_sparse_rmsprop=True), start,
                                   grads, use_resource)
            var, m, v = start, np.zeros_like(start), np.zeros_like(start)
            lr, beta1, beta2, epsilon = f32(0.02), f32(0.9), f32(0.999), f32(1e-8)
            for (indices, grad), got in zip(grads, history):
                for row, g in summed_rows(grad, indices).items():
                    v[row] = v[row] * beta2 + g * g * (1 - beta2)
                    m[row] = m[row] * beta1 + (1 / np.sqrt(v[row] + epsilon)) * lr * g
                    var[row] = var[row] - m[row]
                for name, want in (("var", var), ("m", m), ("v", v)):
                    np.testing.assert_allclose(got[name], want, rtol=1e-12, err_msg=name)
                self.assertEqual(got["beta1_power"], 0.9)  # this rule leaves the powers alone

    def test_adagrad_decay_sparse_matches_numpy(self):
        for dtype in FLOATS:
            for use_resource in (True, False):
                with self.subTest(dtype=dtype.__name__, use_resource=use_resource):
                    rng = np.random.RandomState(23)
                    start = rng.uniform(-1, 1, (10, 3)).astype(dtype)
                    grads = self.gradients(rng, dtype, start.shape, 7)
                    make = lambda step: retf.train.AdagradDecayOptimizer(  # noqa: E731
                        0.1, step, initial_accumulator_value=0.2, accumulator_decay_step=2, accumulator_decay_rate=0.5)
                    history = run_v1_steps(make, start, grads, use_resource)
                    var, accum, counts = start, np.full_like(start, dtype(0.2)), np.zeros(10, np.int64)
                    for step, ((indices, grad), got) in enumerate(zip(grads, history), 1):
                        var, accum, counts = adagrad_decay_reference(var, accum, counts, grad, indices, f32(0.1), 2,
                                                                     f32(0.5), f32(0.2), step)
                        np.testing.assert_array_equal(got["var"], var)
                        np.testing.assert_array_equal(got["accumulator"], accum)
                        np.testing.assert_array_equal(got["accumulator_decay_power"], counts)
                    self.assertGreater(counts.max(), 1)  # rows decayed, more than once

    def test_adagrad_decay_dense_matches_numpy(self):
        rng = np.random.RandomState(24)
        start = rng.uniform(-1, 1, (4, 3)).astype(np.float64)
        grads = [(None, rng.uniform(-1, 1, start.shape)) for _ in range(5)]
        make = lambda step: retf.train.AdagradDecayOptimizer(  # noqa: E731
            0.1, step, initial_accumulator_value=0.2, accumulator_decay_step=2, accumulator_decay_rate=0.5)
        history = run_v1_steps(make, start, grads, True, dense=True)
        var, accum, count = start, np.full_like(start, 0.2), 0
        for step, ((_, grad), got) in enumerate(zip(grads, history), 1):
            if step // 2 > count:
                accum, count = np.maximum(accum * f32(0.5), f32(0.2)), count + 1
            accum = accum + grad * grad
            var = var - grad * f32(0.1) * (1 / np.sqrt(accum))
            np.testing.assert_allclose(got["var"], var, rtol=1e-13)
            np.testing.assert_allclose(got["accumulator"], accum, rtol=1e-13)
            self.assertEqual(got["accumulator_decay_power"][0], count)


class KerasOptimizerTest(unittest.TestCase):
    def train(self, optimizer, steps=40):
        indices, ids, _, labels = synthetic_data(seed=9)
        dense_ids = np.zeros((256, 4), np.int64)
        dense_ids[indices[:, 0], indices[:, 1]] = ids
        mask = np.zeros((256, 4, 1), np.float32)
        mask[indices[:, 0], indices[:, 1]] = 1
        tf.random.set_seed(10)
        embedding = tf.keras.layers.Embedding(60, 8, embeddings_initializer=tf.keras.initializers.RandomNormal(
            stddev=0.1, seed=11))
        head = tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=12))

        def loss_fn():
            features = tf.reduce_sum(embedding(dense_ids) * mask, axis=1) / tf.reduce_sum(mask, axis=1)
            logits = head(features)
            return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = loss_fn()
            variables = embedding.trainable_variables + head.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        losses = [float(step()) for _ in range(steps)] + [float(loss_fn())]
        return losses, [v.numpy() for v in embedding.trainable_variables + head.trainable_variables]

    def test_trains_like_keras_adam_plus_composite_lazy_adam(self):
        ours, ours_vars = self.train(retf.keras.optimizers.LazyAdam(0.05))
        reference, reference_vars = self.train(CompositeLazyAdam(0.05))
        self.assertLess(ours[-1], 0.8 * ours[0])
        np.testing.assert_allclose(ours, reference, rtol=LOSS_RTOL)
        for a, b in zip(ours_vars, reference_vars):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    def test_dense_updates_are_keras_adams_bitwise(self):
        rng = np.random.RandomState(16)
        x = tf.constant(rng.normal(size=(64, 5)).astype(np.float32))
        y = tf.constant((rng.normal(size=(64, 1)) > 0).astype(np.float32))
        results = []
        for optimizer in (tf.keras.optimizers.Adam(0.05), retf.keras.optimizers.LazyAdam(0.05)):
            weights = tf.Variable(np.full((5, 1), 0.1, np.float32))
            for _ in range(10):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=x @ weights))
                optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
            results.append(weights.numpy())
        np.testing.assert_array_equal(results[0], results[1])

    def test_fit_and_config_round_trip(self):
        optimizer = retf.keras.optimizers.LazyAdam(0.01)
        clone = retf.keras.optimizers.LazyAdam.from_config(optimizer.get_config())
        self.assertEqual(clone.get_config(), optimizer.get_config())
        model = tf.keras.Sequential([tf.keras.layers.Embedding(30, 4, input_length=3), tf.keras.layers.Flatten(),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer=optimizer, loss="mse")
        x = np.random.RandomState(13).randint(0, 30, size=(64, 3))
        history = model.fit(x, np.ones((64, 1)), epochs=2, batch_size=16, verbose=0)
        self.assertLess(history.history["loss"][-1], history.history["loss"][0])
        with self.assertRaises(ValueError):
            retf.keras.optimizers.LazyAdam(amsgrad=True)
