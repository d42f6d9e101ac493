"""tf.compat.v1 optimizers with fused sparse updates."""

import os

import tensorflow as tf

from retf import embedding_variable, ops
from retf.ops import embedding_variable as ev_ops

# The variable dtypes the fused kernels are built for.
KERNEL_DTYPES = (tf.float32, tf.float64)


class _FusedSparse(object):
    """Mixin for a tf.compat.v1 optimizer: sparse gradients go, duplicates and all, to one fused kernel.

    The kernels sum duplicate indices themselves (in position order, as the base class's
    unsorted_segment_sum does), so the base class's dedup pass is skipped. Variables the kernels
    are not built for take the base class's own code.
    """

    def _fusable(self, var):
        """Whether var's sparse updates can go to the kernel; if not, the base class's own code does them."""
        return var.dtype.base_dtype in KERNEL_DTYPES

    def _fused_sparse_apply(self, grad, var, indices):
        raise NotImplementedError

    def _apply_sparse_duplicate_indices(self, grad, var):
        if not self._fusable(var):
            return super(_FusedSparse, self)._apply_sparse_duplicate_indices(grad, var)
        return self._fused_sparse_apply(grad.values, var, grad.indices)

    def _apply_sparse(self, grad, var):
        if not self._fusable(var):
            return super(_FusedSparse, self)._apply_sparse(grad, var)
        return self._fused_sparse_apply(grad.values, var, grad.indices)

    def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices):
        if not self._fusable(handle):
            return super(_FusedSparse, self)._resource_apply_sparse_duplicate_indices(grad, handle, indices)
        return self._fused_sparse_apply(grad, handle, indices)

    def _resource_apply_sparse(self, grad, var, indices):
        if not self._fusable(var):
            return super(_FusedSparse, self)._resource_apply_sparse(grad, var, indices)
        return self._fused_sparse_apply(grad, var, indices)


class _FusedSparseAdam(_FusedSparse, tf.compat.v1.train.AdamOptimizer):
    """AdamOptimizer whose sparse gradients go, duplicates and all, to one fused kernel."""

    _kernel = None  # a function with the signature of retf.ops.sparse_apply_adam

    def _fused_sparse_apply(self, grad, var, indices):
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = self._get_beta_accumulators()
        return self._kernel(
            var, self.get_slot(var, "m"), self.get_slot(var, "v"),
            tf.cast(beta1_power, dtype), tf.cast(beta2_power, dtype), tf.cast(self._lr_t, dtype),
            tf.cast(self._beta1_t, dtype), tf.cast(self._beta2_t, dtype), tf.cast(self._epsilon_t, dtype),
            grad, indices, use_locking=self._use_locking)


class AdamOptimizer(_FusedSparseAdam):
    """tf.compat.v1.train.AdamOptimizer, same results, with sparse gradients applied in one pass.

    For an IndexedSlices gradient AdamOptimizer decays m and v over the whole variable and moves
    every row of it, as a dozen elementwise ops, each with a variable-sized temporary. This class
    computes the same thing (duplicate indices summed in the same order, the same roundings) in one
    fused pass over var, m and v. Dense gradients, slots, accumulators and names are
    AdamOptimizer's own, so checkpoints interchange; variables of other dtypes than float32 and
    float64 (float16) take AdamOptimizer's own sparse path.

    With RETF_SPLIT_DENSE_ADAM=1, in a graph, the pass is split in two: the rows the gradient does not
    name only decay, so their half (retf.ops.adam_decay_untouched) runs as soon as the gradient's
    indices are known and every op of the step that reads the variable has run, beside the rest of the
    step on one thread; the named rows follow with the gradient (retf.ops.sparse_apply_adam_async). Same
    values, bit for bit. Where the split cannot be ordered so (eager execution, a loop or cond around the
    update or a read) the one-pass kernel runs.
    """

    _kernel = staticmethod(ops.sparse_apply_adam_dense)

    def _fused_sparse_apply(self, grad, var, indices):
        readers = _readers_before_update(var, grad, indices) if split_dense_adam() else None
        if readers is None:
            return super(AdamOptimizer, self)._fused_sparse_apply(grad, var, indices)
        # The rows the gradient does not name only decay: that half of the pass starts once the indices
        # are known and every op of this step that reads var has run, beside the rest of the step; the
        # named rows follow with the gradient. Same values as the one-pass kernel, bit for bit.
        dtype = var.dtype.base_dtype
        beta1_power, beta2_power = self._get_beta_accumulators()
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        coefficients = [tf.cast(value, dtype) for value in (beta1_power, beta2_power, self._lr_t, self._beta1_t,
                                                             self._beta2_t, self._epsilon_t)]
        with tf.control_dependencies(readers):
            decayed = ops.adam_decay_untouched(var, m, v, *coefficients, indices, use_locking=self._use_locking)
        with tf.control_dependencies([decayed]):
            return ops.sparse_apply_adam_async(var, m, v, *coefficients, grad, indices, use_locking=self._use_locking)


