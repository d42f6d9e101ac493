"""The raw retf ops, and the gradient of the fused embedding lookup.

Each function loads the op library on first use. Variables may be given as resource variables
(or their handles) or, in graph mode, as reference variables.
"""

import weakref

import tensorflow as tf
from tensorflow.python.eager import tape  # no public name in TF 2.x

from retf._library import load_library

EMBEDDING_LOOKUP_SPARSE = "Retf>EmbeddingLookupSparse"
RESOURCE_EMBEDDING_LOOKUP_SPARSE = "Retf>ResourceEmbeddingLookupSparse"


def _is_resource(value):
    return getattr(value, "dtype", None) == tf.resource or hasattr(value, "handle")


def _handle(value):
    return value.handle if hasattr(value, "handle") else value


def _apply(op_name, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices, use_locking,
           name):
    """Runs op_name on resource variables (their handles), or its _ref form on reference variables."""
    library = load_library()
    if _is_resource(var):
        return getattr(library, op_name)(
            _handle(var), _handle(m), _handle(v), beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
            indices, use_locking=use_locking, name=name)
    return getattr(library, op_name + "_ref")(
        var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
        use_locking=use_locking, name=name)


def sparse_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                      use_locking=False, name=None):
    """Lazy Adam on the rows of var, m and v named by indices; duplicate indices are summed.

    Per touched row: m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g^2;
    var -= lr * sqrt(1-beta2_power)/(1-beta1_power) * m/(sqrt(v)+epsilon).
    Returns the update op (resource variables) or var's new value (reference variables).
    """
    return _apply("retf_sparse_apply_adam", var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
                  indices, use_locking, name)


def adam_decay_untouched(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, indices, use_locking=False,
                         name=None):
    """The rows of var, m and v that indices does not name, as sparse_apply_adam_dense updates them: m = beta1*m;
    v = beta2*v; var -= lr * sqrt(1-beta2_power)/(1-beta1_power) * m/(sqrt(v)+epsilon).

    sparse_apply_adam_async on the same indices and gradient afterwards completes sparse_apply_adam_dense's
    update, bit for bit; this half needs no gradient, so it can run while the gradient is computed.
    Returns the op (resource variables) or var's new value (reference variables).
    """
    library = load_library()
    dtype = getattr(var, "dtype", tf.resource).base_dtype
    if dtype != tf.resource:  # no gradient to set the scalars' dtype: the variable's
        beta1_power, beta2_power, lr, beta1, beta2, epsilon = (
            tf.cast(tf.convert_to_tensor(value, dtype_hint=dtype), dtype)  # a Python float exactly in dtype
            for value in (beta1_power, beta2_power, lr, beta1, beta2, epsilon))
    if _is_resource(var):
        return library.retf_adam_decay_untouched(
            _handle(var), _handle(m), _handle(v), beta1_power, beta2_power, lr, beta1, beta2, epsilon, indices,
            use_locking=use_locking, name=name)
    return library.retf_adam_decay_untouched_ref(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                                                 indices, use_locking=use_locking, name=name)


def sparse_apply_adam_async(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                            use_locking=False, name=None):
    """DeepRec's AdamAsync sparse rule: lazy Adam with lr * sqrt(1-beta2_power)/(1-beta1_power) rounded left to right.

    Duplicate indices are summed. The beta powers are values here; the caller advances its own.
    Returns the update op (resource variables) or var's new value (reference variables).
    """
    return _apply("retf_sparse_apply_adam_async", var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                  grad, indices, use_locking, name)


def _run(op_name, variables, inputs, name, **attrs):
    """op_name on resource variables (their handles) or its _ref form on reference variables, then inputs."""
    library = load_library()
    if _is_resource(variables[0]):
        return getattr(library, op_name)(*([_handle(v) for v in variables] + list(inputs)), name=name, **attrs)
    return getattr(library, op_name + "_ref")(*(list(variables) + list(inputs)), name=name, **attrs)


def sparse_apply_adagrad(var, accum, lr, grad, indices, epsilon=None, update_slots=True, use_locking=False, name=None):
    """TensorFlow's sparse Adagrad after duplicate summing, in one fused op.

    Duplicate indices are summed first; per named row accum += g^2 (when update_slots), then
    var -= lr*g*rsqrt(accum) (SparseApplyAdagrad), or with epsilon var -= lr*g/(sqrt(accum)+epsilon)
    (SparseApplyAdagradV2). Returns the update op (resource variables) or var's new value (reference).
    """
    if epsilon is None:
        return _run("retf_sparse_apply_adagrad", [var, accum], [lr, grad, indices], name,
                    update_slots=update_slots, use_locking=use_locking)
    return _run("retf_sparse_apply_adagrad_v2", [var, accum], [lr, epsilon, grad, indices], name,
                update_slots=update_slots, use_locking=use_locking)


