"""DeepRec's EmbeddingVariable on TensorFlow 2.x's graph mode: a variable keyed by any int64 id.

Rows live in a hash table in retf's kernels, created on a key's first admission from the initializer's
default values (``default_value_dim`` rows; key k starts from row k mod default_value_dim), looked up with
``tf.nn.embedding_lookup`` (and the sparse and safe lookups, so feature columns), updated by the 1.x
optimizers in fused kernels that touch only the keys of the gradient. ``CounterFilter`` admits a key at its
``filter_freq``-th sighting (before, it reads ``default_value_no_permission`` and is not updated);
``GlobalStepEvict`` and ``L2WeightEvict`` drop keys when a checkpoint is saved. ``tf.train.Saver`` writes
DeepRec's layout (``<name>-keys``, ``-values``, ``-freqs``, ``-versions``, the ``_filtered`` three, the
partition offsets) and restores it, DeepRec's own checkpoints included, into any number of partitions.

A partitioned EmbeddingVariable (a partitioner of the call or of the variable scope) is a list of parts
``<name>/part_<i>``; key k lives in part (k mod 1000) mod parts, as in DeepRec.
"""

import functools
import sys
import weakref

import tensorflow as tf
from tensorflow.core.framework import variable_pb2
from tensorflow.python.framework import ops
from tensorflow.python.ops import variable_scope, variables
from tensorflow.python.training import slot_creator
from tensorflow.python.training.saving import saveable_object

from retf.nn import check_newer_keywords
from retf.ops import embedding_variable as ev_ops

# DeepRec's checkpoint tensors of one EmbeddingVariable (or part, or slot): name + suffix.
CHECKPOINT_SUFFIXES = ("-keys", "-values", "-freqs", "-versions", "-keys_filtered", "-freqs_filtered",
                       "-versions_filtered", "-partition_offset", "-partition_filter_offset")
# DeepRec's collection of EmbeddingVariables (GraphKeys.EMBEDDING_VARIABLES there).
EMBEDDING_VARIABLES = "embedding_variables"


class EmbeddingVariableError(ValueError):
    """A DeepRec EmbeddingVariable feature this build does not provide, or a misuse; the message says which."""


# --- DeepRec's options, with its argument and attribute names ---------------------------------------------

class InitializerOption(object):
    def __init__(self, initializer=None, default_value_dim=4096, default_value_no_permission=.0):
        if default_value_dim <= 0:
            raise EmbeddingVariableError("InitializerOption: default_value_dim must be positive, got %r"
                                         % (default_value_dim,))
        self.initializer = initializer
        self.default_value_dim = default_value_dim
        self.default_value_no_permission = default_value_no_permission


class GlobalStepEvict(object):
    def __init__(self, steps_to_live=None):
        self.steps_to_live = steps_to_live


class L2WeightEvict(object):
    def __init__(self, l2_weight_threshold=-1.0):
        self.l2_weight_threshold = l2_weight_threshold


class CheckpointOption(object):
    def __init__(self, ckpt_to_load_from=None, tensor_name_in_ckpt=None, always_load_from_specific_ckpt=False,
                 init_data_source=None):
        self.ckpt_to_load_from = ckpt_to_load_from
        self.tensor_name_in_ckpt = tensor_name_in_ckpt
        self.always_load_from_specific_ckpt = always_load_from_specific_ckpt
        self.init_data_source = init_data_source


class StorageOption(object):
    """Only DRAM (DeepRec's default): multi-tier storage (HBM, PMEM, SSD, LevelDB) is not provided."""

    def __init__(self, storage_type=None, storage_path=None, storage_size=None, cache_strategy=None, layout=None):
        if storage_type not in (None, 0, "DRAM") or storage_path is not None:
            raise EmbeddingVariableError(
                "StorageOption(storage_type=%r): multi-tier EmbeddingVariable storage is not provided by this "
                "TensorFlow; rows live in memory (DRAM). Fix: drop storage_option (or the script's multi-tier "
                "storage flag)" % (storage_type,))
        self.storage_type = storage_type
        self.storage_path = storage_path
        self.storage_size = storage_size if storage_size is not None else [1024 * 1024 * 1024]
        self.cache_strategy = cache_strategy
        self.layout = layout


class CounterFilter(object):
    def __init__(self, filter_freq=0):
        self.filter_freq = filter_freq


class CBFFilter(object):
    """DeepRec's counting-Bloom-filter admission: a key is admitted at its filter_freq-th sighting. Counted
    exactly here (no false positives), so the sizing arguments are checked and kept but change nothing."""

    def __init__(self, filter_freq=0, max_element_size=0, false_positive_probability=-1.0, counter_type=None):
        if false_positive_probability != -1.0:
            if false_positive_probability <= 0 or max_element_size <= 0:
                raise EmbeddingVariableError(
                    "CBFFilter: false_positive_probability must be positive and max_element_size given with it, got "
                    "%r and %r" % (false_positive_probability, max_element_size))
        elif max_element_size != 0:
            raise EmbeddingVariableError("CBFFilter: max_element_size needs false_positive_probability")
        self.filter_freq = filter_freq
        self.max_element_size = max_element_size
        self.false_positive_probability = false_positive_probability
        self.counter_type = counter_type


class EmbeddingVariableOption(object):
    def __init__(self, ht_type="", ht_partition_num=1000, evict_option=None, ckpt=None, filter_option=None,
                 storage_option=None, init_option=None):
        self.ht_type = ht_type
        self.ht_partition_num = ht_partition_num
        self.evict = evict_option
        self.ckpt = ckpt
        self.filter_strategy = filter_option
        self.storage_option = storage_option if storage_option is not None else StorageOption()
        self.init = init_option if init_option is not None else InitializerOption()