def split_dense_adam():
    """Whether AdamOptimizer splits a sparse update into the untouched rows' decay, run early, and the named
    rows' update: RETF_SPLIT_DENSE_ADAM=1, read when the update is built. Off by default: it helped DIEN
    and cost DIN (bench/MODELS.md, "RETF_SPLIT_DENSE_ADAM")."""
    chosen = os.environ.get("RETF_SPLIT_DENSE_ADAM", "0")
    if chosen not in ("0", "1"):
        raise ValueError("RETF_SPLIT_DENSE_ADAM=%s is not 0 or 1 (whether AdamOptimizer decays the rows a sparse "
                         "gradient does not name early); unset it for the default, 0" % chosen)
    return chosen == "1"


# Ops whose output may be their input's buffer: what reads their output reads the variable.
_FORWARDING_OPS = frozenset([
    "Identity", "IdentityN", "RefIdentity", "Snapshot", "Reshape", "ExpandDims", "Squeeze", "StopGradient",
    "PreventGradient", "EnsureShape", "CheckNumerics", "Bitcast", "DebugIdentity", "Enter", "RefEnter", "Exit",
    "RefExit", "Switch", "RefSwitch", "Merge", "RefMerge", "NextIteration", "RefNextIteration"])


def _readers_before_update(var, grad, indices):
    """The ops that read var (its buffer, through ops that forward it) and that grad or indices depend on:
    what this step must have run before any row of var changes. None where the update cannot be split:
    eager execution, control flow around the update or around a reader, or a variable not in this graph."""
    if tf.executing_eagerly() or not all(hasattr(t, "op") for t in (grad, indices)):
        return None
    graph = grad.graph
    if getattr(graph, "_get_control_flow_context", lambda: None)() is not None:
        return None
    source = getattr(var, "op", None)
    if source is None or source.graph is not graph:
        return None
    readers, seen, frontier = [], set(), list(source.outputs)
    while frontier:
        tensor = frontier.pop()
        for consumer in tensor.consumers():
            if consumer.name in seen:
                continue
            seen.add(consumer.name)
            readers.append(consumer)
            if consumer.type in _FORWARDING_OPS:
                frontier.extend(consumer.outputs)
    ancestors, stack = set(), [grad.op, indices.op]
    while stack:
        op = stack.pop()
        if op.name in ancestors:
            continue
        ancestors.add(op.name)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    before = [op for op in readers if op.name in ancestors]
    if any(op._control_flow_context is not None for op in before):  # no public name for an op's loop or cond
        return None
    return before


class LazyAdamOptimizer(_FusedSparseAdam):
    """tf.compat.v1.train.AdamOptimizer whose sparse updates touch only the rows in the gradient.

    Dense gradients are applied exactly as AdamOptimizer applies them; slots ("m", "v") and the
    beta1_power/beta2_power accumulators are AdamOptimizer's own, so checkpoints interchange.
    For an IndexedSlices gradient (embedding lookups), only the rows it names are updated, the
    lazy Adam of tfa.optimizers.LazyAdam, in one fused kernel that also sums duplicate indices.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 name="LazyAdam"):
        super(LazyAdamOptimizer, self).__init__(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, use_locking=use_locking,
            name=name)

    _kernel = staticmethod(ops.sparse_apply_adam)

    def _fusable(self, var):
        dtype = var.dtype.base_dtype
        if dtype not in KERNEL_DTYPES:  # AdamOptimizer's own code would not be lazy
            raise TypeError("LazyAdamOptimizer: variable {} is {}; lazy sparse updates take float32 or float64 "
                            "variables".format(var.name, dtype.name))
        return True


class LazyAdamStandIn(LazyAdamOptimizer):
    """LazyAdamOptimizer under AdamOptimizer's default name, "Adam".

    What `sparse_adam = "lazy"` installs as tf.train.AdamOptimizer, and what the 1.x API mode's
    tf.contrib.opt.LazyAdamOptimizer is (TF 1.15's also defaults to the name "Adam"): slot variables
    keep AdamOptimizer's names, so a program's checkpoints restore either way.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False, name="Adam"):
        super(LazyAdamStandIn, self).__init__(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, use_locking=use_locking,
            name=name)


