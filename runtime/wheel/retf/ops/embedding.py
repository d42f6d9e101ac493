"""The fused embedding lookups, plain and safe, and their gradients: an IndexedSlices over the distinct ids for the
table, a dense vector for the weights."""

import tensorflow as tf
from tensorflow.python.eager import tape  # no public name in TF 2.x

from retf._library import load_library
from retf.ops._common import _handle, _is_resource

EMBEDDING_LOOKUP_SPARSE = "Retf>EmbeddingLookupSparse"
RESOURCE_EMBEDDING_LOOKUP_SPARSE = "Retf>ResourceEmbeddingLookupSparse"
SAFE_EMBEDDING_LOOKUP_SPARSE = "Retf>SafeEmbeddingLookupSparse"
RESOURCE_SAFE_EMBEDDING_LOOKUP_SPARSE = "Retf>ResourceSafeEmbeddingLookupSparse"
_RESOURCE_OPS = (RESOURCE_EMBEDDING_LOOKUP_SPARSE, RESOURCE_SAFE_EMBEDDING_LOOKUP_SPARSE)


def embedding_lookup_sparse(params, ids, segment_ids, weights=None, combiner="mean", name=None):
    """Fused combine of params[ids] per segment: [max(segment_ids) + 1, dim].

    params is a 2-D tensor or a resource variable (read in place, no copy). segment_ids must be
    sorted ascending. weights, when given, is a vector like ids and has params' dtype.
    """
    library = load_library()
    dtype = params.dtype.base_dtype
    if weights is None:
        weights = tf.zeros([0], dtype=dtype)
    name = name or "EmbeddingLookupSparse"  # TF 1.15 refuses the op's name (its ">"), and a served graph keeps it
    if _is_resource(params):
        if isinstance(params, tf.Variable):
            tape.variable_accessed(params)  # what Variable.sparse_read does, so GradientTape watches it
        return library.retf_resource_embedding_lookup_sparse(
            _handle(params), ids, segment_ids, weights, combiner=combiner, name=name)
    return library.retf_embedding_lookup_sparse(params, ids, segment_ids, weights, combiner=combiner, name=name)


def safe_embedding_lookup_sparse(params, ids, rows, num_rows, weights=None, combiner="mean", name=None):
    """Fused combine of params[ids] per row, leaving out ids < 0 and, weighted and combined by mean or sqrtn,
    weights <= 0: [num_rows, dim], a row with no entry left zero.

    rows[j] (in [0, num_rows), in any order) is entry j's row; the rest as embedding_lookup_sparse.
    """
    library = load_library()
    dtype = params.dtype.base_dtype
    if weights is None:
        weights = tf.zeros([0], dtype=dtype)
    num_rows = tf.cast(num_rows, tf.int64)
    name = name or "SafeEmbeddingLookupSparse"
    if _is_resource(params):
        if isinstance(params, tf.Variable):
            tape.variable_accessed(params)
        return library.retf_resource_safe_embedding_lookup_sparse(
            _handle(params), ids, rows, weights, num_rows, combiner=combiner, name=name)
    return library.retf_safe_embedding_lookup_sparse(params, ids, rows, weights, num_rows, combiner=combiner,
                                                     name=name)


def embedding_lookup_sparse_grad(grad, ids, segment_ids, weights=None, combiner="mean", name=None):
    """The params gradient of embedding_lookup_sparse as (unique_ids, values): one row per distinct id."""
    if weights is None:
        weights = tf.zeros([0], dtype=grad.dtype)
    return load_library().retf_embedding_lookup_sparse_grad(grad, ids, segment_ids, weights, combiner=combiner,
                                                            name=name)


def _params_rows(op, ids):
    if op.type in _RESOURCE_OPS:
        return tf.raw_ops.ResourceGather(resource=op.inputs[0], indices=ids, dtype=op.get_attr("T"))
    return tf.gather(op.inputs[0], ids)


def _weights_grad(op, grad, combiner):
    """d output / d weights, written with stock ops; only built when someone asks for it."""
    ids, segment_ids, weights = op.inputs[1], op.inputs[2], op.inputs[3]
    rows = _params_rows(op, ids)
    grad_rows = tf.gather(grad, segment_ids)
    if combiner == "sum":
        return tf.reduce_sum(grad_rows * rows, axis=1)
    output_rows = tf.gather(op.outputs[0], segment_ids)
    if combiner == "mean":
        total = tf.gather(tf.math.segment_sum(weights, segment_ids), segment_ids)
        return tf.math.divide_no_nan(tf.reduce_sum(grad_rows * (rows - output_rows), axis=1), total)
    norm = tf.gather(tf.sqrt(tf.math.segment_sum(weights * weights, segment_ids)), segment_ids)
    scaled = rows - output_rows * tf.expand_dims(tf.math.divide_no_nan(weights, norm), 1)
    return tf.math.divide_no_nan(tf.reduce_sum(grad_rows * scaled, axis=1), norm)