def sparse_apply_adagrad_decay(var, accum, accum_decay_power, lr, decay_step, decay_rate, decay_baseline,
                               global_step, grad, indices, use_locking=False, name=None):
    """DeepRec's sparse AdagradDecay in one fused op; duplicate indices are summed first.

    Per named row r: when global_step // decay_step > accum_decay_power[r] (its element r),
    accum = max(accum*decay_rate, decay_baseline) and the count goes up by one; then
    accum += g^2 and var -= lr*g*rsqrt(accum). decay_step and global_step share accum_decay_power's
    integer dtype.
    """
    return _run("retf_sparse_apply_adagrad_decay", [var, accum, accum_decay_power],
                [lr, decay_step, decay_rate, decay_baseline, global_step, grad, indices], name,
                use_locking=use_locking)


def sparse_apply_ftrl(var, accum, linear, grad, indices, lr, l1, l2, lr_power, l2_shrinkage=None,
                      use_locking=False, name=None):
    """TensorFlow's sparse FTRL (SparseApplyFtrl, or SparseApplyFtrlV2 with l2_shrinkage) after duplicate summing.

    Duplicate indices are summed first; then each named row once, with TensorFlow's formulas and
    roundings (multiply_linear_by_lr false, as tf.compat.v1.train.FtrlOptimizer runs them).
    """
    if l2_shrinkage is None:
        return _run("retf_sparse_apply_ftrl", [var, accum, linear], [grad, indices, lr, l1, l2, lr_power], name,
                    use_locking=use_locking)
    return _run("retf_sparse_apply_ftrl_v2", [var, accum, linear],
                [grad, indices, lr, l1, l2, l2_shrinkage, lr_power], name, use_locking=use_locking)


def sparse_apply_adam_dense(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                            use_locking=False, name=None):
    """TensorFlow's dense Adam for a sparse gradient in one pass; duplicate indices are summed.

    What tf.compat.v1.train.AdamOptimizer does with an IndexedSlices gradient: with g the summed
    gradient of each row (zero for rows indices does not name), for every row
    m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g^2;
    var -= lr*sqrt(1-beta2_power)/(1-beta1_power) * m/(sqrt(v)+epsilon).
    Returns the update op (resource variables) or var's new value (reference variables).
    """
    return _apply("retf_sparse_apply_adam_dense", var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                  grad, indices, use_locking, name)


def embedding_lookup_sparse(params, ids, segment_ids, weights=None, combiner="mean", name=None):
    """Fused combine of params[ids] per segment: [max(segment_ids) + 1, dim].

    params is a 2-D tensor or a resource variable (read in place, no copy). segment_ids must be
    sorted ascending. weights, when given, is a vector like ids and has params' dtype.
    """
    library = load_library()
    dtype = params.dtype.base_dtype
    if weights is None:
        weights = tf.zeros([0], dtype=dtype)
    if _is_resource(params):
        if isinstance(params, tf.Variable):
            tape.variable_accessed(params)  # what Variable.sparse_read does, so GradientTape watches it
        return library.retf_resource_embedding_lookup_sparse(
            _handle(params), ids, segment_ids, weights, combiner=combiner, name=name)
    return library.retf_embedding_lookup_sparse(params, ids, segment_ids, weights, combiner=combiner, name=name)


def embedding_lookup_sparse_grad(grad, ids, segment_ids, weights=None, combiner="mean", name=None):
    """The params gradient of embedding_lookup_sparse as (unique_ids, values): one row per distinct id."""
    if weights is None:
        weights = tf.zeros([0], dtype=grad.dtype)
    return load_library().retf_embedding_lookup_sparse_grad(grad, ids, segment_ids, weights, combiner=combiner,
                                                            name=name)


def _params_rows(op, ids):
    if op.type == RESOURCE_EMBEDDING_LOOKUP_SPARSE:
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
    if op.type == RESOURCE_EMBEDDING_LOOKUP_SPARSE:
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


tf.RegisterGradient(EMBEDDING_LOOKUP_SPARSE)(_embedding_lookup_sparse_gradient)
tf.RegisterGradient(RESOURCE_EMBEDDING_LOOKUP_SPARSE)(_embedding_lookup_sparse_gradient)
tf.no_gradient("Retf>EmbeddingLookupSparseGrad")
tf.no_gradient("Retf>AdamDecayUntouched")
tf.no_gradient("Retf>AdamDecayUntouchedRef")
for _op_type in ("SparseApplyAdam", "SparseApplyAdamDense", "SparseApplyAdamAsync", "SparseApplyAdagrad",
                 "SparseApplyAdagradV2", "SparseApplyAdagradDecay", "SparseApplyFtrl", "SparseApplyFtrlV2"):
    tf.no_gradient("Retf>" + _op_type)
    tf.no_gradient("Retf>" + _op_type + "Ref")