class AdagradOptimizer(_FusedSparse, tf.compat.v1.train.AdagradOptimizer):
    """tf.compat.v1.train.AdagradOptimizer with sparse gradients applied in one fused pass.

    AdagradOptimizer sums duplicate indices (unique + unsorted_segment_sum, two passes and a
    temporary) and then runs SparseApplyAdagrad; this class does both in one kernel that sums each
    row's gradients in the same order and rounds as SparseApplyAdagrad does, so the results are
    AdagradOptimizer's. Dense gradients, the "accumulator" slot and names are AdagradOptimizer's
    own, so checkpoints interchange; float16 variables take AdagradOptimizer's own sparse path.
    """

    def _fused_sparse_apply(self, grad, var, indices):
        return ops.sparse_apply_adagrad(
            var, self.get_slot(var, "accumulator"), tf.cast(self._learning_rate_tensor, var.dtype.base_dtype),
            grad, indices, use_locking=self._use_locking)


class FtrlOptimizer(_FusedSparse, tf.compat.v1.train.FtrlOptimizer):
    """tf.compat.v1.train.FtrlOptimizer with sparse gradients applied in one fused pass.

    As AdagradOptimizer here: the duplicate summing and SparseApplyFtrl (SparseApplyFtrlV2 with
    l2_shrinkage_regularization_strength > 0) in one kernel, same sums and roundings. Slots
    ("accum", "linear"), dense gradients and names are FtrlOptimizer's own.
    """

    def _fused_sparse_apply(self, grad, var, indices):
        dtype = var.dtype.base_dtype
        shrinkage = None
        if self._l2_shrinkage_regularization_strength > 0.0:
            shrinkage = tf.cast(self._l2_shrinkage_regularization_strength_tensor, dtype)
        return ops.sparse_apply_ftrl(
            var, self.get_slot(var, "accum"), self.get_slot(var, "linear"), grad, indices,
            tf.cast(self._learning_rate_tensor, dtype), tf.cast(self._l1_regularization_strength_tensor, dtype),
            tf.cast(self._adjusted_l2_regularization_strength_tensor, dtype),
            tf.cast(self._learning_rate_power_tensor, dtype), l2_shrinkage=shrinkage, use_locking=self._use_locking)


def _assign(var, value):
    """var = value for a reference or resource variable (or slot); the op."""
    return tf.compat.v1.assign(var, value) if not _is_resource(var) else var.assign(value).op


def _is_resource(var):
    return getattr(var, "dtype", None) == tf.resource or hasattr(var, "handle")


def _require_kernel_dtype(optimizer, var):
    dtype = var.dtype.base_dtype
    if dtype not in KERNEL_DTYPES:
        raise TypeError("{}: variable {} is {}; its sparse updates take float32 or float64 variables".format(
            type(optimizer).__name__, var.name, dtype.name))


class _SparseToKernel(object):
    """Mixin for an optimizer of retf's own: every sparse gradient, duplicates and all, goes to
    self._sparse(values, var, indices), whose kernel sums duplicate indices itself."""

    def _sparse(self, grad, var, indices):
        raise NotImplementedError

    def _apply_sparse_duplicate_indices(self, grad, var):
        return self._sparse(grad.values, var, grad.indices)

    def _apply_sparse(self, grad, var):
        return self._sparse(grad.values, var, grad.indices)

    def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices):
        return self._sparse(grad, handle, indices)

    def _resource_apply_sparse(self, grad, var, indices):
        return self._sparse(grad, var, indices)