def _params_shape(op):
    if op.type in _RESOURCE_OPS:
        return tf.raw_ops.VariableShape(input=op.inputs[0], out_type=tf.int64)
    return tf.shape(op.inputs[0], out_type=tf.int64)


def _embedding_lookup_sparse_gradient(op, grad):
    """IndexedSlices over the unique ids for params; a dense vector for weights when they were given."""
    ids, segment_ids, weights = op.inputs[1], op.inputs[2], op.inputs[3]
    combiner = op.get_attr("combiner").decode("ascii")
    skipped = set(getattr(op, "skip_input_indices", None) or ())  # eager: inputs nobody differentiates
    params_grad = None
    if 0 not in skipped:
        unique_ids, values = embedding_lookup_sparse_grad(grad, ids, segment_ids, weights, combiner=combiner)
        params_grad = tf.IndexedSlices(values, unique_ids, _params_shape(op))
    weights_grad = None
    num_weights = tf.compat.dimension_value(weights.shape[0])
    if 3 not in skipped and num_weights != 0:  # an empty weights vector means unweighted
        if num_weights is None:
            weights_grad = tf.cond(tf.size(weights) > 0, lambda: _weights_grad(op, grad, combiner),
                                   lambda: tf.zeros_like(weights))
        else:
            weights_grad = _weights_grad(op, grad, combiner)
    return [params_grad, None, None, weights_grad]


def _safe_weights_grad(op, grad, combiner):
    """d output / d weights of the safe lookup, written with stock ops: zero for the entries it leaves out, as
    TensorFlow's safe lookup gives them none."""
    ids, rows, weights = op.inputs[1], op.inputs[2], op.inputs[3]
    kept = ids >= 0
    if combiner != "sum":
        kept = tf.logical_and(kept, weights > 0)
    zeros = tf.zeros_like(weights)
    kept_weights = tf.where(kept, weights, zeros)
    table_rows = _params_rows(op, tf.where(kept, ids, tf.zeros_like(ids)))
    grad_rows = tf.gather(grad, rows)
    num_rows = tf.shape(grad, out_type=rows.dtype)[0]
    if combiner == "sum":
        return tf.where(kept, tf.reduce_sum(grad_rows * table_rows, axis=1), zeros)
    output_rows = tf.gather(op.outputs[0], rows)
    if combiner == "mean":
        total = tf.gather(tf.math.unsorted_segment_sum(kept_weights, rows, num_rows), rows)
        scaled = table_rows - output_rows
    else:
        total = tf.gather(tf.sqrt(tf.math.unsorted_segment_sum(kept_weights * kept_weights, rows, num_rows)), rows)
        scaled = table_rows - output_rows * tf.expand_dims(tf.math.divide_no_nan(kept_weights, total), 1)
    return tf.where(kept, tf.math.divide_no_nan(tf.reduce_sum(grad_rows * scaled, axis=1), total), zeros)


def _safe_embedding_lookup_sparse_gradient(op, grad):
    """IndexedSlices over the distinct kept ids (and id 0 where a row kept none) for params; a dense vector for
    weights when they were given."""
    ids, rows, weights = op.inputs[1], op.inputs[2], op.inputs[3]
    combiner = op.get_attr("combiner").decode("ascii")
    skipped = set(getattr(op, "skip_input_indices", None) or ())
    params_grad = None
    if 0 not in skipped:
        unique_ids, values = load_library().retf_safe_embedding_lookup_sparse_grad(grad, ids, rows, weights,
                                                                                   combiner=combiner)
        params_grad = tf.IndexedSlices(values, unique_ids, _params_shape(op))
    weights_grad = None
    num_weights = tf.compat.dimension_value(weights.shape[0])
    if 3 not in skipped and num_weights != 0:
        if num_weights is None:
            weights_grad = tf.cond(tf.size(weights) > 0, lambda: _safe_weights_grad(op, grad, combiner),
                                   lambda: tf.zeros_like(weights))
        else:
            weights_grad = _safe_weights_grad(op, grad, combiner)
    return [params_grad, None, None, weights_grad, None]


tf.RegisterGradient(EMBEDDING_LOOKUP_SPARSE)(_embedding_lookup_sparse_gradient)
tf.RegisterGradient(RESOURCE_EMBEDDING_LOOKUP_SPARSE)(_embedding_lookup_sparse_gradient)
tf.RegisterGradient(SAFE_EMBEDDING_LOOKUP_SPARSE)(_safe_embedding_lookup_sparse_gradient)
tf.RegisterGradient(RESOURCE_SAFE_EMBEDDING_LOOKUP_SPARSE)(_safe_embedding_lookup_sparse_gradient)
tf.no_gradient("Retf>EmbeddingLookupSparseGrad")
tf.no_gradient("Retf>SafeEmbeddingLookupSparseGrad")
