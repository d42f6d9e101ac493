"""The gradients of DIN's activation unit, a concat of x, y, their differences and products and the dense layer
over it (pair_concat_grad, pair_dense_input_grad, repeated_pair_grad), and their routing into the gradients of
ConcatV2, MatMul, Tile, Sub and Mul."""

import weakref

import tensorflow as tf

from retf._library import load_library
from retf.ops._common import _route, _routed
from retf.ops.matmul import transposed_matmul

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


_SIGNS = {"x": (1, 0), "y": (0, 1), "x-y": (1, -1), "y-x": (-1, 1), "x*y": (0, 0)}


def _reduced_weights(w, pieces):
    """w's blocks folded by the pieces' linearity, each [D, units]: [w_x, w_y] (the signed sums of the blocks of
    the pieces holding x, y) and, with a product, [w_p] (the products' blocks summed); and the one copy they are
    views of. Every read of w but pair_dense_input_grad's ends in that copy: a weight gradient that waits for
    it never lets an optimizer update w in place while a gradient reads it (the blocks of tf.split, and an
    add_n of one, share w's buffer)."""
    blocks = tf.split(w, len(pieces), axis=0)

    def signed_sum(operand):
        total = None
        for piece, block in zip(pieces, blocks):
            sign = _SIGNS[piece][operand]
            if sign:
                term = block if sign > 0 else -block
                total = term if total is None else total + term
        return total

    products = [block for piece, block in zip(pieces, blocks) if piece == "x*y"]
    reduced = [signed_sum(0), signed_sum(1)] + ([tf.add_n(products)] if products else [])
    reduced_copy = tf.concat(reduced, axis=0)
    return tf.split(reduced_copy, len(reduced), axis=0), reduced_copy


def _weight_gradient(pieces, columns, reduced_copy):
    """w's gradient [P x D, units] from grad^T x, grad^T y and grad^T (x * y) ([units, D] each, by piece name),
    once every read of w has ended (_reduced_weights)."""
    by_piece = {"x": columns["x"], "y": columns["y"], "x*y": columns.get("x*y")}
    by_piece["x-y"] = columns["x"] - columns["y"] if "x-y" in pieces else None
    by_piece["y-x"] = columns["y"] - columns["x"] if "y-x" in pieces else None
    with tf.control_dependencies([reduced_copy]):
        return tf.transpose(tf.concat([by_piece[piece] for piece in pieces], axis=1))


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
    reduced, reduced_copy = _reduced_weights(w, pieces)
    products = "x*y" in pieces
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
        parts = tf.linalg.matmul(grad, reduced_copy, transpose_b=True)
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

    columns = {"x": operand_gradient(0), "y": operand_gradient(1)}
    if products:
        columns["x*y"] = transposed_matmul(grad, rows(concat.inputs[pieces.index("x*y")]))
    grad_w = _weight_gradient(pieces, columns, reduced_copy)
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


def _pair_dense_by_pieces(query, other, side, pieces, w):
    """concat(pieces) @ w where x (side 0) or y (side 1) repeats query over a sequence and a piece is their
    product, as its pieces' products: query @ w_q once per query, added to each step's other @ w_o +
    (query * other) @ w_p, with no concat and no tiled query. Its gradients are _pair_dense_gradients' for a
    repeated query: the query's once per query, the other's and the product's in repeated_pair_grad. Rows
    [N, units], as the MatMul's."""
    d = tf.compat.dimension_value(other.shape[-1])

    @tf.custom_gradient
    def by_pieces(query, other, w):
        reduced, reduced_copy = _reduced_weights(w, pieces)
        queries, units = tf.shape(query)[0], tf.shape(w)[1]
        rows = tf.reshape(other, [-1, d])
        product = tf.reshape(tf.reshape(other, tf.stack([queries, -1, d])) * tf.expand_dims(query, 1), [-1, d])
        steps = tf.linalg.matmul(rows, reduced[1 - side]) + tf.linalg.matmul(product, reduced[2])
        steps = tf.reshape(steps, tf.stack([queries, -1, units])) + tf.expand_dims(
            tf.linalg.matmul(query, reduced[side]), 1)

        def gradient(grad):
            sums = tf.reduce_sum(tf.reshape(grad, tf.stack([queries, -1, units])), axis=1)
            parts = tf.linalg.matmul(grad, tf.concat([reduced[1 - side], reduced[2]], axis=0), transpose_b=True)
            grad_other, grad_query, _ = repeated_pair_grad(parts, query, other, grad, reduced[side], sums)
            names = ("x", "y") if side == 0 else ("y", "x")
            columns = {names[0]: transposed_matmul(sums, query), names[1]: transposed_matmul(grad, rows),
                       "x*y": transposed_matmul(grad, product)}
            return grad_query, grad_other, _weight_gradient(pieces, columns, reduced_copy)

        return tf.reshape(steps, tf.stack([-1, units])), gradient

    return by_pieces(query, other, w)