class AdamAsyncOptimizer(_SparseToKernel, tf.compat.v1.train.Optimizer):
    """DeepRec's tf.train.AdamAsyncOptimizer: Adam with beta1_power and beta2_power per variable.

    Each variable has slots "m", "v", "beta1_power" and "beta2_power" (named as in DeepRec), so
    no global accumulator ties the variables together, and each apply advances that variable's own
    powers. Per update, with lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power) (left to right):
    m = m*beta1 + g*(1-beta1); v = v*beta2 + g^2*(1-beta2); var -= (m*lr_t)/(sqrt(v)+epsilon); then
    beta1_power *= beta1, beta2_power *= beta2. A sparse gradient moves only the rows it names
    (duplicates summed), in retf's fused kernel; float32 and float64 variables only.
    apply_sparse_rmsprop=True takes DeepRec's RMSProp-style rule for sparse gradients instead, on the
    named rows (duplicates summed): v = v*beta2 + g^2*(1-beta2); m = m*beta1 + rsqrt(v+epsilon)*lr*g;
    var -= m; the beta powers do not move. That rule runs on stock gather/scatter ops.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 apply_sparse_rmsprop=False, name="AdamAsync"):
        super(AdamAsyncOptimizer, self).__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._apply_sparse_rmsprop = apply_sparse_rmsprop
        self._lr_t = self._beta1_t = self._beta2_t = self._epsilon_t = None

    def _create_slots(self, var_list):
        for v in var_list:
            with tf.compat.v1.get_default_graph().colocate_with(v):
                self._zeros_slot(v, "m", self._name)
                self._zeros_slot(v, "v", self._name)
                self._get_or_make_slot(v, tf.convert_to_tensor(self._beta1, dtype=v.dtype.base_dtype),
                                       "beta1_power", self._name)
                self._get_or_make_slot(v, tf.convert_to_tensor(self._beta2, dtype=v.dtype.base_dtype),
                                       "beta2_power", self._name)

    def _prepare(self):
        self._lr_t = tf.convert_to_tensor(self._call_if_callable(self._lr), name="learning_rate")
        self._beta1_t = tf.convert_to_tensor(self._call_if_callable(self._beta1), name="beta1")
        self._beta2_t = tf.convert_to_tensor(self._call_if_callable(self._beta2), name="beta2")
        self._epsilon_t = tf.convert_to_tensor(self._call_if_callable(self._epsilon), name="epsilon")

    def _hyper(self, dtype):
        return (tf.cast(self._lr_t, dtype), tf.cast(self._beta1_t, dtype), tf.cast(self._beta2_t, dtype),
                tf.cast(self._epsilon_t, dtype))

    def _advance_powers(self, var, update, beta1, beta2):
        """After update: this variable's beta1_power *= beta1 and beta2_power *= beta2."""
        beta1_power, beta2_power = self.get_slot(var, "beta1_power"), self.get_slot(var, "beta2_power")
        with tf.control_dependencies([update]):
            return tf.group(update, _assign(beta1_power, beta1_power * beta1),
                            _assign(beta2_power, beta2_power * beta2))

    def _dense(self, grad, var):
        dtype = var.dtype.base_dtype
        lr, beta1, beta2, epsilon = self._hyper(dtype)
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        beta1_power, beta2_power = self.get_slot(var, "beta1_power"), self.get_slot(var, "beta2_power")
        one = tf.constant(1, dtype)
        lr_t = lr * tf.sqrt(one - tf.identity(beta2_power)) / (one - tf.identity(beta1_power))
        m_t = tf.identity(m) * beta1 + grad * (one - beta1)
        v_t = tf.identity(v) * beta2 + tf.square(grad) * (one - beta2)
        step = (m_t * lr_t) / (tf.sqrt(v_t) + epsilon)
        update = tf.group(_assign(m, m_t), _assign(v, v_t), _assign(var, tf.identity(var) - step))
        return self._advance_powers(var, update, beta1, beta2)

    def _apply_dense(self, grad, var):
        return self._dense(grad, var)

    def _resource_apply_dense(self, grad, var):
        return self._dense(grad, var)

    def _sparse_rmsprop(self, grad, var, indices):
        """DeepRec's apply_sparse_rmsprop rule on the named rows, duplicates summed first."""
        dtype = var.dtype.base_dtype
        lr, beta1, beta2, epsilon = self._hyper(dtype)
        unique, position = tf.unique(indices)
        grad = tf.math.unsorted_segment_sum(grad, position, tf.shape(unique)[0])
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        one = tf.constant(1, dtype)
        v_t = tf.gather(v, unique) * beta2 + tf.square(grad) * (one - beta2)
        m_t = tf.gather(m, unique) * beta1 + tf.math.rsqrt(v_t + epsilon) * lr * grad
        with tf.control_dependencies([tf.compat.v1.scatter_update(v, unique, v_t, use_locking=self._use_locking),
                                      tf.compat.v1.scatter_update(m, unique, m_t, use_locking=self._use_locking)]):
            return tf.group(tf.compat.v1.scatter_sub(var, unique, m_t, use_locking=self._use_locking))

    def _update_embedding_variable(self, var, grad, keys, step):
        """A sparse gradient of an EmbeddingVariable: beta powers per key (slots of one value), as in DeepRec."""
        if self._apply_sparse_rmsprop:
            raise embedding_variable.EmbeddingVariableError(
                "AdamAsyncOptimizer(apply_sparse_rmsprop=True) does not update EmbeddingVariables here; drop "
                "apply_sparse_rmsprop")
        lr, beta1, beta2, epsilon = self._hyper(tf.float32)
        slots = [self.get_slot(var, name).handle for name in ("m", "v", "beta1_power", "beta2_power")]
        return ev_ops.ev_apply("adam_async", [var.handle] + slots, [lr, beta1, beta2, epsilon], grad, keys, step)

    def _sparse(self, grad, var, indices):
        if self._apply_sparse_rmsprop:
            return self._sparse_rmsprop(grad, var, indices)
        _require_kernel_dtype(self, var)
        dtype = var.dtype.base_dtype
        lr, beta1, beta2, epsilon = self._hyper(dtype)
        beta1_power, beta2_power = self.get_slot(var, "beta1_power"), self.get_slot(var, "beta2_power")
        update = ops.sparse_apply_adam_async(
            var, self.get_slot(var, "m"), self.get_slot(var, "v"), tf.identity(beta1_power),
            tf.identity(beta2_power), lr, beta1, beta2, epsilon, grad, indices, use_locking=self._use_locking)
        return self._advance_powers(var, update, beta1, beta2)