def transposed_matmul(a, b, name=None):
    """a^T b for matrices a [K, M] and b [K, N], as tf.matmul(a, b, transpose_a=True) computes it.

    Made for a dense layer's weight gradient (a the layer's input, b its output's gradient: K the
    batch, long; M x N the weight, small), where TensorFlow's product runs mostly on one thread: each
    chunk of K's rows is summed on one thread, and the chunks' sums are added in order, so the result
    does not depend on the number of threads. float32 and float64.
    """
    return load_library().retf_transposed_mat_mul(a, b, name=name)


@tf.RegisterGradient("Retf>TransposedMatMul")
def _transposed_matmul_gradient(op, grad):
    """The gradients of a^T b, as MatMul's with transpose_a: a routed weight gradient has second-order
    gradients too (a gradient penalty, a Hessian-vector product)."""
    a, b = op.inputs
    return tf.linalg.matmul(b, grad, transpose_b=True), tf.linalg.matmul(a, grad)


# The weights (at most this many values) whose MatMul gradient routed_matmul_gradient takes from
# transposed_matmul: up to 128 x 256 retf's product won or tied in every run of
# bench/bench_transposed_matmul.py (1.0-3.3x); larger weights won or lost by batch and run (0.7-1.3x),
# so they keep TensorFlow's product (ops/README.md).
WEIGHT_GRADIENT_MAX_VALUES = 32768


def _weight_gradient_applies(op):
    """Whether op, a MatMul, is a float32 a @ w with w's shape known and small, on a CPU (or unplaced)."""
    if op.get_attr("transpose_a") or op.get_attr("transpose_b") or op.get_attr("T") != tf.float32:
        return False
    if "GPU" in getattr(op, "device", "").upper():  # a tape's recorded op (eager) has no device
        return False
    if getattr(op, "skip_input_indices", None):  # a tape asking for one input's gradient only: TensorFlow's
        return False
    weight = op.inputs[1].shape
    if weight.rank != 2 or not weight.is_fully_defined():
        return False
    return int(weight[0]) * int(weight[1]) <= WEIGHT_GRADIENT_MAX_VALUES


def routed_matmul_gradient(original):
    """The gradient function for MatMul: original's, except that a small weight's gradient comes from
    transposed_matmul (the input's gradient stays TensorFlow's MatMul)."""

    def gradient(op, grad):
        if not _weight_gradient_applies(op):
            return original(op, grad)
        a, w = op.inputs
        grad_a = tf.linalg.matmul(grad, w, transpose_b=True)
        return grad_a, transposed_matmul(a, grad)

    return _route(gradient, original, "weights")


def _route(gradient, original, route):
    """gradient, marked as the routing named route around original (which it falls back to)."""
    gradient.original = original
    gradient.route = route
    return gradient


def _routed(function, route):
    """Whether function, a registered gradient function, is or wraps the routing named route."""
    while function is not None:
        if getattr(function, "route", None) == route:
            return True
        function = getattr(function, "original", None)
    return False


def route_weight_gradients():
    """Make every MatMul gradient built from now on in this process take small weights' gradients from
    transposed_matmul. Idempotent; returns whether it changed the registry."""
    from tensorflow.python.framework import ops as framework_ops  # the gradient registry has no public name
    entry = framework_ops._gradient_registry._registry["MatMul"]
    if _routed(entry["type"], "weights"):
        return False
    entry["type"] = routed_matmul_gradient(entry["type"])
    return True


PAIR_CONCAT_GRAD = "Retf>PairConcatGrad"


def pair_concat_grad(grad, x, y, pieces, name=None):
    """The gradient of tf.concat(parts, axis=-1), where x and y share one shape and each part is one of
    x, y, x - y, y - x, x * y, named by pieces ("x", "y", "x-y", "y-x", "x*y"; x and y once each).

    Returns (grad_x, grad_y, piece_grads): grad_x and grad_y are x's and y's whole gradients through the
    concat and its differences and products, each the direct part's slice first, then the other parts in
    piece order; piece_grads are the concat gradient's slices, one per part (computed only where used).
    """
    return load_library().retf_pair_concat_grad(grad, x, y, pieces=list(pieces), N=len(pieces), name=name)