def _kernel_options(ev_option, steps_to_live):
    """The ops' attributes for an EmbeddingVariableOption (and get_embedding_variable's steps_to_live)."""
    evict = ev_option.evict
    if isinstance(evict, GlobalStepEvict) and evict.steps_to_live is not None:
        steps_to_live = evict.steps_to_live
    l2_threshold = evict.l2_weight_threshold if isinstance(evict, L2WeightEvict) else -1.0
    if steps_to_live and l2_threshold > 0:
        raise EmbeddingVariableError("GlobalStepEvict (steps_to_live) and L2WeightEvict can't be enabled at the "
                                     "same time on one EmbeddingVariable")
    if evict is not None and not isinstance(evict, (GlobalStepEvict, L2WeightEvict)):
        raise EmbeddingVariableError("evict_option must be tf.GlobalStepEvict or tf.L2WeightEvict, got %r" % (evict,))
    flt = ev_option.filter_strategy
    if flt is not None and not isinstance(flt, (CounterFilter, CBFFilter)):
        raise EmbeddingVariableError("filter_option must be tf.CounterFilter or tf.CBFFilter, got %r" % (flt,))
    return {"filter_freq": int(flt.filter_freq) if flt is not None else 0,
            "steps_to_live": int(steps_to_live or 0),
            "l2_threshold": float(max(l2_threshold, 0.0)),
            "no_permission_value": float(ev_option.init.default_value_no_permission)}


# --- the variable ---------------------------------------------------------------------------------------

def _global_step():
    """The global step as int64 (what updates stamp and eviction measures from); 0 without one."""
    step = tf.compat.v1.train.get_global_step()
    if step is None:
        return tf.constant(0, tf.int64)
    return tf.cast(step.read_value() if hasattr(step, "read_value") else tf.identity(step), tf.int64)


class EmbeddingVariable(variables.Variable):
    """DeepRec's tf.EmbeddingVariable: shape [embedding_dim], rows by key. Build it with
    tf.get_embedding_variable; read it with tf.nn.embedding_lookup."""

    def __init__(self, name, dim, default_values, options, trainable=True, collections=None, primary=None,
                 slot_initial=None, partition=(0, 1), head_tail=None):
        self._dim = int(dim)
        self._options = options
        self._trainable = trainable
        self._primary = primary  # None for a variable, the variable for one of its slots
        self._partition = partition
        self._constraint = None
        self._save_slice_info = None
        self._in_graph_mode = True
        self._evict_ops = weakref.WeakKeyDictionary()
        with ops.name_scope(None):
            with ops.name_scope(name) as scope:
                if primary is None:
                    self._handle = ev_ops.ev_handle(scope, self._dim, shared_name=ops.name_from_scope_name(scope))
                else:  # a slot lives with its variable (replica_device_setter would deal it another ps task)
                    with ops.colocate_with(primary._handle):
                        self._handle = ev_ops.ev_handle(scope, self._dim, shared_name=ops.name_from_scope_name(scope))
                with ops.colocate_with(self._handle), ops.name_scope("Initializer"):
                    if primary is None:
                        self._initial_value = tf.convert_to_tensor(default_values(), tf.float32)
                        self._initializer_op = ev_ops.ev_initialize(self._handle, self._initial_value, options,
                                                                    name="Initialize")
                    else:
                        self._initial_value = tf.reshape(tf.cast(slot_initial, tf.float32), [-1])
                        with ops.control_dependencies([primary.initializer]):
                            self._initializer_op = ev_ops.ev_slot_initialize(
                                self._handle, primary._handle, self._initial_value, primary._dim, name="Initialize")
        self._save_name = self._handle.op.name
        # DeepRec's checkpoint names of a part: head/part_<i> + tail (tail: a slot's suffix), read back into
        # any number of parts
        self._head_tail = head_tail or (self._save_name, "")
        collections = [ops.GraphKeys.GLOBAL_VARIABLES] if collections is None else list(collections)
        if trainable and ops.GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(ops.GraphKeys.TRAINABLE_VARIABLES)
        if primary is None:
            collections.append(EMBEDDING_VARIABLES)
        for key in collections:
            ops.add_to_collection(key, self)

    @classmethod
    def _variable_call(cls, *args, **kwargs):
        """None: built by its own __init__ (TF 2.13's variable metaclass asks each class first)."""
        return None

    # the variable, as TensorFlow's graph-mode code asks for it
    def _should_act_as_resource_variable(self):
        pass

    @property
    def handle(self):
        return self._handle

    @property
    def name(self):
        return self._handle.name

    @property
    def op(self):
        return self._handle.op

    @property
    def graph(self):
        return self._handle.graph

    @property
    def device(self):
        return self._handle.device

    @property
    def dtype(self):
        return tf.float32

    @property
    def shape(self):
        return tf.TensorShape([self._dim])

    def get_shape(self):
        return self.shape

    @property
    def initializer(self):
        return self._initializer_op

    @property
    def initial_value(self):
        return self._initial_value

    @property
    def constraint(self):
        return self._constraint

    @property
    def trainable(self):
        return self._trainable

    @property
    def synchronization(self):
        return tf.VariableSynchronization.AUTO

    @property
    def aggregation(self):
        return tf.VariableAggregation.NONE

    def _get_save_slice_info(self):
        return None

    def is_initialized(self, name=None):
        with ops.colocate_with(self._handle):
            return ev_ops.ev_is_initialized(self._handle, name=name)

    def _width(self):
        return int(self._initial_value.shape[-1]) if self._primary is not None else self._dim

    def sparse_read(self, indices, name=None):
        """The rows of indices (int64 keys), counted as a training lookup when the variable is trainable."""
        keys = tf.cast(indices, tf.int64) if indices.dtype != tf.int64 else indices
        with ops.colocate_with(self._handle):
            return ev_ops.ev_gather(self._handle, keys, self._width(),
                                    count=self._trainable and self._primary is None, name=name)

    def _dense_value_error(self, *unused_args, **unused_kwargs):
        raise EmbeddingVariableError("%s is an EmbeddingVariable: it has no dense value; read rows with "
                                     "tf.nn.embedding_lookup(variable, ids)" % self._save_name)

    value = read_value = assign = assign_add = assign_sub = eval = _dense_value_error

    def _as_graph_element(self):
        return self._handle

    def __repr__(self):
        return "<tf.EmbeddingVariable '%s' embedding dim=%d dtype=float32>" % (self._save_name, self._dim)

    def to_proto(self, export_scope=None):
        if export_scope is not None and not self._save_name.startswith(export_scope):
            return None
        proto = variable_pb2.VariableDef()
        proto.variable_name = ops.strip_name_scope(self._handle.name, export_scope)
        proto.initializer_name = ops.strip_name_scope(self._initializer_op.name, export_scope)
        proto.is_resource = True
        proto.trainable = self._trainable
        return proto

    # slots and saving
    def slot(self, name, initial):
        """A slot (optimizer state per key) named `name`, each key's starting at initial (a row or a scalar)."""
        head, tail = self._head_tail
        slot_tail = tail + name[len(self._save_name):]
        return EmbeddingVariable(name, self._dim, None, self._options, trainable=False, primary=self,
                                 slot_initial=initial, partition=self._partition, head_tail=(head, slot_tail))

    def _evict_op(self):
        """This variable's eviction at save (GlobalStepEvict, L2WeightEvict), one op per graph."""
        graph = ops.get_default_graph()
        if graph not in self._evict_ops:
            with ops.colocate_with(self._handle), ops.name_scope(self._save_name + "/"):
                self._evict_ops[graph] = ev_ops.ev_evict(self._handle, _global_step(), name="Evict")
        return self._evict_ops[graph]

    def _gather_saveables_for_checkpoint(self):
        return {"embedding_variable": lambda name=None: EmbeddingVariableSaveable(self)}

    def _import(self, filename):
        """The op restoring this variable (or slot) from the checkpoint at filename."""
        head, tail = self._head_tail
        primary = self._primary if self._primary is not None else self
        with ops.colocate_with(self._handle), ops.name_scope(self._save_name + "/"):
            return ev_ops.ev_import(self._handle, primary._handle, filename, self._initial_value, head, tail,
                                    self._partition[0], self._partition[1], self._primary is not None,
                                    primary._dim, primary._options, name="Import")