def _shape_read_without(value, shape):
    """Point what reads value's shape through a Shape op (tensordot's reshapes over a sequence whose length the
    graph does not know) at shape, value's shape computed without value, so that no step computes value for
    its shape alone. Operation._update_input is TensorFlow's internal rewiring (no public name): the readers
    are the ops tensordot made in this call, which no session has run."""
    context = value.graph._get_control_flow_context()
    for reader in value.consumers():
        if reader.type != "Shape" or reader._get_control_flow_context() is not context:
            continue
        replacement = tf.cast(shape, reader.get_attr("out_type"))
        for consumer in reader.outputs[0].consumers():
            for index, read in enumerate(consumer.inputs):
                if read is reader.outputs[0]:
                    consumer._update_input(index, replacement)


def routed_mat_mul(original):
    """TensorFlow's generated MatMul wrapper (which tf.matmul and tf.layers.dense's tensordot call): original's
    node, except that in a graph a product by a weight of a concat of x, y, their differences and their product,
    one of them a query repeated over a sequence (DIN's activation unit), returns its pieces' products summed
    (_pair_dense_by_pieces). The MatMul node, the concat, its pieces and the tiled query are then left with no
    consumer (the concat's shape read from the sequence's, _shape_read_without), so a session never runs them.
    The forward pass is TensorFlow's own ops, so exports hold no retf op; its gradient runs retf's kernels."""

    def mat_mul(a, b, transpose_a=False, transpose_b=False, name=None):
        product = original(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)
        if tf.executing_eagerly() or not hasattr(product, "op"):
            return product
        matched = _pair_dense_pieces(product.op)
        if matched is None:
            return product
        _, x, y, pieces = matched
        queries = [_repeated_rows(x), _repeated_rows(y)]
        if "x*y" not in pieces or (queries[0] is None) == (queries[1] is None):
            return product  # one product over the concat, its gradients routed_pair_dense_gradient's
        side, concat = 0 if queries[0] is not None else 1, matched[0]
        with tf.name_scope(product.op.name + "_by_pieces"):
            other = (y, x)[side]
            linear = _pair_dense_by_pieces(queries[side], other, side, pieces, product.op.inputs[1])
            width = len(pieces) * tf.compat.dimension_value(other.shape[-1])
            _shape_read_without(concat.outputs[0], tf.concat([tf.shape(other)[:-1], [width]], axis=0))
        linear.set_shape(product.shape)
        return linear

    mat_mul.original = original
    return mat_mul


def route_pair_dense_products():
    """Make every MatMul that tf.matmul builds in a graph from now on in this process over a concat of a repeated
    query, a sequence, their differences and product (DIN's activation unit) compute by the pieces' linearity
    (routed_mat_mul). Idempotent; returns whether it changed the wrapper."""
    from tensorflow.python.ops import gen_math_ops  # math_ops.matmul reads the wrapper from it at each call

    if getattr(gen_math_ops.mat_mul, "original", None) is not None:
        return False
    gen_math_ops.mat_mul = routed_mat_mul(gen_math_ops.mat_mul)
    return True


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