@tf.RegisterGradient(PAIR_CONCAT_GRAD)
def _pair_concat_grad_gradient(op, grad_grad_x, grad_grad_y, *grad_piece_grads):
    """The gradients of pair_concat_grad (second-order gradients through DIN's activation unit): linear in
    grad, and x's and y's through the products' parts."""
    grad, x, y = op.inputs
    pieces = [piece.decode("ascii") for piece in op.get_attr("pieces")]
    zeros = tf.zeros_like(x)
    ggx = zeros if grad_grad_x is None else grad_grad_x
    ggy = zeros if grad_grad_y is None else grad_grad_y
    slices = tf.split(grad, len(pieces), axis=-1) if any(piece == "x*y" for piece in pieces) else None
    parts, grad_x, grad_y = [], zeros, zeros
    for i, piece in enumerate(pieces):
        part = {"x": ggx, "y": ggy, "x-y": ggx - ggy, "y-x": ggy - ggx}.get(piece)
        if piece == "x*y":
            part = ggx * y + ggy * x
            grad_x += ggy * slices[i]
            grad_y += ggx * slices[i]
        if grad_piece_grads[i] is not None:
            part += grad_piece_grads[i]
        parts.append(part)
    return tf.concat(parts, axis=-1), grad_x, grad_y


_PIECE_OPS = {"Sub": "-", "Mul": "*"}
_MAX_IDENTITIES = 8


def _pair_pieces(op, grad):
    """The pieces of op, a ConcatV2 along its last axis of x, y and differences or products of x and y
    (DIN's activation unit: [q, k, q - k, q * k]), and x and y; None for any other concat."""
    if op.type != "ConcatV2" or getattr(op, "skip_input_indices", None) or not isinstance(grad, tf.Tensor):
        return None
    if "GPU" in getattr(op, "device", "").upper() or op.get_attr("T") not in (tf.float32, tf.float64):
        return None
    values = list(op.inputs[:-1])
    try:
        producers = [value.op for value in values]  # a tape's recorded op (eager) holds values only
        axis = tf.get_static_value(op.inputs[-1])
    except AttributeError:
        return None
    rank = op.outputs[0].shape.rank
    if len(values) < 3 or axis is None or rank is None or int(axis) not in (-1, rank - 1):
        return None
    widths = {tf.compat.dimension_value(value.shape[-1]) for value in values}
    if len(widths) != 1 or None in widths:
        return None
    names = [value.name for value in values]

    def derived(value, producer):
        return (producer.type in _PIECE_OPS and names.count(value.name) == 1 and len(value.consumers()) == 1
                and all(operand.name in names for operand in producer.inputs))

    kinds = [derived(value, producer) for value, producer in zip(values, producers)]
    direct = [value for value, kind in zip(values, kinds) if not kind]
    if len(direct) != 2 or direct[0].name == direct[1].name:
        return None
    x, y = direct
    pieces = []
    for value, producer, kind in zip(values, producers, kinds):
        if not kind:
            pieces.append("x" if value is x else "y")
            continue
        operands = [operand.name for operand in producer.inputs]
        if sorted(operands) != sorted([x.name, y.name]):
            return None
        if producer.type == "Mul":
            pieces.append("x*y")
        else:
            pieces.append("x-y" if operands[0] == x.name else "y-x")
    return x, y, pieces


PAIR_DENSE_INPUT_GRAD = "Retf>PairDenseInputGrad"
# Ops that only read a tensor's shape: a concat they read still has one consumer of its values.
_SHAPE_OPS = ("Shape", "ShapeN", "Rank", "Size")
# Per graph, per Retf>PairDenseInputGrad op: the names of the concat and of grad_x and grad_y, which
# routed_pair_dense_gradient computed for the concat's own gradient to hand on, and the pieces. Names, not
# tensors: a tensor holds its graph, which would then outlive its last user here.
_PAIR_DENSE_GRADIENTS = weakref.WeakKeyDictionary()


def pair_dense_input_grad(grad, w, like, num_pieces, name=None):
    """The input gradient of a dense layer over tf.concat(pieces, -1), num_pieces pieces of like's shape
    [..., D]: (input_grad, piece_grads), input_grad = grad w^T ([rows, num_pieces * D]) and piece_grads[i] =
    grad w_i^T (like's shape) for w_i the i-th D rows of w. Each is computed only where a consumer of it runs.
    """
    return load_library().retf_pair_dense_input_grad(grad, w, like, P=num_pieces, name=name)