class EmbeddingVariableSaveable(saveable_object.SaveableObject):
    """What tf.train.Saver writes for an EmbeddingVariable: DeepRec's nine tensors, after eviction."""

    def __init__(self, variable):
        self.variable = variable
        primary = variable._primary if variable._primary is not None else variable
        with ops.colocate_with(variable._handle), ops.control_dependencies([primary._evict_op()]):
            tensors = ev_ops.ev_export(variable._handle, name=variable._save_name + "/Export")
        specs = [saveable_object.SaveSpec(tensor, "", variable._save_name + suffix)
                 for tensor, suffix in zip(tensors, CHECKPOINT_SUFFIXES)]
        super(EmbeddingVariableSaveable, self).__init__(variable, specs, variable._save_name)

    def restore(self, restored_tensors, restored_shapes):
        raise EmbeddingVariableError("%s: an EmbeddingVariable is restored by tf.train.Saver (or "
                                     "MonitoredTrainingSession), which reads its keys itself" % self.name)


class PartitionedEmbeddingVariable(list):
    """The parts of a partitioned EmbeddingVariable (DeepRec's PartitionedVariable of EmbeddingVariables)."""

    def __init__(self, name, parts):
        super(PartitionedEmbeddingVariable, self).__init__(parts)
        self.name = name
        self.dtype = tf.float32
        self.shape = tf.TensorShape([len(parts), parts[0]._dim])

    def get_shape(self):
        return self.shape

    def __repr__(self):
        return "<tf.EmbeddingVariable '%s' of %d partitions, embedding dim=%d>" % (self.name, len(self), self[0]._dim)


def is_embedding_variable(value):
    return isinstance(value, (EmbeddingVariable, PartitionedEmbeddingVariable)) or (
        isinstance(value, (list, tuple)) and value and all(isinstance(v, EmbeddingVariable) for v in value))


_VARIABLES = weakref.WeakKeyDictionary()  # graph -> {full name: variable}


def _default_values(initializer, ev_option, dim):
    """A function making the initializer's rows: [default_value_dim, dim] ([1, dim] for a constant)."""
    chosen = ev_option.init.initializer or initializer or tf.compat.v1.truncated_normal_initializer()
    if isinstance(chosen, type):
        chosen = chosen()
    rows = ev_option.init.default_value_dim
    if isinstance(chosen, tf.compat.v1.constant_initializer):
        rows = 1
    if callable(chosen):
        return lambda: chosen([rows, dim], dtype=tf.float32)
    return lambda: tf.broadcast_to(tf.cast(chosen, tf.float32), [rows, dim])


