"""Drop-in tf.compat.v1.nn.embedding_lookup_sparse and safe_embedding_lookup_sparse, backed by the fused ops where
they apply."""

import tensorflow as tf
from tensorflow.python.framework import ops as framework_ops
from tensorflow.python.ops import embedding_ops
from tensorflow.python.ops.variables import PartitionedVariable  # no public name in TF 2.x
from tensorflow.python.util import tf_inspect

from retf import ops

# TensorFlow's own function, for the cases the fused op does not serve: a 1.x API wheel may route the
# public name (and the one safe_embedding_lookup_sparse calls) to embedding_lookup_sparse below.
_STOCK_LOOKUP = embedding_ops.embedding_lookup_sparse
_STOCK_SAFE_LOOKUP = embedding_ops.safe_embedding_lookup_sparse

_FLOATS = (tf.float32, tf.float64)
_INDEX_TYPES = (tf.int32, tf.int64)


def check_newer_keywords(function, keywords):
    """Refuse, as Python refuses an unknown keyword, any of keywords that this TensorFlow's function does not take.

    The routed lookups keep TF 1.x's signatures and take what newer TensorFlows' functions add to them (2.13's
    allow_fast_lookup, which its safe_embedding_lookup_sparse passes on): a choice of how to look up, with the same
    values either way, which retf's lookups serve as they are and TensorFlow's own function receives as given."""
    spec = tf_inspect.getfullargspec(function)
    while spec.varkw is not None and getattr(function, "__wrapped__", None) is not None:  # a routed function
        function = function.__wrapped__
        spec = tf_inspect.getfullargspec(function)
    if spec.varkw is not None:
        return
    taken = set(spec.args) | set(spec.kwonlyargs)
    for keyword in sorted(keywords):
        if keyword not in taken:
            raise TypeError("{}() got an unexpected keyword argument '{}'".format(function.__name__, keyword))


def _single_table(params):
    """The one 2-D float table in params, or None when the fused op cannot serve it."""
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            return None
        params = params[0]
    if isinstance(params, PartitionedVariable):
        return None
    if not isinstance(params, tf.Variable):
        params = tf.convert_to_tensor(params)
    if params.dtype.base_dtype not in _FLOATS or params.shape.rank != 2:
        return None
    return params


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None, combiner=None,
                            max_norm=None, **newer):
    """Same results as tf.compat.v1.nn.embedding_lookup_sparse; fused for one 2-D table without max_norm.

    The gradient with respect to params is an IndexedSlices over the distinct ids, which
    retf.train.LazyAdamOptimizer and retf.keras.optimizers.LazyAdam apply without a dense table.
    Other cases (several shards, max_norm, other dtypes or ranks) go to TensorFlow's own function, with the
    keywords newer TensorFlows take beyond these (check_newer_keywords).
    """
    check_newer_keywords(_STOCK_LOOKUP, newer)
    if combiner is None:
        combiner = "mean"
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    if not isinstance(sp_ids, tf.SparseTensor):
        raise TypeError("sp_ids must be SparseTensor")
    if sp_weights is not None and not isinstance(sp_weights, tf.SparseTensor):
        raise TypeError("sp_weights must be either None or SparseTensor")
    table = _single_table(params) if max_norm is None else None
    if table is None or sp_ids.values.dtype not in _INDEX_TYPES:
        return _STOCK_LOOKUP(params, sp_ids, sp_weights, partition_strategy=partition_strategy, name=name,
                             combiner=combiner, max_norm=max_norm, **newer)
    with tf.name_scope(name or "embedding_lookup_sparse"):
        weights = None
        if sp_weights is not None:
            sp_ids.values.shape.assert_is_compatible_with(sp_weights.values.shape)
            weights = tf.cast(sp_weights.values, table.dtype.base_dtype)
        segment_ids = sp_ids.indices[:, 0]
        # Where the table lives, as TensorFlow's gather does: on a parameter server only the combined
        # rows cross the network, never the table.
        with framework_ops.colocate_with(table):
            return ops.embedding_lookup_sparse(table, sp_ids.values, segment_ids, weights, combiner=combiner)