@tf.RegisterGradient(PAIR_DENSE_INPUT_GRAD)
def _pair_dense_input_grad_gradient(op, grad_input_grad, *grad_piece_grads):
    """The gradients of pair_dense_input_grad, bilinear in grad and w (second-order gradients through the
    activation unit's first layer)."""
    grad, w, like = op.inputs
    blocks = tf.split(w, op.get_attr("P"), axis=0)
    d = tf.shape(like)[-1]
    grad_grad = tf.zeros_like(grad)
    grad_blocks = [tf.zeros_like(block) for block in blocks]
    if grad_input_grad is not None:
        grad_grad += tf.linalg.matmul(grad_input_grad, w)
        grad_blocks = tf.split(tf.linalg.matmul(grad_input_grad, grad, transpose_a=True), len(blocks), axis=0)
    for i, upstream in enumerate(grad_piece_grads):
        if upstream is not None:
            upstream = tf.reshape(upstream, [-1, d])
            grad_grad += tf.linalg.matmul(upstream, blocks[i])
            grad_blocks[i] += tf.linalg.matmul(upstream, grad, transpose_a=True)
    return grad_grad, tf.concat(grad_blocks, axis=0), None


REPEATED_PAIR_GRAD = "Retf>RepeatedPairGrad"


def repeated_pair_grad(parts, query, y, grad, w_x, sums, name=None):
    """The operands' gradients of a dense layer over a pair concat whose x repeats each row of query [B, D]
    over y's R = B x T rows (DIN's query against each step): parts = grad [w_y; w_p]^T [R, 2 x D], grad
    [R, units] the layer's output gradient, w_x [D, units] the sum of w's blocks that x's pieces take, sums
    [B, units] grad summed over each query's steps. Returns (grad_y, query_grad, grad_x): y's gradient,
    the query's whole gradient and x's own per step, each computed only where a consumer of it runs."""
    return load_library().retf_repeated_pair_grad(parts, query, y, grad, w_x, sums, name=name)


@tf.RegisterGradient(REPEATED_PAIR_GRAD)
def _repeated_pair_grad_gradient(op, grad_grad_y, grad_query_grad, grad_grad_x):
    """The gradients of repeated_pair_grad, bilinear in (parts, query), (parts, y), (grad, w_x) and (sums,
    w_x): second-order gradients through the activation unit's first layer."""
    parts, query, y, grad, w_x, sums = op.inputs
    d = tf.shape(query)[1]
    part_y, part_product = tf.split(parts, 2, axis=1)
    y_rows = tf.reshape(y, tf.shape(part_y))

    def repeated(value):  # [B, D] -> each row over its query's steps, [R, D]
        steps = tf.shape(part_y)[0] // tf.maximum(tf.shape(value)[0], 1)
        return tf.reshape(tf.tile(tf.expand_dims(value, 1), tf.stack([1, steps, 1])), [-1, d])

    def summed(value):  # [R, D] -> summed over each query's steps, [B, D]
        return tf.reduce_sum(tf.reshape(value, tf.stack([tf.shape(query)[0], -1, d])), axis=1)

    ggy = tf.zeros_like(part_y) if grad_grad_y is None else tf.reshape(grad_grad_y, tf.shape(part_y))
    ggx = tf.zeros_like(part_y) if grad_grad_x is None else tf.reshape(grad_grad_x, tf.shape(part_y))
    ggq = tf.zeros_like(query) if grad_query_grad is None else grad_query_grad
    per_step = repeated(ggq) + ggx  # what reaches each step through y's products
    grad_parts = tf.concat([ggy, ggy * repeated(query) + per_step * y_rows], axis=1)
    grad_w_x = (tf.linalg.matmul(ggx, grad, transpose_a=True) + tf.linalg.matmul(ggq, sums, transpose_a=True))
    return (grad_parts, summed(ggy * part_product), tf.reshape(per_step * part_product, tf.shape(y)),
            tf.linalg.matmul(ggx, w_x), grad_w_x, tf.linalg.matmul(ggq, w_x))


def _data_consumers(value):
    return [op for op in value.consumers() if op.type not in _SHAPE_OPS]


def _pair_dense_pieces(op):
    """For op, a MatMul a @ w whose a is a concat of pair pieces (_pair_pieces) seen through reshapes,
    identities and identity transposes (tf.layers.dense's tensordot on a sequence), each the only reader of
    the one before: (the concat's op, x, y, pieces); None otherwise."""
    if op.get_attr("transpose_a") or op.get_attr("transpose_b") or op.get_attr("T") not in (tf.float32, tf.float64):
        return None
    if "GPU" in getattr(op, "device", "").upper() or getattr(op, "skip_input_indices", None):
        return None
    try:
        value, w = op.inputs
        value.consumers()  # a tape's recorded op (eager) holds values only
    except (AttributeError, ValueError):
        return None
    for _ in range(_MAX_IDENTITIES):
        if len(_data_consumers(value)) != 1:
            return None
        producer = value.op
        if producer.type == "ConcatV2":
            break
        if producer.type == "Transpose":
            perm = tf.get_static_value(producer.inputs[1])
            if perm is None or list(perm) != list(range(len(perm))):
                return None
        elif producer.type not in ("Reshape", "Identity"):
            return None
        value = producer.inputs[0]
    else:
        return None
    matched = _pair_pieces(value.op, value)
    if matched is None:
        return None
    x, y, pieces = matched
    width = tf.compat.dimension_value(x.shape[-1]) * len(pieces)
    if w.shape.rank != 2 or tf.compat.dimension_value(w.shape[0]) != width:
        return None
    return value.op, x, y, pieces