def get_embedding_variable(name, embedding_dim, key_dtype=tf.int64, value_dtype=None, initializer=None,
                           regularizer=None, trainable=True, collections=None, caching_device=None,
                           partitioner=None, validate_shape=True, custom_getter=None, constraint=None,
                           steps_to_live=None, init_data_source=None, ev_option=None):
    """DeepRec's tf.get_embedding_variable: an EmbeddingVariable, or its parts with a partitioner (the call's
    or the variable scope's)."""
    ev_option = ev_option if ev_option is not None else EmbeddingVariableOption()
    if key_dtype not in (tf.int64, tf.int32):
        raise EmbeddingVariableError("get_embedding_variable(%s): key_dtype must be tf.int64 or tf.int32, got %s"
                                     % (name, key_dtype))
    if value_dtype not in (None, tf.float32):
        raise EmbeddingVariableError("get_embedding_variable(%s): EmbeddingVariables hold float32 values here, "
                                     "not %s" % (name, value_dtype))
    if constraint is not None:
        raise EmbeddingVariableError("get_embedding_variable(%s): constraints are not applied to sparse variables"
                                     % name)
    for unused, what in ((init_data_source, "init_data_source"), (custom_getter, "custom_getter")):
        if unused is not None:
            raise EmbeddingVariableError("get_embedding_variable(%s): %s is not provided by this TensorFlow; drop it"
                                         % (name, what))
    scope = variable_scope.get_variable_scope()
    full_name = scope.name + "/" + name if scope.name else name
    options = _kernel_options(ev_option, steps_to_live)
    partitioner = partitioner if partitioner is not None else scope.partitioner
    regularizer = regularizer if regularizer is not None else scope.regularizer
    graph = ops.get_default_graph()
    known = _VARIABLES.setdefault(graph, {})
    if full_name in known:
        if scope.reuse is False or scope.reuse is None:
            raise ValueError("Variable %s already exists, disallowed. Did you mean to set reuse=True or "
                             "reuse=tf.AUTO_REUSE in VarScope?" % full_name)
        return known[full_name]
    if scope.reuse is True:
        raise ValueError("Variable %s does not exist, or was not created with tf.get_embedding_variable(). Did "
                         "you mean to set reuse=tf.AUTO_REUSE in VarScope?" % full_name)
    defaults = _default_values(initializer, ev_option, embedding_dim)
    parts = 1
    if partitioner is not None:
        parts = int(partitioner(shape=tf.TensorShape([sys.maxsize, embedding_dim]), dtype=tf.float32)[0])
    if parts <= 1:
        variable = EmbeddingVariable(full_name, embedding_dim, defaults, options, trainable, collections)
        variables_made = [variable]
    else:
        variables_made = [EmbeddingVariable("%s/part_%d" % (full_name, i), embedding_dim, defaults, options,
                                            trainable, collections, partition=(i, parts), head_tail=(full_name, ""))
                          for i in range(parts)]
        variable = PartitionedEmbeddingVariable(full_name, variables_made)
    if regularizer is not None:
        for part in variables_made:
            with ops.name_scope(part._save_name + "/Regularizer/"):
                loss = regularizer(part)  # on the whole variable: regularizers of rows go in the model's loss
            if loss is not None:
                ops.add_to_collection(ops.GraphKeys.REGULARIZATION_LOSSES, loss)
    known[full_name] = variable
    return variable


# --- lookups --------------------------------------------------------------------------------------------

def _parts(params):
    if isinstance(params, EmbeddingVariable):
        return [params]
    return list(params)


def embedding_lookup(params, ids, name=None, max_norm=None):
    """The rows of ids (any integer shape) in an EmbeddingVariable or its parts: ids' shape + [dim]."""
    parts = _parts(params)
    with ops.name_scope(name, "embedding_lookup", [ids]):
        ids = tf.convert_to_tensor(ids)
        if ids.dtype != tf.int64:
            ids = tf.cast(ids, tf.int64)
        if len(parts) == 1:
            result = parts[0].sparse_read(ids)
        else:
            flat = tf.reshape(ids, [-1])
            part = tf.cast(tf.math.floormod(tf.math.floormod(flat, 1000), len(parts)), tf.int32)
            positions = tf.dynamic_partition(tf.range(tf.size(flat)), part, len(parts))
            keys = tf.dynamic_partition(flat, part, len(parts))
            rows = [variable.sparse_read(k) for variable, k in zip(parts, keys)]
            stitched = tf.dynamic_stitch(positions, rows)
            result = tf.reshape(stitched, tf.concat([tf.shape(ids), [parts[0]._dim]], 0))
        if max_norm is not None:
            result = tf.clip_by_norm(result, max_norm, axes=[result.shape.rank - 1])
        return result


def safe_embedding_lookup_sparse(params, sparse_ids, sparse_weights=None, combiner="mean", default_id=None,
                                 name=None, partition_strategy="div", max_norm=None):
    """tf.nn.safe_embedding_lookup_sparse over an EmbeddingVariable: invalid ids (< 0) and weights (<= 0) pruned,
    empty rows of the batch read zeros (or default_id's row)."""
    with ops.name_scope(name, "embedding_lookup", [sparse_ids, sparse_weights]):
        original_shape = sparse_ids.dense_shape
        original_rank = tf.size(original_shape)
        rank = sparse_ids.dense_shape.get_shape().dims[0].value if sparse_ids.dense_shape.get_shape().dims else None
        width = _parts(params)[0]._dim
        if rank is None or rank != 2:
            outer = tf.reduce_prod(tf.slice(original_shape, [0], [original_rank - 1]))
            sparse_ids = tf.sparse.reshape(sparse_ids, tf.stack([outer, original_shape[original_rank - 1]]))
            if sparse_weights is not None:
                sparse_weights = tf.SparseTensor(sparse_ids.indices, sparse_weights.values, sparse_ids.dense_shape)
        keep = tf.greater_equal(sparse_ids.values, 0)
        if sparse_weights is not None:
            keep = tf.logical_and(keep, tf.greater(sparse_weights.values, 0)) if combiner != "sum" else keep
            sparse_weights = tf.sparse.retain(
                tf.SparseTensor(sparse_ids.indices, sparse_weights.values, sparse_ids.dense_shape), keep)
        sparse_ids = tf.sparse.retain(sparse_ids, keep)
        sparse_ids, empty = tf.sparse.fill_empty_rows(sparse_ids, default_id or 0)
        if sparse_weights is not None:
            sparse_weights, _ = tf.sparse.fill_empty_rows(sparse_weights, 1.0)
        result = embedding_lookup_sparse(params, sparse_ids, sparse_weights, combiner=combiner, max_norm=max_norm)
        if default_id is None:
            zeros = tf.zeros_like(result)
            result = tf.where(tf.tile(tf.reshape(empty, [-1, 1]), [1, tf.shape(result)[1]]), zeros, result)
        final_shape = tf.concat([tf.slice(original_shape, [0], [original_rank - 1]), [tf.shape(result)[1]]], 0)
        result = tf.reshape(result, tf.cast(final_shape, tf.int32))
        if rank is not None:  # as TensorFlow's lookup: the ids' rank, less their last dimension, plus the row's
            result.set_shape([None] * (rank - 1) + [width])
        return result