class AdagradDecayOptimizer(_SparseToKernel, tf.compat.v1.train.Optimizer):
    """DeepRec's tf.train.AdagradDecayOptimizer: Adagrad whose accumulator decays once per period.

    With step = global_step + 1 and T = accumulator_decay_step, an update in a new period
    (step // T above the count kept for the variable, or for the row when the gradient is sparse)
    first sets accum = max(accum * accumulator_decay_rate, initial_accumulator_value) and counts
    one more decay; then accum += g^2 and var -= lr * g * rsqrt(accum). Slots "accumulator" and
    "accumulator_decay_power" as in DeepRec; the count slot holds one count per row here ([rows],
    of global_step's dtype), where DeepRec's has the variable's full shape. Sparse gradients go to
    retf's fused kernel (duplicates summed first); float32 and float64 variables only.
    """

    def __init__(self, learning_rate, global_step, initial_accumulator_value=0.1, accumulator_decay_step=100000,
                 accumulator_decay_rate=0.9, use_locking=False, name="AdagradDecay"):
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: %s" % initial_accumulator_value)
        if accumulator_decay_step <= 0:
            raise ValueError("accumulator_decay_step must be positive: %s" % accumulator_decay_step)
        if accumulator_decay_rate <= 0.0 or accumulator_decay_rate >= 1.0:
            raise ValueError("accumulator_decay_rate must be in (0.0, 1.0): %s" % accumulator_decay_rate)
        super(AdagradDecayOptimizer, self).__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._global_step = global_step
        self._initial_accumulator_value = initial_accumulator_value
        self._accumulator_decay_step = accumulator_decay_step
        self._accumulator_decay_rate = accumulator_decay_rate
        self._learning_rate_tensor = None
        self._decay_step_tensor = None
        self._decay_rate_tensor = None
        self._baseline_tensor = None
        self._step_tensor = None

    def _create_slots(self, var_list):
        step_dtype = self._global_step.dtype.base_dtype
        for v in var_list:
            dtype = v.dtype.base_dtype
            shape = v.get_shape()
            with tf.compat.v1.get_default_graph().colocate_with(v):
                if shape.is_fully_defined():
                    init = tf.compat.v1.constant_initializer(self._initial_accumulator_value, dtype=dtype)
                else:
                    init = tf.cast(tf.fill(tf.shape(v), self._initial_accumulator_value), dtype)
            self._get_or_make_slot_with_initializer(v, init, shape, dtype, "accumulator", self._name)
            if isinstance(v, embedding_variable.EmbeddingVariable):  # one count per key, beside its row
                self._get_or_make_slot_with_initializer(v, tf.compat.v1.zeros_initializer(), tf.TensorShape([]),
                                                        tf.float32, "accumulator_decay_power", self._name)
                continue
            counts = shape[:1] if shape.ndims else shape
            self._get_or_make_slot_with_initializer(v, tf.compat.v1.zeros_initializer(step_dtype), counts,
                                                    step_dtype, "accumulator_decay_power", self._name)

    def _prepare(self):
        self._learning_rate_tensor = tf.convert_to_tensor(self._call_if_callable(self._learning_rate),
                                                          name="learning_rate")
        step_dtype = self._global_step.dtype.base_dtype
        self._decay_step_tensor = tf.cast(tf.convert_to_tensor(self._accumulator_decay_step,
                                                               name="accumulator_decay_step"), step_dtype)
        self._decay_rate_tensor = tf.convert_to_tensor(self._accumulator_decay_rate, name="accumulator_decay_rate")
        self._baseline_tensor = tf.convert_to_tensor(self._initial_accumulator_value, name="accumulator_baseline")
        with tf.compat.v1.get_default_graph().colocate_with(self._learning_rate_tensor):
            self._step_tensor = tf.identity(self._global_step) + 1

    def _hyper(self, dtype):
        return (tf.cast(self._learning_rate_tensor, dtype), tf.cast(self._decay_rate_tensor, dtype),
                tf.cast(self._baseline_tensor, dtype))

    def _dense(self, grad, var):
        dtype = var.dtype.base_dtype
        lr, rate, baseline = self._hyper(dtype)
        accum, power = self.get_slot(var, "accumulator"), self.get_slot(var, "accumulator_decay_power")
        power_value = tf.identity(power)
        decay = tf.greater(tf.truncatediv(self._step_tensor, self._decay_step_tensor),
                           tf.reshape(power_value, [-1])[0])
        accum_value = tf.identity(accum)
        decayed = tf.cond(decay, lambda: tf.maximum(accum_value * rate, baseline), lambda: accum_value)
        accum_t = decayed + tf.square(grad)
        first = tf.reshape(tf.one_hot(0, tf.size(power_value), dtype=power_value.dtype), tf.shape(power_value))
        return tf.group(_assign(accum, accum_t), _assign(var, tf.identity(var) - grad * lr * tf.math.rsqrt(accum_t)),
                        _assign(power, power_value + first * tf.cast(decay, power_value.dtype)))

    def _apply_dense(self, grad, var):
        return self._dense(grad, var)

    def _resource_apply_dense(self, grad, var):
        return self._dense(grad, var)

    def _update_embedding_variable(self, var, grad, keys, step):
        """A sparse gradient of an EmbeddingVariable: the decay count per key (a slot of one value)."""
        lr, rate, baseline = self._hyper(tf.float32)
        handles = [var.handle] + [self.get_slot(var, name).handle for name in ("accumulator", "accumulator_decay_power")]
        return ev_ops.ev_apply("adagrad_decay", handles, [lr, tf.cast(self._decay_step_tensor, tf.int64), rate, baseline],
                               grad, keys, tf.cast(self._global_step, tf.int64))

    def _sparse(self, grad, var, indices):
        _require_kernel_dtype(self, var)
        lr, rate, baseline = self._hyper(var.dtype.base_dtype)
        return ops.sparse_apply_adagrad_decay(
            var, self.get_slot(var, "accumulator"), self.get_slot(var, "accumulator_decay_power"), lr,
            self._decay_step_tensor, rate, baseline, self._step_tensor, grad, indices, use_locking=self._use_locking)