def _repeated_rows(x):
    """q where x [B, T, D] is q [B, D] repeated over its axis 1 (DIN's query against each step of the
    behaviour sequence): tf.tile(tf.expand_dims(q, 1), [1, T, 1]), or tf.reshape(tf.tile(q, [1, T]),
    tf.shape(keys)) as the original DIN code writes it; None for any other x."""
    from tensorflow.python.framework import tensor_util  # constant_value_as_shape has no public name

    if x.shape.rank != 3:
        return None
    producer = x.op
    if producer.type == "Tile":
        source = producer.inputs[0]
        multiples = tensor_util.constant_value_as_shape(producer.inputs[1])
        if source.op.type != "ExpandDims" or multiples.rank != 3 or [multiples[0], multiples[2]] != [1, 1]:
            return None
        if tf.get_static_value(source.op.inputs[1]) not in (1, -2):
            return None
        query = source.op.inputs[0]
    elif producer.type == "Reshape" and producer.inputs[0].op.type == "Tile":
        # [B, T * D] reshaped to rows of D (q's width, checked below): row i of x is q's row i // T.
        tile = producer.inputs[0].op
        multiples = tensor_util.constant_value_as_shape(tile.inputs[1])
        if multiples.rank != 2 or multiples[0] != 1:
            return None
        query = tile.inputs[0]
    else:
        return None
    if query.shape.rank != 2 or tf.compat.dimension_value(query.shape[-1]) != tf.compat.dimension_value(x.shape[-1]):
        return None
    return query


def _pair_dense_gradients(concat, x, y, pieces, w, grad):
    """The gradients of a dense layer z = concat(pieces) w, grad = dL/dz, by the pieces' linearity: every
    piece is a signed x or y, or their product, so w's gradient needs grad^T x, grad^T y and grad^T (x * y)
    (one product less than a difference's own), and the concat's needs grad times three blocks of w, not
    four; pair_concat_grad then adds the product's part. Where x (or y) repeats a query over a sequence,
    its part of the input gradient is taken once per query (repeated_pair_grad, routed_tile_gradient), and
    its part of w's gradient from grad's sums over the steps. Returns (input_grad, w's gradient): input_grad
    is pair_dense_input_grad's, computed only if a program reads the concat's gradient itself; x's and y's
    gradients wait in _PAIR_DENSE_GRADIENTS for the concat's gradient function."""
    d = tf.compat.dimension_value(x.shape[-1])
    blocks = tf.split(w, len(pieces), axis=0)
    signs = {"x": (1, 0), "y": (0, 1), "x-y": (1, -1), "y-x": (-1, 1), "x*y": (0, 0)}

    def signed_sum(operand):
        total = None
        for piece, block in zip(pieces, blocks):
            sign = signs[piece][operand]
            if sign:
                term = block if sign > 0 else -block
                total = term if total is None else total + term
        return total

    products = [block for piece, block in zip(pieces, blocks) if piece == "x*y"]
    reduced = [signed_sum(0), signed_sum(1)] + ([tf.add_n(products)] if products else [])
    queries = [_repeated_rows(x), _repeated_rows(y)]
    sums = {}

    def query_sums(side):
        """grad summed over each step of the repeated query's sequence, [B, units]."""
        if side not in sums:
            steps = tf.reshape(grad, tf.stack([tf.shape(queries[side])[0], -1, tf.shape(grad)[-1]]))
            sums[side] = tf.reduce_sum(steps, axis=1)
        return sums[side]

    side = next((i for i, query in enumerate(queries) if query is not None), None)
    if products and side is not None:
        # The repeated query's part of the input gradient is taken once per query (routed_tile_gradient).
        other = (y, x)[side]
        parts = tf.linalg.matmul(grad, tf.concat([reduced[1 - side], reduced[2]], axis=0), transpose_b=True)
        grad_other, _, grad_repeated = repeated_pair_grad(parts, queries[side], other, grad, reduced[side],
                                                          query_sums(side))
        grad_x, grad_y = (grad_repeated, grad_other) if side == 0 else (grad_other, grad_repeated)
    else:
        parts = tf.linalg.matmul(grad, tf.concat(reduced, axis=0), transpose_b=True)
        parts = tf.reshape(parts, tf.concat([tf.shape(x)[:-1], [len(reduced) * d]], axis=0))
        if products:
            grad_x, grad_y, _ = pair_concat_grad(parts, x, y, ["x", "y", "x*y"])
        else:
            grad_x, grad_y = tf.split(parts, 2, axis=-1)

    def rows(value):
        return tf.reshape(value, [-1, d])

    def operand_gradient(side):
        """grad^T operand, [units, D]; for a query repeated over the sequence (operand[b, t] = q[b]), q's
        rows against grad's sums over t."""
        if queries[side] is None:
            return transposed_matmul(grad, rows((x, y)[side]))
        return transposed_matmul(query_sums(side), queries[side])

    grad_of_x, grad_of_y = operand_gradient(0), operand_gradient(1)
    columns = []
    for piece, value in zip(pieces, concat.inputs[:-1]):
        if piece == "x*y":
            columns.append(transposed_matmul(grad, rows(value)))
        elif piece == "x":
            columns.append(grad_of_x)
        elif piece == "y":
            columns.append(grad_of_y)
        else:
            columns.append(grad_of_x - grad_of_y if piece == "x-y" else grad_of_y - grad_of_x)
    grad_w = tf.transpose(tf.concat(columns, axis=1))
    input_grad, _ = pair_dense_input_grad(grad, w, x, len(pieces))
    _PAIR_DENSE_GRADIENTS.setdefault(input_grad.graph, {})[input_grad.op.name] = (
        concat.name, grad_x.name, grad_y.name, tuple(pieces))
    return input_grad, grad_w