def embedding_lookup_sparse(params, sp_ids, sp_weights, combiner=None, max_norm=None, name=None):
    """tf.nn.embedding_lookup_sparse over an EmbeddingVariable: each distinct id looked up once, combined per row."""
    combiner = combiner or "mean"
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    with ops.name_scope(name, "embedding_lookup_sparse", [sp_ids]):
        segment_ids = tf.cast(sp_ids.indices[:, 0], tf.int32)
        ids, idx = tf.unique(sp_ids.values)
        rows = embedding_lookup(params, ids, max_norm=max_norm)
        if sp_weights is None:
            reduce = {"sum": tf.sparse.segment_sum, "mean": tf.sparse.segment_mean,
                      "sqrtn": tf.sparse.segment_sqrt_n}[combiner]
            return reduce(rows, idx, segment_ids)
        weights = tf.cast(sp_weights.values, rows.dtype)
        weighted = tf.gather(rows, idx) * tf.expand_dims(weights, 1)
        total = tf.math.segment_sum(weighted, segment_ids)
        if combiner == "sum":
            return total
        if combiner == "mean":
            return tf.math.divide_no_nan(total, tf.expand_dims(tf.math.segment_sum(weights, segment_ids), 1))
        norm = tf.sqrt(tf.math.segment_sum(weights * weights, segment_ids))
        return tf.math.divide_no_nan(total, tf.expand_dims(norm, 1))


# --- optimizers -----------------------------------------------------------------------------------------

def _slot_initial(primary, value):
    value = tf.convert_to_tensor(value, tf.float32)
    if value.shape.rank == 0:
        return tf.reshape(value, [1])
    return value


def _slot_name(primary, name):
    """The slot's name as TensorFlow's slot_creator names it: primary/name, made unique among variable scopes."""
    with variable_scope.variable_scope(None, primary.op.name + "/" + name, auxiliary_name_scope=False) as scope:
        return scope.name


def create_slot(primary, val, name, **unused):
    return primary.slot(_slot_name(primary, name), _slot_initial(primary, val))


def create_slot_with_initializer(primary, initializer, shape, dtype, name, **unused):
    width = primary._dim if tf.TensorShape(shape).rank else 1
    slot_name = _slot_name(primary, name)
    with ops.name_scope(None), ops.name_scope(slot_name + "/Initial"):
        initial = initializer([width], dtype=tf.float32)
    return primary.slot(slot_name, initial)


def create_zeros_slot(primary, name, dtype=None, **unused):
    return primary.slot(_slot_name(primary, name), tf.zeros([primary._dim], tf.float32))


def _hyper(value):
    return tf.cast(value, tf.float32)


def _adam(optimizer, var, grad, keys, step):
    beta1_power, beta2_power = optimizer._get_beta_accumulators()
    return ev_ops.ev_apply("adam", [var._handle, optimizer.get_slot(var, "m")._handle,
                                    optimizer.get_slot(var, "v")._handle],
                           [_hyper(beta1_power), _hyper(beta2_power), _hyper(optimizer._lr_t),
                            _hyper(optimizer._beta1_t), _hyper(optimizer._beta2_t), _hyper(optimizer._epsilon_t)],
                           grad, keys, step)


def _adagrad(optimizer, var, grad, keys, step):
    return ev_ops.ev_apply("adagrad", [var._handle, optimizer.get_slot(var, "accumulator")._handle],
                           [_hyper(optimizer._learning_rate_tensor)], grad, keys, step)


def _ftrl(optimizer, var, grad, keys, step):
    shrinkage = optimizer._l2_shrinkage_regularization_strength_tensor \
        if optimizer._l2_shrinkage_regularization_strength > 0.0 else 0.0
    return ev_ops.ev_apply("ftrl", [var._handle, optimizer.get_slot(var, "accum")._handle,
                                    optimizer.get_slot(var, "linear")._handle],
                           [_hyper(optimizer._learning_rate_tensor), _hyper(optimizer._l1_regularization_strength_tensor),
                            _hyper(optimizer._adjusted_l2_regularization_strength_tensor), _hyper(shrinkage),
                            _hyper(optimizer._learning_rate_power_tensor)], grad, keys, step)


def _gradient_descent(optimizer, var, grad, keys, step):
    return ev_ops.ev_apply("gradient_descent", [var._handle], [_hyper(optimizer._learning_rate_tensor)], grad, keys,
                           step)


def _rules():
    """(TensorFlow's optimizer class, its EmbeddingVariable update), most specific first."""
    v1 = tf.compat.v1.train
    return ((v1.AdamOptimizer, _adam), (v1.AdagradOptimizer, _adagrad), (v1.FtrlOptimizer, _ftrl),
            (v1.GradientDescentOptimizer, _gradient_descent))