embedding_lookup_sparse.__wrapped__ = _STOCK_LOOKUP  # the function it serves for, whose keywords it takes


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None, combiner="mean",
                                 default_id=None, name=None, partition_strategy="div", max_norm=None, **newer):
    """Same results as tf.compat.v1.nn.safe_embedding_lookup_sparse; one fused op for one 2-D table without
    default_id or max_norm, sparse ids of rank 2 or more.

    TensorFlow's function prunes the ids < 0 (and, unless combining by sum, the weights <= 0), fills each empty row
    with id 0, looks up, and zeroes the filled rows again: a dozen ops around the lookup, and their gradients. The
    fused op does all of it in one pass over the ids, and its gradient names the same rows (id 0, with a zero
    gradient, where a row was empty), so sparse optimizers update what they update after TensorFlow's.
    Other cases go to TensorFlow's own function, whose lookup is embedding_lookup_sparse above where routed.
    """
    check_newer_keywords(_STOCK_SAFE_LOOKUP, newer)
    table = _safe_table(embedding_weights, sparse_weights) if default_id is None and max_norm is None else None
    if combiner is None:
        combiner = "mean"
    rank = _sparse_rank(sparse_ids)
    if table is None or combiner not in ("mean", "sqrtn", "sum") or rank is None or rank < 2 \
            or sparse_ids.values.dtype not in _INDEX_TYPES:
        return _STOCK_SAFE_LOOKUP(embedding_weights, sparse_ids, sparse_weights=sparse_weights, combiner=combiner,
                                  default_id=default_id, name=name, partition_strategy=partition_strategy,
                                  max_norm=max_norm, **newer)
    with tf.name_scope(name or "embedding_lookup"):
        original_shape = sparse_ids.dense_shape
        if rank > 2:  # rows numbered over every dimension but the last, as TensorFlow's function reshapes them
            sparse_ids = tf.sparse.reshape(sparse_ids, [tf.reduce_prod(original_shape[:-1]), original_shape[-1]])
        weights = None
        if sparse_weights is not None:
            sparse_ids.values.shape.assert_is_compatible_with(sparse_weights.values.shape)
            weights = sparse_weights.values
        with framework_ops.colocate_with(table):
            result = ops.safe_embedding_lookup_sparse(table, sparse_ids.values, sparse_ids.indices[:, 0],
                                                      sparse_ids.dense_shape[0], weights, combiner=combiner)
        if rank == 2:
            return result
        final = tf.reshape(result, tf.concat([tf.cast(original_shape[:-1], tf.int32), tf.shape(result)[1:]], 0))
        final.set_shape(tf.TensorShape([None] * (rank - 1)).concatenate(result.shape[1:]))
        return final


safe_embedding_lookup_sparse.__wrapped__ = _STOCK_SAFE_LOOKUP


def _safe_table(embedding_weights, sparse_weights):
    """The one table the fused safe lookup serves, or None: TensorFlow's function takes a PartitionedVariable's
    parts, and a table of the weights' dtype only."""
    if isinstance(embedding_weights, PartitionedVariable):
        embedding_weights = list(embedding_weights)
    if embedding_weights is None or isinstance(embedding_weights, (list, tuple)) and len(embedding_weights) != 1:
        return None
    if sparse_weights is not None and not isinstance(sparse_weights, tf.SparseTensor):
        return None
    table = _single_table(embedding_weights)
    if table is None or sparse_weights is not None and sparse_weights.dtype != table.dtype.base_dtype:
        return None
    return table


def _sparse_rank(sparse_ids):
    """The static rank of sparse_ids, a SparseTensor, or None."""
    if not isinstance(sparse_ids, tf.SparseTensor):
        return None
    return tf.compat.dimension_value(sparse_ids.dense_shape.shape[0])