def routed_pair_dense_gradient(original):
    """The gradient function for MatMul: original's, except for a dense layer over a concat of x, y and
    their differences and products (DIN's activation unit), whose gradients come by the pieces' linearity
    (_pair_dense_gradients) in about three quarters of the multiply-adds."""

    def gradient(op, grad):
        matched = _pair_dense_pieces(op) if isinstance(grad, tf.Tensor) else None
        if matched is None:
            return original(op, grad)
        concat, x, y, pieces = matched
        return _pair_dense_gradients(concat, x, y, pieces, op.inputs[1], grad)

    return _route(gradient, original, "pair dense")


def _gradient_source(grad, passing):
    """The tensor grad comes from, looking through up to _MAX_IDENTITIES ops of the types in passing."""
    value = grad
    for _ in range(_MAX_IDENTITIES):
        producer = getattr(value, "op", None)  # a tape's (eager) gradients have none
        if getattr(producer, "type", None) not in passing:
            break
        value = producer.inputs[0]
    return value


def _pair_dense_handoff(op, grad):
    """What routed_pair_dense_gradient computed for op, a concat, when grad is its lazy input_grad (through
    the gradients of the reshapes and transposes between them): (grad_x, grad_y, pieces, piece_grads)."""
    source = _gradient_source(grad, ("Identity", "Reshape", "Transpose"))
    producer = getattr(source, "op", None)
    if getattr(producer, "type", None) != PAIR_DENSE_INPUT_GRAD or source.value_index != 0:
        return None
    handed = _PAIR_DENSE_GRADIENTS.get(producer.graph, {}).get(producer.name)
    if handed is None or handed[0] != op.name:
        return None
    concat, grad_x, grad_y, pieces = handed
    graph = producer.graph
    return graph.get_tensor_by_name(grad_x), graph.get_tensor_by_name(grad_y), list(pieces), producer.outputs[1:]


# The index of the first piece gradient among the outputs of the ops that hand the pieces theirs.
_FIRST_PIECE_OUTPUT = {PAIR_CONCAT_GRAD: 2, PAIR_DENSE_INPUT_GRAD: 1}


def routed_concat_gradient(original):
    """The gradient function for ConcatV2: original's, except that a concat of x, y and their differences
    and products gives x and y their whole gradients from pair_concat_grad, in one pass (or from the dense
    layer after it, routed_pair_dense_gradient)."""

    def gradient(op, grad):
        handed = _pair_dense_handoff(op, grad)
        if handed is not None:
            grad_x, grad_y, pieces, piece_grads = handed
        else:
            matched = _pair_pieces(op, grad)
            if matched is None:
                return original(op, grad)
            x, y, pieces = matched
            grad_x, grad_y, piece_grads = pair_concat_grad(grad, x, y, pieces)
        # The differences' and products' own gradients (routed_piece_gradient) then add nothing more.
        return [grad_x if piece == "x" else grad_y if piece == "y" else piece_grads[i]
                for i, piece in enumerate(pieces)] + [None]

    return _route(gradient, original, "pair concat")