def update(optimizer, var, grad):
    """The optimizer's update of EmbeddingVariable var by grad (an IndexedSlices over keys)."""
    if not isinstance(grad, tf.IndexedSlices):
        raise EmbeddingVariableError("%s: an EmbeddingVariable takes sparse gradients (from tf.nn.embedding_lookup),"
                                     " got a dense one" % var._save_name)
    keys = grad.indices if grad.indices.dtype == tf.int64 else tf.cast(grad.indices, tf.int64)
    values = tf.cast(grad.values, tf.float32)
    own = getattr(optimizer, "_update_embedding_variable", None)  # retf.train's DeepRec optimizers carry theirs
    with ops.colocate_with(var._handle):
        if own is not None:
            return own(var, values, keys, _global_step())
        for kind, rule in _rules():
            if isinstance(optimizer, kind):
                return rule(optimizer, var, values, keys, _global_step())
    raise EmbeddingVariableError(
        "%s cannot update EmbeddingVariable %s: EmbeddingVariables train with tf.train.GradientDescentOptimizer, "
        "AdagradOptimizer, AdagradDecayOptimizer, AdamOptimizer, AdamAsyncOptimizer or FtrlOptimizer"
        % (type(optimizer).__name__, var._save_name))


class _Processor(object):
    """The optimizer's view of an EmbeddingVariable: gradients by its handle, updates by retf's kernels."""

    def __init__(self, variable):
        self._v = variable

    def target(self):
        return self._v

    def update_op(self, optimizer, g):
        return update(optimizer, self._v, g)


def restore_ops(filename, saveables):
    """The ops restoring the EmbeddingVariables among saveables: each variable's first, then its slots'."""
    variables_first = sorted(saveables, key=lambda s: s.variable._primary is not None)
    done = {}
    for saveable in variables_first:
        variable = saveable.variable
        after = [done[id(variable._primary)]] if variable._primary is not None and id(variable._primary) in done \
            else []
        with ops.control_dependencies(after):
            done[id(variable)] = variable._import(filename)
    return list(done.values())


# --- feature columns ------------------------------------------------------------------------------------

_COLUMN_CLASSES = []


def _feature_columns():
    """DeepRec's categorical_column_with_embedding and the embedding column over it (classes built on first use:
    the feature-column modules load only when a program asks for them)."""
    if not _COLUMN_CLASSES:
        _COLUMN_CLASSES.extend(_define_feature_columns())
    return _COLUMN_CLASSES


def _define_feature_columns():
    import collections

    from tensorflow.python.feature_column import feature_column as fc_old
    from tensorflow.python.feature_column import feature_column_v2 as fc

    class EmbeddingCategoricalColumn(
            fc.CategoricalColumn, fc_old._CategoricalColumn,
            collections.namedtuple("EmbeddingCategoricalColumn", ("key", "dtype", "partition_num", "ev_option"))):
        """Ids kept as they are (strings hashed to int64 with Fingerprint64), embedded in an EmbeddingVariable."""

        @property
        def _is_v2_column(self):
            return True

        @property
        def name(self):
            return self.key

        @property
        def parse_example_spec(self):
            return {self.key: tf.io.VarLenFeature(self.dtype)}

        @property
        def _parse_example_spec(self):
            return self.parse_example_spec

        def _ids(self, input_tensor):
            sparse = fc._to_sparse_input_and_drop_ignore_values(input_tensor)
            if sparse.dtype == tf.string:
                values = tf.strings.to_hash_bucket_fast(sparse.values, 2 ** 63 - 1)
            else:
                values = tf.cast(sparse.values, tf.int64)
            return tf.SparseTensor(sparse.indices, values, sparse.dense_shape)

        def transform_feature(self, transformation_cache, state_manager):
            return self._ids(transformation_cache.get(self.key, state_manager))

        def _transform_feature(self, inputs):
            return self._ids(inputs.get(self.key))

        @property
        def num_buckets(self):
            raise EmbeddingVariableError(
                "categorical_column_with_embedding(%r) has no bucket count: its ids go to an EmbeddingVariable "
                "through embedding_column; linear_model and indicator_column need "
                "categorical_column_with_hash_bucket" % self.key)

        @property
        def _num_buckets(self):
            return self.num_buckets

        def get_sparse_tensors(self, transformation_cache, state_manager):
            return fc.CategoricalColumn.IdWeightPair(transformation_cache.get(self, state_manager), None)

        def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
            return fc.CategoricalColumn.IdWeightPair(inputs.get(self), None)

        @property
        def parents(self):
            return [self.key]

    class EmbeddingVariableColumn(fc.EmbeddingColumn):
        """embedding_column over categorical_column_with_embedding: the weights are an EmbeddingVariable."""

        def _old_get_dense_tensor_internal(self, sparse_tensors, weight_collections, trainable):
            column = self.categorical_column
            if weight_collections and ops.GraphKeys.GLOBAL_VARIABLES not in weight_collections:
                weight_collections.append(ops.GraphKeys.GLOBAL_VARIABLES)
            partitioner = tf.compat.v1.fixed_size_partitioner(column.partition_num) if column.partition_num else None
            weights = get_embedding_variable("embedding_weights", self.dimension, initializer=self.initializer,
                                             trainable=self.trainable and trainable, collections=weight_collections,
                                             partitioner=partitioner, ev_option=column.ev_option)
            return safe_embedding_lookup_sparse(weights, sparse_tensors.id_tensor, sparse_tensors.weight_tensor,
                                                combiner=self.combiner, name="%s_weights" % self.name,
                                                max_norm=self.max_norm)

        def get_dense_tensor(self, transformation_cache, state_manager):
            raise EmbeddingVariableError(
                "%s: an embedding column over categorical_column_with_embedding builds its EmbeddingVariable in "
                "tf.feature_column.input_layer (or an Estimator's), not in tf.keras DenseFeatures" % self.name)

    return EmbeddingCategoricalColumn, EmbeddingVariableColumn


def categorical_column_with_embedding(key, dtype=tf.string, partition_num=None, ev_option=None):
    """DeepRec's tf.feature_column.categorical_column_with_embedding: ids of any value (strings hashed to int64)
    for an embedding_column whose weights are an EmbeddingVariable (partition_num parts, if given)."""
    if dtype not in (tf.string, tf.int64, tf.int32):
        raise EmbeddingVariableError("categorical_column_with_embedding(%r): dtype must be tf.string, tf.int64 or "
                                     "tf.int32, got %s" % (key, dtype))
    column_class, _ = _feature_columns()
    return column_class(key, dtype, partition_num, ev_option if ev_option is not None else EmbeddingVariableOption())


def embedding_column_for(stock):
    """tf.feature_column.embedding_column taking DeepRec's arguments (do_fusion: the fused lookup where the
    build's fused_embedding switch puts it; coalesced_scope: not provided) and its EmbeddingVariable columns."""

    if getattr(stock, "embedding_variables", False):  # tf.feature_column and tf.compat.v1's may be one module
        return stock

    def embedding_column(categorical_column, dimension, combiner="mean", initializer=None, ckpt_to_load_from=None,
                         tensor_name_in_ckpt=None, max_norm=None, trainable=True, coalesced_scope=None,
                         do_fusion=False, **kwargs):
        if coalesced_scope is not None:
            raise EmbeddingVariableError("embedding_column(coalesced_scope=...): coalesced embeddings are not "
                                         "provided by this TensorFlow; drop coalesced_scope")
        column_class, variable_column = _feature_columns()
        if not isinstance(categorical_column, column_class):
            return stock(categorical_column, dimension, combiner=combiner, initializer=initializer,
                         ckpt_to_load_from=ckpt_to_load_from, tensor_name_in_ckpt=tensor_name_in_ckpt,
                         max_norm=max_norm, trainable=trainable, **kwargs)
        if ckpt_to_load_from is not None:
            raise EmbeddingVariableError("embedding_column(ckpt_to_load_from=...) over an EmbeddingVariable is not "
                                         "provided; restore the model's checkpoint with tf.train.Saver instead")
        if initializer is None:
            initializer = tf.compat.v1.truncated_normal_initializer(mean=0.0, stddev=1 / dimension ** 0.5)
        return variable_column(categorical_column=categorical_column, dimension=dimension, combiner=combiner,
                               initializer=initializer, ckpt_to_load_from=None, tensor_name_in_ckpt=None,
                               max_norm=max_norm, trainable=trainable, use_safe_embedding_lookup=True)

    embedding_column = functools.wraps(stock)(embedding_column)
    embedding_column.embedding_variables = True
    return embedding_column


# --- DeepRec's features not provided: each says which script flag to drop ----------------------------------

class WorkQueue(object):
    """DeepRec's tf.WorkQueue (work-sharing input across workers) is not provided."""

    def __init__(self, *args, **kwargs):
        raise EmbeddingVariableError("tf.WorkQueue: DeepRec's work queue is not provided by this TensorFlow; read "
                                     "the files with tf.data (shard them per worker). Fix: drop the script's "
                                     "--workqueue flag")


def get_dynamic_dimension_embedding_variable(name, embedding_block_dimension, embedding_block_num, *args, **kwargs):
    """DeepRec's dynamic-dimension EmbeddingVariable (rows of as many blocks as an id's frequency earns) is not
    provided."""
    raise EmbeddingVariableError("get_dynamic_dimension_embedding_variable(%s): DeepRec's dynamic-dimension "
                                 "EmbeddingVariables are not provided by this TensorFlow; use "
                                 "tf.get_embedding_variable with one dimension. Fix: drop the script's --dynamic_ev "
                                 "flag" % (name,))


PARQUET_MESSAGE = ("%s: DeepRec's Parquet reader is not provided by this TensorFlow; read the rows as text with "
                   "tf.data.TextLineDataset and tf.io.decode_csv. Fix: pass the script's --parquet_dataset False")


class ParquetDataset(object):
    """DeepRec's parquet_dataset_ops.ParquetDataset is not provided."""

    def __init__(self, *args, **kwargs):
        raise EmbeddingVariableError(PARQUET_MESSAGE % "ParquetDataset")


def read_parquet(*args, **kwargs):
    """DeepRec's parquet_dataset_ops.read_parquet is not provided."""
    raise EmbeddingVariableError(PARQUET_MESSAGE % "read_parquet")


# DeepRec's modules that TensorFlow lacks, as its scripts import them: their names, refusing as above.
MODULES = {"tensorflow.python.ops.work_queue": {"WorkQueue": WorkQueue},
           "tensorflow.python.data.experimental.ops.parquet_dataset_ops": {"ParquetDataset": ParquetDataset,
                                                                           "read_parquet": read_parquet}}


def get_multihash_variable(name, dims, *args, **kwargs):
    """DeepRec's multi-hash variable (one id's row composed from several smaller tables) is not provided."""
    raise EmbeddingVariableError("get_multihash_variable(%s): DeepRec's multi-hash variables are not provided by this "
                                 "TensorFlow; use tf.get_embedding_variable or tf.get_variable. Fix: drop the "
                                 "script's --multihash flag" % (name,))


def categorical_column_with_adaptive_embedding(key, *args, **kwargs):
    """DeepRec's adaptive embedding (hash buckets plus an EmbeddingVariable for hot ids) is not provided."""
    raise EmbeddingVariableError("categorical_column_with_adaptive_embedding(%r): DeepRec's adaptive embedding is not "
                                 "provided by this TensorFlow; use categorical_column_with_embedding. Fix: drop the "
                                 "script's --adaptive_emb flag" % (key,))