def routed_piece_gradient(original):
    """The gradient function for Sub and Mul: none where the gradient is a piece's slice from
    pair_concat_grad or pair_dense_input_grad, whose grad_x and grad_y already hold this difference's or
    product's part; original's otherwise (x or y itself may be a difference or a product)."""

    def gradient(op, grad):
        source = _gradient_source(grad, ("Identity",))  # gate_gradients passes each gradient through one
        first = _FIRST_PIECE_OUTPUT.get(getattr(getattr(source, "op", None), "type", None))
        if first is not None and source.value_index >= first:  # a piece's slice, not grad_x or grad_y
            return None, None
        return original(op, grad)

    return _route(gradient, original, "pair concat")


def _tiled_query(op):
    """The query op, a Tile, repeats: its input, or the input of the ExpandDims before it."""
    source = op.inputs[0]
    return source.op.inputs[0] if source.op.type == "ExpandDims" else source


def routed_tile_gradient(original):
    """The gradient function for Tile: original's, except where the gradient is repeated_pair_grad's
    grad_x for a query this Tile repeats, whose sum over the sequence is that op's query_grad."""

    def gradient(op, grad):
        source = _gradient_source(grad, ("Identity", "Reshape"))
        producer = getattr(source, "op", None)
        if (getattr(producer, "type", None) == REPEATED_PAIR_GRAD and source.value_index == 2
                and producer.inputs[1].name == _tiled_query(op).name):
            return [tf.reshape(producer.outputs[1], tf.shape(op.inputs[0])), None]
        return original(op, grad)

    return _route(gradient, original, "pair dense")


def route_pair_concat_gradients():
    """Make every ConcatV2 gradient built from now on in this process take a concat of x, y and their
    differences and products (x - y, x * y: DIN's activation unit) from pair_concat_grad, and a dense layer
    over such a concat its gradients by the pieces' linearity (routed_pair_dense_gradient). Idempotent;
    returns whether it changed the registry."""
    from tensorflow.python.framework import ops as framework_ops  # the gradient registry has no public name
    registry = framework_ops._gradient_registry._registry
    routings = [(op_type, "pair concat", routed_piece_gradient) for op_type in _PIECE_OPS] + [
        ("ConcatV2", "pair concat", routed_concat_gradient), ("MatMul", "pair dense", routed_pair_dense_gradient),
        ("Tile", "pair dense", routed_tile_gradient)]
    changed = False
    for op_type, route, routed in routings:
        if not _routed(registry[op_type]["type"], route):
            registry[op_type]["type"] = routed(registry[op_type]["type"])
            changed = True
    return changed


# The kernel label under which retf's DecodeCSV kernel is always registered: a graph built under
# `graph._kernel_label_map({"DecodeCSV": DECODE_CSV_LABEL})` runs it whatever use_fast_decode_csv says.
DECODE_CSV_LABEL = "retf"


def _loaded_library():
    """A ctypes handle on the op library TensorFlow loaded (RTLD_NOLOAD: never a second copy), loading it
    into TensorFlow first where `import tensorflow` did not (retf beside a stock TensorFlow)."""
    import ctypes
    import os

    from retf import _library

    def loaded():
        return ctypes.CDLL(_library.LIBRARY, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)

    try:
        return loaded()  # what `import tensorflow` registered: no op wrappers to build at import
    except OSError:
        load_library()
        return loaded()


def use_fast_decode_csv():
    """Make every DecodeCSV kernel this process creates from now on retf's (tf.io.decode_csv, the 1.x
    tf.decode_csv, in tf.data functions too): TensorFlow's outputs and errors, several times faster on wide
    records. Graphs keep TensorFlow's op. Idempotent; kernels already made stay TensorFlow's."""
    return _loaded_library().RetfUseDecodeCSV() == 1


def use_large_block_allocator():
    """Make TensorFlow's CPU allocator, for this process, one that keeps freed blocks of 1 MiB or more
    (by size class, up to a quarter of the machine's memory or of the cgroup's limit) for the next
    tensors of their size, and serves smaller ones from malloc as TensorFlow's own does. A tensor past
    32 MiB otherwise costs fresh pages from the kernel at every allocation; kept blocks are given back
    when an allocation finds no memory. TensorFlow chooses its CPU allocator once, at the first
    CPU allocation of the process: returns False when that has happened already (TensorFlow's allocator
    then stays), or when the TensorFlow build registers an allocator of its own above its default
    (intel-tensorflow's), which stays; True when this allocator is, or will be, the one. Idempotent."""
    return _loaded_library().RetfInstallLargeBlockAllocator() == 1