# --- into TensorFlow ------------------------------------------------------------------------------------

def install():
    """Teach TensorFlow's graph-mode machinery EmbeddingVariables: optimizers (their gradients and slots),
    tf.train.Saver's restore, replica_device_setter (on the parameter servers) and the embedding lookups.
    Returns the lookups to publish as tf.nn's, by name. Idempotent; after the build's routing of
    embedding_lookup_sparse (retf's fused lookup), which it wraps."""
    from tensorflow.python.ops import embedding_ops
    from tensorflow.python.training import device_setter, optimizer, saver

    published = ("embedding_lookup", "embedding_lookup_sparse", "safe_embedding_lookup_sparse")
    if getattr(optimizer._get_processor, "embedding_variables", False):
        return {name: getattr(embedding_ops, name) for name in published}
    stock_processor = optimizer._get_processor

    def get_processor(v):
        return _Processor(v) if isinstance(v, EmbeddingVariable) else stock_processor(v)

    get_processor.embedding_variables = True
    optimizer._get_processor = get_processor

    def slot_maker(name, ours):
        stock = getattr(slot_creator, name)

        def make(primary, *args, **kwargs):
            if isinstance(primary, EmbeddingVariable):
                return ours(primary, *args, **kwargs)
            return stock(primary, *args, **kwargs)

        return make

    slot_creator.create_slot = slot_maker("create_slot", create_slot)
    slot_creator.create_slot_with_initializer = slot_maker("create_slot_with_initializer",
                                                           create_slot_with_initializer)
    slot_creator.create_zeros_slot = slot_maker("create_zeros_slot", create_zeros_slot)

    stock_restore = saver.BaseSaverBuilder._AddRestoreOps

    def add_restore_ops(self, filename_tensor, saveables, restore_sequentially, reshape, preferred_shard=-1,
                        name="restore_all"):
        ours = [s for s in saveables if isinstance(s, EmbeddingVariableSaveable)]
        if not ours:
            return stock_restore(self, filename_tensor, saveables, restore_sequentially, reshape, preferred_shard,
                                 name)
        restored = restore_ops(filename_tensor, ours)
        rest = [s for s in saveables if not isinstance(s, EmbeddingVariableSaveable)]
        if rest:
            restored.append(stock_restore(self, filename_tensor, rest, restore_sequentially, reshape,
                                          preferred_shard, name + "_variables"))
        return tf.group(*restored, name=name)

    saver.BaseSaverBuilder._AddRestoreOps = add_restore_ops
    device_setter.STANDARD_PS_OPS = tuple(device_setter.STANDARD_PS_OPS) + ("Retf>EVHandle",)

    stock_lookup = embedding_ops.embedding_lookup
    stock_sparse = embedding_ops.embedding_lookup_sparse
    stock_safe = embedding_ops.safe_embedding_lookup_sparse

    def lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None):
        if is_embedding_variable(params):
            return embedding_lookup(params, ids, name=name, max_norm=max_norm)
        return stock_lookup(params, ids, partition_strategy=partition_strategy, name=name,
                            validate_indices=validate_indices, max_norm=max_norm)

    def sparse_lookup(params, sp_ids, sp_weights, partition_strategy="mod", name=None, combiner=None,
                      max_norm=None, **newer):
        check_newer_keywords(stock_sparse, newer)  # 2.13's allow_fast_lookup: the same rows either way
        if is_embedding_variable(params):
            return embedding_lookup_sparse(params, sp_ids, sp_weights, combiner=combiner, max_norm=max_norm,
                                           name=name)
        return stock_sparse(params, sp_ids, sp_weights, partition_strategy=partition_strategy, name=name,
                            combiner=combiner, max_norm=max_norm, **newer)

    def safe_lookup(embedding_weights, sparse_ids, sparse_weights=None, combiner="mean", default_id=None,
                    name=None, partition_strategy="div", max_norm=None, **newer):
        check_newer_keywords(stock_safe, newer)
        if is_embedding_variable(embedding_weights):
            return safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights, combiner=combiner,
                                                default_id=default_id, name=name, max_norm=max_norm)
        return stock_safe(embedding_weights, sparse_ids, sparse_weights=sparse_weights, combiner=combiner,
                          default_id=default_id, name=name, partition_strategy=partition_strategy,
                          max_norm=max_norm, **newer)

    for name, function, stock in zip(published, (lookup, sparse_lookup, safe_lookup),
                                     (stock_lookup, stock_sparse, stock_safe)):
        setattr(embedding_ops, name, functools.wraps(stock)(function))  # named as the function it serves for
    embedding_ops.fused_safe_embedding_lookup_sparse = fused_safe_embedding_lookup_sparse
    return {name: getattr(embedding_ops, name) for name in published}


def fused_safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None, combiner="mean",
                                       default_id=None, name=None, partition_strategy="div", max_norm=None,
                                       prune=True, blocknums=None, fusion_version="v2"):
    """DeepRec's embedding_ops.fused_safe_embedding_lookup_sparse, which DeepRec defines as
    safe_embedding_lookup_sparse's result in fewer ops: here it is safe_embedding_lookup_sparse, whose lookup is
    retf's fused one where the build's fused_embedding switch routes it. prune=False (DeepRec: ids known valid)
    prunes anyway, the same result for valid ids; blocknums and fusion_version choose among DeepRec's GPU kernels
    and change nothing on the CPU."""
    from tensorflow.python.ops import embedding_ops

    return embedding_ops.safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=sparse_weights,
                                                      combiner=combiner, default_id=default_id, name=name,
                                                      partition_strategy=partition_strategy, max_norm=max_norm)
