"""Graphs this TensorFlow exports, in the form TensorFlow 1.15 reads (tensorflow._retf.tf115_export).

TensorFlow 2.x emits newer op versions and attributes for the same 1.x API calls: a SavedModel whose
tf.Example parsing is ParseExampleV2, or whose FusedBatchNormV3 carries exponential_avg_factor, is refused
by TF 1.15's loaders and TF Serving 1.15 ("Op type not registered", "NodeDef mentions attr ... not in Op").
In 1.x API mode the bootstrap routes every export through here:

- each node is written in TF 1.15's form where the meaning is the same: ParseExampleV2 without ragged
  features as ParseExample, attributes TF 1.15 does not know dropped where they hold their default, retf's
  forward ops (a GRU's loop, a batch or layer normalization's moments and normalization, the fused embedding
  lookups, plain and safe) as TF 1.15's own;
- a SavedModel leaves out the nodes TF 1.15 cannot run that nothing it serves needs: the training ops of a
  graph saved whole (tf.saved_model.simple_save after training, with retf's fused optimizers or gradients);
- what a SavedModel or a frozen graph still holds that TF 1.15 cannot read is said once (a RuntimeWarning per
  finding), naming the op, its nodes and what to do; an export this module cannot rewrite is written as
  TensorFlow 2.x made it, said the same way: the user's save never fails here.

TF 1.15.5's op registry (every op, its attributes and their defaults) ships beside this file, as
tf115_ops.json. `retf-tf115-check PATH...` (main() below) reports what TF 1.15 would refuse in a
SavedModel, a meta graph or a GraphDef, with exit code 1; RETF_TF115_EXPORTS=0 keeps 2.x's forms.
Python 3.6, standard library and TensorFlow only.
"""
import json
import os
import sys

REGISTRY_FILE = "tf115_ops.json"

# retf's ops by name prefix (the first that matches), and how a graph is built without them.
_RETF_SWITCHES = (
    ("Retf>SparseApplyAdamDense", "build the graph with RETF_SPARSE_ADAM=dense"),
    ("Retf>AdamDecayUntouched", "build the graph with RETF_SPARSE_ADAM=dense"),
    ("Retf>SparseApplyAdamAsync", "train with tf.train.AdamOptimizer instead of DeepRec's AdamAsyncOptimizer"),
    ("Retf>SparseApplyAdam", "train with tf.train.AdamOptimizer and RETF_SPARSE_ADAM=dense instead of a lazy Adam "
                             "(tf.contrib.opt.LazyAdamOptimizer, retf.train's, RETF_SPARSE_ADAM=lazy)"),
    ("Retf>SparseApplyAdagradDecay", "train with tf.train.AdagradOptimizer instead of DeepRec's AdagradDecayOptimizer"),
    ("Retf>SparseApplyAdagrad", "build the graph with RETF_FUSED_SPARSE=0"),
    ("Retf>SparseApplyFtrl", "build the graph with RETF_FUSED_SPARSE=0"),
    ("Retf>EmbeddingLookupSparse", "build the graph with RETF_FUSED_EMBEDDING=0"),
    ("Retf>ResourceEmbeddingLookupSparse", "build the graph with RETF_FUSED_EMBEDDING=0"),
    ("Retf>SafeEmbeddingLookupSparse", "build the graph with RETF_FUSED_EMBEDDING=0"),
    ("Retf>ResourceSafeEmbeddingLookupSparse", "build the graph with RETF_FUSED_EMBEDDING=0"),
    ("Retf>TransposedMatMul", "build the graph with RETF_FUSED_MATMUL_GRAD=0"),
    ("Retf>PairConcatGrad", "build the graph with RETF_FUSED_CONCAT_GRAD=0"),
    ("Retf>PairDenseInputGrad", "build the graph with RETF_FUSED_CONCAT_GRAD=0"),
    ("Retf>RepeatedPairGrad", "build the graph with RETF_FUSED_CONCAT_GRAD=0"),
    ("Retf>GRURecurrence", "build the graph with RETF_FUSED_GRU=0"),
    ("Retf>Moments", "build the graph with RETF_BATCH_MOMENTS=0"),
    ("Retf>BatchNormalize", "build the graph with RETF_BATCH_MOMENTS=0"),
    ("Retf>LayerMoments", "build the graph with RETF_LAYER_NORM_KERNELS=0"),
    ("Retf>LayerNormalize", "build the graph with RETF_LAYER_NORM_KERNELS=0"),
)
# The kernel label of retf's kernels for TensorFlow's own ops (BatchMatMulV2 under small_batch_matmul, BiasAddGrad under
# fast_bias_grad, DecodeCSV under a graph's own label map): the nodes are TensorFlow's, which TF 1.15 runs on its kernels
# once the label is gone.
_RETF_KERNEL_LABEL = b"retf"
# Collections a SavedModel's loader runs, besides its signatures and its saver.
_SERVED_COLLECTIONS = ("saved_model_main_op", "legacy_init_op", "saved_model_train_op", "table_initializer",
                       "asset_filepaths", "saved_model_assets")

_registry = []
_said = set()


def enabled():
    return os.environ.get("RETF_TF115_EXPORTS", "1") != "0"


def registry():
    """{op: {attribute: its default as text, or None}} of TensorFlow 1.15.5."""
    if not _registry:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), REGISTRY_FILE)) as source:
            _registry.append(json.load(source)["ops"])
    return _registry[0]


class Problem(object):
    """Nodes TensorFlow 1.15 cannot read, for one reason."""

    def __init__(self, op, reason, fix):
        self.op, self.reason, self.fix, self.nodes = op, reason, fix, []

    def line(self):
        shown = ", ".join(self.nodes[:3]) + (" and %d more" % (len(self.nodes) - 3) if len(self.nodes) > 3 else "")
        return "op %s (%s): %s. Fix: %s" % (self.op, shown, self.reason, self.fix)


class Findings(object):
    """What one graph holds that TensorFlow 1.15 cannot read, by (op, reason)."""

    def __init__(self):
        self.problems = {}
        self.unreadable = set()  # graph-level node names

    def add(self, node, reason, fix, where=None):
        key = (node.op, reason)
        if key not in self.problems:
            self.problems[key] = Problem(node.op, reason, fix)
        self.problems[key].nodes.append(node.name if where is None else "%s/%s" % (where, node.name))
        if where is None:
            self.unreadable.add(node.name)

    def keep_only(self, names):
        """Forget nodes that are no longer in the graph."""
        for key in list(self.problems):
            problem = self.problems[key]
            problem.nodes = [n for n in problem.nodes if n.startswith("function ") or n in names]
            if not problem.nodes:
                del self.problems[key]
        self.unreadable &= names

    def lines(self):
        return [self.problems[key].line() for key in sorted(self.problems)]


_REEXPORT = "export it again in this wheel's 1.x API mode, which writes TF 1.15's form (RETF_TF115_EXPORTS unset)"


def _fix_for(op):
    if op in _REWRITES:
        return _REEXPORT
    for prefix, without in _RETF_SWITCHES:
        if op.startswith(prefix):
            return "it is retf's op, which only this wheel registers: %s, or serve it on this wheel" % without
    if op.startswith("Retf>"):
        return "it is retf's op, which only this wheel registers: serve it on this wheel"
    return ("build the graph without the API call that emits it (TensorFlow 1.15 has no such op), "
            "or serve it on this TensorFlow")


# --- rewriting nodes into TF 1.15's form ----------------------------------------------------------


class _Scope(object):
    """The nodes of a GraphDef, or of one function of its library (whose inputs name output arguments)."""

    def __init__(self, nodes, in_function):
        self.nodes, self.in_function = nodes, in_function
        self.by_name = dict((node.name, node) for node in nodes)

    def producer(self, reference):
        name = reference.lstrip("^").split(":")[0]
        return self.by_name.get(name)

    def new_name(self, base):
        name, count = base, 0
        while name in self.by_name:
            count += 1
            name = "%s_%d" % (base, count)
        return name

    def add(self, base, op, inputs, device):
        node = self.nodes.add()
        node.name, node.op, node.device = self.new_name(base), op, device
        node.input.extend(inputs)
        self.by_name[node.name] = node
        return node

    def output(self, node):
        """How another node of this scope names ``node``'s first output."""
        return node.name + (":output:0" if self.in_function else "")

    def add_constant(self, base, value, dtype, device):
        """A scalar Const node of ``value``; its output's name."""
        from tensorflow.core.framework import types_pb2
        node = self.add(base, "Const", [], device)
        node.attr["dtype"].type = dtype
        tensor = node.attr["value"].tensor
        tensor.dtype = dtype
        tensor.tensor_shape.SetInParent()
        if dtype == types_pb2.DT_STRING:
            tensor.string_val.append(value)
        elif dtype == types_pb2.DT_FLOAT:
            tensor.float_val.append(value)
        elif dtype == types_pb2.DT_DOUBLE:
            tensor.double_val.append(value)
        else:
            tensor.int_val.append(value)
        return self.output(node)


def _constant_strings(node):
    """The values of a Const node of strings, or None."""
    if node is None or node.op != "Const" or "value" not in node.attr:
        return None
    import numpy
    from tensorflow.python.framework import tensor_util
    value = numpy.asarray(tensor_util.MakeNdarray(node.attr["value"].tensor))
    if value.dtype.kind not in ("S", "O") or value.ndim > 1:
        return None
    return [item if isinstance(item, bytes) else str(item).encode("utf-8") for item in value.reshape(-1)]


def _parse_example_v1(node, scope):
    """ParseExampleV2 without ragged features, as ParseExample (TF 1.15's op for the same parse). True if done."""
    if len(node.attr["ragged_value_types"].list.type) or len(node.attr["ragged_split_types"].list.type):
        return False
    data = [i for i in node.input if not i.startswith("^")]
    control = [i for i in node.input if i.startswith("^")]
    if len(data) < 5:
        return False
    serialized, names, sparse_input, dense_input, ragged_input = data[:5]
    sparse_keys = _constant_strings(scope.producer(sparse_input))
    dense_keys = _constant_strings(scope.producer(dense_input))
    ragged_keys = _constant_strings(scope.producer(ragged_input))
    if sparse_keys is None or dense_keys is None or ragged_keys:
        return False
    tdense = list(node.attr["Tdense"].list.type)
    if len(dense_keys) != len(tdense) or len(sparse_keys) != node.attr["num_sparse"].i:
        return False
    from tensorflow.core.framework import types_pb2
    keys = [scope.add_constant("%s/sparse_key_%d" % (node.name, i), key, types_pb2.DT_STRING, node.device)
            for i, key in enumerate(sparse_keys)]
    keys += [scope.add_constant("%s/dense_key_%d" % (node.name, i), key, types_pb2.DT_STRING, node.device)
             for i, key in enumerate(dense_keys)]
    inputs = [serialized, names] + keys + data[5:] + control
    from tensorflow.core.framework import attr_value_pb2
    kept = {}
    for name in ("sparse_types", "Tdense", "dense_shapes"):
        kept[name] = attr_value_pb2.AttrValue()
        kept[name].CopyFrom(node.attr[name])
    node.op = "ParseExample"
    del node.input[:]
    node.input.extend(inputs)
    node.attr.clear()
    for name, value in kept.items():
        node.attr[name].CopyFrom(value)
    node.attr["Nsparse"].i = len(sparse_keys)
    node.attr["Ndense"].i = len(dense_keys)
    return True


def _segment_ids_int32(node, scope):
    """A SparseSegment op given int64 segment ids (Tsegmentids, TF 2.x's) takes them cast to int32, as TF 1.15's
    tf.nn.embedding_lookup_sparse cast them itself: they number a batch's rows."""
    from tensorflow.core.framework import types_pb2
    if "Tsegmentids" not in node.attr:
        return True
    if node.attr["Tsegmentids"].type == types_pb2.DT_INT64:
        cast = scope.add(node.name + "/segment_ids_int32", "Cast", [node.input[2]], node.device)
        cast.attr["SrcT"].type, cast.attr["DstT"].type = types_pb2.DT_INT64, types_pb2.DT_INT32
        node.input[2] = scope.output(cast)
    elif node.attr["Tsegmentids"].type != types_pb2.DT_INT32:
        return False
    del node.attr["Tsegmentids"]
    return True


def _sparse_segment_sum_grad(node, scope):
    """SparseSegmentSumGrad (TF 2.x's) as TF 1.15's gradient of SparseSegmentSum computes it: the incoming
    gradient's rows gathered by segment id, summed into the data's rows by index."""
    from tensorflow.core.framework import types_pb2
    data = [i for i in node.input if not i.startswith("^")]
    if len(data) != 4:
        return False
    grad, indices, segment_ids, rows = data
    axis = scope.add_constant(node.name + "/axis", 0, types_pb2.DT_INT32, node.device)
    gather = scope.add(node.name + "/gathered", "GatherV2", [grad, segment_ids, axis], node.device)
    gather.attr["Tparams"].type = node.attr["T"].type
    gather.attr["Tindices"].type = node.attr["Tsegmentids"].type if "Tsegmentids" in node.attr else types_pb2.DT_INT32
    gather.attr["Taxis"].type = types_pb2.DT_INT32
    control = [i for i in node.input if i.startswith("^")]
    # Tidx may have been stripped as holding its default (strip_default_attrs, as Estimator exports)
    value_type = node.attr["T"].type
    index_type = node.attr["Tidx"].type if "Tidx" in node.attr else types_pb2.DT_INT32
    node.op = "UnsortedSegmentSum"
    del node.input[:]
    node.input.extend([scope.output(gather), indices, rows] + control)
    node.attr.clear()
    node.attr["T"].type, node.attr["Tindices"].type = value_type, index_type
    node.attr["Tnumsegments"].type = types_pb2.DT_INT32
    return True


# The inputs of Retf>GRURecurrence, in order, as the loop's placeholders are named.
_GRU_INPUTS = ("x_ru", "x_c", "h0", "lengths", "w_ru_h", "w_c_h")
_gru_loops = []


def _gru_loop_graph():
    """A GraphDef of the while loop TF 1.15 runs for Retf>GRURecurrence's outputs and final state (tf.nn.dynamic_rnn's
    loop over a GRUCell, the input's products taken): placeholders named _GRU_INPUTS, Identity nodes "outputs" and
    "final". Built once, in TF 1.x's control flow (Enter, Merge, Switch, NextIteration, Exit, TensorArrayV3)."""
    if _gru_loops:
        return _gru_loops[0]
    from tensorflow.python.framework import dtypes, ops
    from tensorflow.python.ops import (
        array_ops,
        clip_ops,
        control_flow_ops,
        control_flow_util,
        math_ops,
        tensor_array_ops,
    )
    v2 = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        with ops.Graph().as_default() as graph:
            x_ru, x_c, h0, lengths, w_ru_h, w_c_h = (
                array_ops.placeholder(dtypes.int32 if name == "lengths" else dtypes.float32, name=name)
                for name in _GRU_INPUTS)
            steps = array_ops.shape(x_c)[0]
            lengths = clip_ops.clip_by_value(lengths, 0, steps)
            inputs_ru = tensor_array_ops.TensorArray(dtypes.float32, size=steps, name="x_ru_steps").unstack(x_ru)
            inputs_c = tensor_array_ops.TensorArray(dtypes.float32, size=steps, name="x_c_steps").unstack(x_c)
            written = tensor_array_ops.TensorArray(dtypes.float32, size=steps, name="outputs_steps")

            def step(t, h, out):
                r, u = array_ops.split(math_ops.sigmoid(inputs_ru.read(t) + math_ops.matmul(h, w_ru_h)), 2, axis=1)
                c = math_ops.tanh(inputs_c.read(t) + math_ops.matmul(r * h, w_c_h))
                new = u * h + (1.0 - u) * c
                valid = math_ops.less(t, lengths)
                return (t + 1, array_ops.where(valid, new, h),
                        out.write(t, array_ops.where(valid, new, array_ops.zeros_like(new))))

            _, final, written = control_flow_ops.while_loop(lambda t, h, out: t < steps, step, [0, h0, written])
            array_ops.identity(written.stack(), name="outputs")
            array_ops.identity(final, name="final")
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = v2
    _gru_loops.append(graph.as_graph_def())
    return _gru_loops[0]


def _gru_recurrence_loop(node, scope):
    """Retf>GRURecurrence (fused_gru) as the while loop TF 1.15 runs for it, where nothing reads what the node keeps
    for its gradient (a served graph: a SavedModel's after its training ops are left out, a frozen graph). The
    node becomes an IdentityN of the loop's outputs and final state, so its readers keep their inputs. True if
    done."""
    data = [i for i in node.input if not i.startswith("^")]
    if scope.in_function or len(data) != len(_GRU_INPUTS):
        return False
    kept = ("%s:2" % node.name, "%s:3" % node.name)  # the gates and states its gradient reads
    readers = [other for other in scope.nodes if any(i.lstrip("^") in kept for i in other.input)]
    read = set(_node_name(i) for other in scope.nodes for i in other.input)
    # the zeros tf.gradients made for them, left unread when a SavedModel leaves the gradient out, may stay
    if any(reader.op != "ZerosLike" or reader.name in read for reader in readers):
        return False
    prefix = scope.new_name(node.name + "/tf115_loop")
    loop = _gru_loop_graph()
    fed = dict(zip(_GRU_INPUTS, data))
    names = dict((n.name, "%s/%s" % (prefix, n.name)) for n in loop.node if n.name not in fed)

    def reference(text):
        control, name = text.startswith("^"), text.lstrip("^")
        base, _, port = name.partition(":")
        if base in fed:
            return fed[base]
        return ("^" if control else "") + names[base] + (":" + port if port else "")

    for original in loop.node:
        if original.name in fed:
            continue
        added = scope.nodes.add()
        added.CopyFrom(original)
        added.name, added.device = names[original.name], node.device
        del added.input[:]
        added.input.extend(reference(i) for i in original.input)
        if "frame_name" in added.attr:  # each loop's frame its own
            added.attr["frame_name"].s = ("%s/%s" % (prefix, added.attr["frame_name"].s.decode())).encode()
        if "_class" in added.attr:
            located = [b"loc:@" + reference(v.decode()[len("loc:@"):]).encode() for v in added.attr["_class"].list.s]
            del added.attr["_class"].list.s[:]
            added.attr["_class"].list.s.extend(located)
        scope.by_name[added.name] = added
    for reader in readers:  # unread: zeros of the loop's outputs instead
        reader.input[0] = names["outputs"]
    from tensorflow.core.framework import types_pb2
    control = [i for i in node.input if i.startswith("^")]
    node.op = "IdentityN"
    del node.input[:]
    node.input.extend([names["outputs"], names["final"]] + control)
    node.attr.clear()
    node.attr["T"].list.type.extend([types_pb2.DT_FLOAT, types_pb2.DT_FLOAT])
    return True


def _typed(scope, base, op, inputs, node):
    """A node ``op`` of ``inputs`` beside ``node``, with its type T; its output's name."""
    added = scope.add(base, op, inputs, node.device)
    added.attr["T"].type = node.attr["T"].type
    return scope.output(added)


def _become(node, op, inputs):
    """node as an ``op`` of ``inputs`` (and its own control inputs), of its type T, under its own name, so its readers
    keep their inputs: IdentityN, one output of each input, or an op of one output."""
    dtype = node.attr["T"].type
    control = [i for i in node.input if i.startswith("^")]
    node.op = op
    del node.input[:]
    node.input.extend(list(inputs) + control)
    node.attr.clear()
    if op == "IdentityN":
        node.attr["T"].list.type.extend([dtype] * len(inputs))
    else:
        node.attr["T"].type = dtype


def _moments_ops(node, scope):
    """Retf>Moments (batch_moments) as tf.nn.moments(x, [0]) builds it from TF 1.15's ops: the columns' Mean, and the
    Mean of the SquaredDifference from it. The node becomes an IdentityN of the two, so its readers keep their
    inputs. True if done (not inside a function, whose readers name the outputs by argument)."""
    from tensorflow.core.framework import types_pb2
    data = [i for i in node.input if not i.startswith("^")]
    if scope.in_function or len(data) != 1 or "T" not in node.attr:
        return False
    rows = scope.add_constant(node.name + "/rows", 0, types_pb2.DT_INT32, node.device)

    def column_mean(what, source):
        mean = scope.add(node.name + "/" + what, "Mean", [source, rows], node.device)
        mean.attr["T"].type, mean.attr["Tidx"].type = node.attr["T"].type, types_pb2.DT_INT32
        mean.attr["keep_dims"].b = False
        return scope.output(mean)

    mean = column_mean("mean", data[0])
    squared = _typed(scope, node.name + "/squared_difference", "SquaredDifference", [data[0], mean], node)
    means = [mean, column_mean("variance", squared)]
    _become(node, "IdentityN", means)
    return True


def _expand_rows(scope, node, base, vector):
    """ExpandDims(vector, 1): a vector of one value per row as a column that broadcasts over the row; its output."""
    from tensorflow.core.framework import types_pb2
    axis = scope.add_constant(base + "/axis", 1, types_pb2.DT_INT32, node.device)
    column = scope.add(base, "ExpandDims", [vector, axis], node.device)
    column.attr["T"].type, column.attr["Tdim"].type = node.attr["T"].type, types_pb2.DT_INT32
    return scope.output(column)


def _layer_moments_ops(node, scope):
    """Retf>LayerMoments (layer_norm_kernels) as tf.nn.moments(x, [-1]) builds it from TF 1.15's ops: the rows' Mean
    (kept as a column), and the Mean of the SquaredDifference from it. The node becomes an IdentityN of the mean,
    squeezed, and the variance, so its readers keep their inputs. True if done (not inside a function)."""
    from tensorflow.core.framework import types_pb2
    data = [i for i in node.input if not i.startswith("^")]
    if scope.in_function or len(data) != 1 or "T" not in node.attr:
        return False
    columns = scope.add_constant(node.name + "/columns", 1, types_pb2.DT_INT32, node.device)

    def row_mean(what, source, keep):
        mean = scope.add(node.name + "/" + what, "Mean", [source, columns], node.device)
        mean.attr["T"].type, mean.attr["Tidx"].type = node.attr["T"].type, types_pb2.DT_INT32
        mean.attr["keep_dims"].b = keep
        return scope.output(mean)

    kept = row_mean("mean", data[0], True)
    squared = _typed(scope, node.name + "/squared_difference", "SquaredDifference", [data[0], kept], node)
    squeezed = scope.add(node.name + "/Squeeze", "Squeeze", [kept], node.device)
    squeezed.attr["T"].type = node.attr["T"].type
    squeezed.attr["squeeze_dims"].list.i.extend([1])
    means = [scope.output(squeezed), row_mean("variance", squared, False)]
    _become(node, "IdentityN", means)
    return True


def _normalize_ops(node, scope, per_row):
    """Retf>BatchNormalize (batch_moments) or, per_row, Retf>LayerNormalize (layer_norm_kernels) as
    tf.nn.batch_normalization builds it from TF 1.15's ops: inv = Rsqrt(variance + epsilon) * scale, then x * inv +
    (offset - mean * inv), a layer's mean and root as columns. The node becomes the last Add. True if done (not inside
    a function, whose readers name the output by argument)."""
    data = [i for i in node.input if not i.startswith("^")]
    if scope.in_function or len(data) != 5 or "T" not in node.attr or "epsilon" not in node.attr:
        return False
    x, mean, variance, offset, scale = data
    name = node.name + "/batchnorm"
    epsilon = scope.add_constant(name + "/epsilon", node.attr["epsilon"].f, node.attr["T"].type, node.device)
    shifted = _typed(scope, name + "/add", "Add", [variance, epsilon], node)
    root = _typed(scope, name + "/Rsqrt", "Rsqrt", [shifted], node)
    if per_row:
        root, mean = _expand_rows(scope, node, name + "/root", root), _expand_rows(scope, node, name + "/mean", mean)
    inv = _typed(scope, name + "/mul", "Mul", [root, scale], node)
    scaled = _typed(scope, name + "/mul_1", "Mul", [x, inv], node)
    moved = _typed(scope, name + "/mul_2", "Mul", [mean, inv], node)
    shift = _typed(scope, name + "/sub", "Sub", [offset, moved], node)
    _become(node, "Add", [scaled, shift])
    return True


def _empty_vector(node):
    """Whether ``node`` is a Const holding no value (retf.ops.embedding_lookup_sparse's unweighted ``weights``)."""
    if node is None or node.op != "Const" or "value" not in node.attr:
        return False
    dims = node.attr["value"].tensor.tensor_shape.dim
    return len(dims) == 1 and dims[0].size == 0


_SPARSE_SEGMENT = {b"sum": "SparseSegmentSum", b"mean": "SparseSegmentMean", b"sqrtn": "SparseSegmentSqrtN"}


def _embedding_lookup_ops(node, scope):
    """Retf>EmbeddingLookupSparse or Retf>ResourceEmbeddingLookupSparse (fused_embedding) as TF 1.15's
    tf.nn.embedding_lookup_sparse computes it for one table. Unweighted: SparseSegmentSum, Mean or SqrtN of the
    table's rows by id, the rows TF 1.15 gathers and combines in the same order. Weighted: the rows gathered and
    scaled by their weights, summed per segment (SegmentSum), and for mean or sqrtn divided with DivNoNan by the
    segment's total weight or the root of its squares. The node becomes the last op, under its own name. True if
    done (not inside a function, whose readers name its output by argument)."""
    from tensorflow.core.framework import types_pb2
    data = [i for i in node.input if not i.startswith("^")]
    combiner = node.attr["combiner"].s if "combiner" in node.attr else b"mean"
    if scope.in_function or len(data) != 4 or "T" not in node.attr or combiner not in _SPARSE_SEGMENT:
        return False
    params, ids, segment_ids, weights = data
    dtype = node.attr["T"].type
    index_type = node.attr["Tidx"].type if "Tidx" in node.attr else types_pb2.DT_INT64
    segment_type = node.attr["Tsegmentids"].type if "Tsegmentids" in node.attr else types_pb2.DT_INT64
    if node.op == "Retf>ResourceEmbeddingLookupSparse":
        read = scope.add(node.name + "/read", "ReadVariableOp", [params], node.device)
        read.attr["dtype"].type = dtype
        params = scope.output(read)
    if _empty_vector(scope.producer(weights)):
        if index_type == types_pb2.DT_INT64:  # TF 1.15 has these kernels for int32 indices (a table's rows) only
            cast = scope.add(node.name + "/ids_int32", "Cast", [ids], node.device)
            cast.attr["SrcT"].type, cast.attr["DstT"].type = types_pb2.DT_INT64, types_pb2.DT_INT32
            ids, index_type = scope.output(cast), types_pb2.DT_INT32
        _become(node, _SPARSE_SEGMENT[combiner], [params, ids, segment_ids])
        node.attr["Tidx"].type = index_type
        node.attr["Tsegmentids"].type = segment_type
        return _segment_ids_int32(node, scope)
    name = node.name + "/embedding_lookup_sparse"
    axis = scope.add_constant(name + "/axis", 0, types_pb2.DT_INT32, node.device)
    gathered = scope.add(name + "/rows", "GatherV2", [params, ids, axis], node.device)
    gathered.attr["Tparams"].type, gathered.attr["Tindices"].type = dtype, index_type
    gathered.attr["Taxis"].type = types_pb2.DT_INT32
    column = _expand_rows(scope, node, name + "/weights", weights)
    scaled = _typed(scope, name + "/mul", "Mul", [scope.output(gathered), column], node)
    if combiner == b"sum":
        _become(node, "SegmentSum", [scaled, segment_ids])
        node.attr["Tindices"].type = segment_type
        return True

    def segment_sum(base, values):
        summed = scope.add(base, "SegmentSum", [values, segment_ids], node.device)
        summed.attr["T"].type, summed.attr["Tindices"].type = dtype, segment_type
        return scope.output(summed)

    total = segment_sum(name + "/segment_sum", scaled)
    if combiner == b"mean":
        divisor = segment_sum(name + "/weight_sum", column)
    else:
        squares = _typed(scope, name + "/squares", "Mul", [column, column], node)
        divisor = _typed(scope, name + "/root", "Sqrt", [segment_sum(name + "/squares_sum", squares)], node)
    _become(node, "DivNoNan", [total, divisor])
    return True


def _safe_embedding_lookup_ops(node, scope):
    """Retf>SafeEmbeddingLookupSparse or Retf>ResourceSafeEmbeddingLookupSparse (fused_embedding) as TF 1.15's ops
    compute tf.nn.safe_embedding_lookup_sparse without default_id for one table: the entries kept (Where of the ids
    >= 0, and of the weights > 0 unless combined by sum) gathered, their rows of the table gathered and scaled by their
    weights, summed per row over all the batch's rows (UnsortedSegmentSum: a row with no entry is zero), and for mean
    or sqrtn divided with DivNoNan by the row's total weight (its entry count unweighted) or the root of its squares.
    The node becomes the last op, under its own name. True if done (not inside a function)."""
    from tensorflow.core.framework import types_pb2
    data = [i for i in node.input if not i.startswith("^")]
    combiner = node.attr["combiner"].s if "combiner" in node.attr else b"mean"
    if scope.in_function or len(data) != 5 or "T" not in node.attr or combiner not in _SPARSE_SEGMENT:
        return False
    params, ids, rows, weights, num_rows = data
    dtype = node.attr["T"].type
    index_type = node.attr["Tidx"].type if "Tidx" in node.attr else types_pb2.DT_INT64
    row_type = node.attr["Tsegmentids"].type if "Tsegmentids" in node.attr else types_pb2.DT_INT64
    weighted = not _empty_vector(scope.producer(weights))
    if node.op == "Retf>ResourceSafeEmbeddingLookupSparse":
        read = scope.add(node.name + "/read", "ReadVariableOp", [params], node.device)
        read.attr["dtype"].type = dtype
        params = scope.output(read)
    name = node.name + "/safe_embedding_lookup_sparse"

    def compare(base, op, vector, zero, vector_type):
        compared = scope.add(name + "/" + base, op, [vector, scope.add_constant(name + "/" + base + "/zero", zero,
                                                                                vector_type, node.device)],
                             node.device)
        compared.attr["T"].type = vector_type
        return scope.output(compared)

    kept = compare("valid_ids", "GreaterEqual", ids, 0, index_type)
    if weighted and combiner != b"sum":
        both = scope.add(name + "/valid", "LogicalAnd", [kept, compare("valid_weights", "Greater", weights, 0.0,
                                                                       dtype)], node.device)
        kept = scope.output(both)
    where = scope.add(name + "/where", "Where", [kept], node.device)
    where.attr["T"].type = types_pb2.DT_BOOL
    positions = scope.add(name + "/positions", "Squeeze", [scope.output(where)], node.device)
    positions.attr["T"].type = types_pb2.DT_INT64
    positions.attr["squeeze_dims"].list.i.append(1)
    axis = scope.add_constant(name + "/axis", 0, types_pb2.DT_INT32, node.device)

    def gather(base, vector, indices, vector_type, indices_type):
        gathered = scope.add(name + "/" + base, "GatherV2", [vector, indices, axis], node.device)
        gathered.attr["Tparams"].type, gathered.attr["Tindices"].type = vector_type, indices_type
        gathered.attr["Taxis"].type = types_pb2.DT_INT32
        return scope.output(gathered)

    kept_ids = gather("kept_ids", ids, scope.output(positions), index_type, types_pb2.DT_INT64)
    kept_rows = gather("kept_rows", rows, scope.output(positions), row_type, types_pb2.DT_INT64)
    values = gather("rows", params, kept_ids, dtype, index_type)
    if weighted:
        column = _expand_rows(scope, node, name + "/weights",
                              gather("kept_weights", weights, scope.output(positions), dtype, types_pb2.DT_INT64))
        values = _typed(scope, name + "/mul", "Mul", [values, column], node)
    else:
        as_values = scope.add(name + "/as_values", "Cast", [kept_rows], node.device)
        as_values.attr["SrcT"].type, as_values.attr["DstT"].type = row_type, dtype
        ones = _typed(scope, name + "/ones", "OnesLike", [scope.output(as_values)], node)
        column = _expand_rows(scope, node, name + "/weights", ones)

    def segment_types(summed):
        summed.attr["Tindices"].type, summed.attr["Tnumsegments"].type = row_type, types_pb2.DT_INT64

    def row_sum(base, vector):
        summed = scope.add(name + "/" + base, "UnsortedSegmentSum", [vector, kept_rows, num_rows], node.device)
        summed.attr["T"].type = dtype
        segment_types(summed)
        return scope.output(summed)

    if combiner == b"sum":
        _become(node, "UnsortedSegmentSum", [values, kept_rows, num_rows])
        segment_types(node)
        return True
    total = row_sum("row_sum", values)
    if combiner == b"mean":
        divisor = row_sum("weight_sum", column)
    else:
        squares = _typed(scope, name + "/squares", "Mul", [column, column], node)
        divisor = _typed(scope, name + "/root", "Sqrt", [row_sum("squares_sum", squares)], node)
    _become(node, "DivNoNan", [total, divisor])
    return True


_NO_FORM = {"ParseExampleV2": "ragged features, or keys that are not constants: parse with tf.io.FixedLenFeature "
                              "and VarLenFeature only",
            "Retf>Moments": "in a function's body, whose readers name its outputs by argument; build the graph with "
                            "RETF_BATCH_MOMENTS=0",
            "Retf>BatchNormalize": "in a function's body, whose readers name its output by argument; build the graph "
                                   "with RETF_BATCH_MOMENTS=0",
            "Retf>LayerMoments": "in a function's body, whose readers name its outputs by argument; build the graph "
                                 "with RETF_LAYER_NORM_KERNELS=0",
            "Retf>LayerNormalize": "in a function's body, whose readers name its output by argument; build the graph "
                                   "with RETF_LAYER_NORM_KERNELS=0",
            "Retf>EmbeddingLookupSparse": "in a function's body, whose readers name its output by argument; build "
                                          "the graph with RETF_FUSED_EMBEDDING=0",
            "Retf>ResourceEmbeddingLookupSparse": "in a function's body, whose readers name its output by argument; "
                                                  "build the graph with RETF_FUSED_EMBEDDING=0",
            "Retf>SafeEmbeddingLookupSparse": "in a function's body, whose readers name its output by argument; build "
                                              "the graph with RETF_FUSED_EMBEDDING=0",
            "Retf>ResourceSafeEmbeddingLookupSparse": "in a function's body, whose readers name its output by "
                                                      "argument; build the graph with RETF_FUSED_EMBEDDING=0",
            "Retf>GRURecurrence": "its gradient is in the graph; a SavedModel leaves the gradient out and a frozen graph "
                                  "has none, and those hold TF 1.15's loop in its place; or build the graph with "
                                  "RETF_FUSED_GRU=0"}
_SEGMENT_OPS = ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN", "SparseSegmentSumWithNumSegments",
                "SparseSegmentMeanWithNumSegments", "SparseSegmentSqrtNWithNumSegments", "SparseSegmentMeanGrad",
                "SparseSegmentSqrtNGrad")
# TF 1.15's form of a node, by op: True if the node now has it, False if this one cannot.
_REWRITES = dict([("ParseExampleV2", _parse_example_v1), ("SparseSegmentSumGrad", _sparse_segment_sum_grad),
                  ("Retf>GRURecurrence", _gru_recurrence_loop), ("Retf>Moments", _moments_ops),
                  ("Retf>BatchNormalize", lambda node, scope: _normalize_ops(node, scope, False)),
                  ("Retf>LayerMoments", _layer_moments_ops),
                  ("Retf>LayerNormalize", lambda node, scope: _normalize_ops(node, scope, True)),
                  ("Retf>EmbeddingLookupSparse", _embedding_lookup_ops),
                  ("Retf>ResourceEmbeddingLookupSparse", _embedding_lookup_ops),
                  ("Retf>SafeEmbeddingLookupSparse", _safe_embedding_lookup_ops),
                  ("Retf>ResourceSafeEmbeddingLookupSparse", _safe_embedding_lookup_ops)]
                 + [(op, _segment_ids_int32) for op in _SEGMENT_OPS])


def _current_op(op, cache):
    if op not in cache:
        from tensorflow.python.framework import op_def_registry
        cache[op] = op_def_registry.get(op)
    return cache[op]


def _to_tf115(scope, registry_115, findings, where, op_defs, rewrite):
    """Rewrite the nodes of ``scope`` in place (unless not ``rewrite``: only look); record in ``findings`` what
    TF 1.15 still cannot read."""
    from google.protobuf import text_format
    index = 0
    while index < len(scope.nodes):  # the nodes a rewrite adds are checked in turn
        node = scope.nodes[index]
        index += 1
        form = _REWRITES.get(node.op) if rewrite else None
        if form is not None and not form(node, scope):
            findings.add(node, "this node has no TF 1.15 form (%s)" % _NO_FORM.get(node.op, "its types"),
                         "serve it on this TensorFlow", where)
            continue
        known = registry_115.get(node.op)
        if known is None:
            findings.add(node, "TensorFlow 1.15 has no such op", _fix_for(node.op), where)
            continue
        if "_kernel" in node.attr and node.attr["_kernel"].s == _RETF_KERNEL_LABEL:
            if rewrite:  # TensorFlow's own op; TF 1.15 runs it on its own kernel
                del node.attr["_kernel"]
            else:
                findings.add(node, "kernel label \"retf\" (retf's kernel for TensorFlow's own %s), which TensorFlow "
                             "1.15 has no kernel for" % node.op, _REEXPORT, where)
        current = _current_op(node.op, op_defs)
        defaults = dict((a.name, a.default_value) for a in current.attr if a.HasField("default_value")) \
            if current is not None else {}
        for name in list(node.attr):
            if name in known or name.startswith("_"):
                continue
            if rewrite and name in defaults and node.attr[name] == defaults[name]:
                del node.attr[name]
            else:
                default = name in defaults and node.attr[name] == defaults[name]
                findings.add(node, "attribute %s = %s, which TensorFlow 1.15's %s does not have"
                             % (name, text_format.MessageToString(node.attr[name], as_one_line=True), node.op),
                             _REEXPORT if default or node.op in _REWRITES else
                             "build the graph without the argument that sets it", where)
        for name, default in known.items():
            if default is None and name not in node.attr and rewrite and name in defaults:
                node.attr[name].CopyFrom(defaults[name])  # stripped as 2.x's default; TF 1.15 needs it given
            elif default is None and name not in node.attr:
                findings.add(node, "no attribute %s, which TensorFlow 1.15's %s needs" % (name, node.op),
                             _REEXPORT if name in defaults else "serve it on this TensorFlow", where)


def to_tf115(graph_def, rewrite=True):
    """Rewrite ``graph_def`` (and its function library) in place into TF 1.15's form; return the Findings of what
    TF 1.15 still cannot read (with rewrite=False: of ``graph_def`` as it is, unchanged)."""
    registry_115, op_defs, findings = registry(), {}, Findings()
    _to_tf115(_Scope(graph_def.node, False), registry_115, findings, None, op_defs, rewrite)
    for function in graph_def.library.function:
        _to_tf115(_Scope(function.node_def, True), registry_115, findings, "function " + function.signature.name,
                  op_defs, rewrite)
    return findings


def _refresh_op_list(meta_graph_def):
    """The meta graph's list of the ops it uses (what loaders strip new default attributes by), after a rewrite."""
    if meta_graph_def.meta_info_def.HasField("stripped_op_list"):
        from tensorflow.python.framework import meta_graph
        meta_graph_def.meta_info_def.stripped_op_list.CopyFrom(
            meta_graph.stripped_op_list_for_graph(meta_graph_def.graph_def))


# --- a SavedModel keeps only what TF 1.15 can run or what it serves ------------------------------


def _node_name(reference):
    return reference.lstrip("^").split(":")[0]


def _served_roots(meta_graph_def):
    roots = set()
    for signature in meta_graph_def.signature_def.values():
        for info in list(signature.inputs.values()) + list(signature.outputs.values()):
            for name in (info.name, info.coo_sparse.values_tensor_name, info.coo_sparse.indices_tensor_name,
                         info.coo_sparse.dense_shape_tensor_name):
                if name:
                    roots.add(_node_name(name))
    saver = meta_graph_def.saver_def
    for name in (saver.filename_tensor_name, saver.save_tensor_name, saver.restore_op_name):
        if name:
            roots.add(_node_name(name))
    for key in _SERVED_COLLECTIONS:
        if key in meta_graph_def.collection_def:
            roots.update(_node_name(n) for n in meta_graph_def.collection_def[key].node_list.value)
    return roots


def _closure(starts, edges):
    seen, stack = set(starts), list(starts)
    while stack:
        for other in edges.get(stack.pop(), ()):
            if other not in seen:
                seen.add(other)
                stack.append(other)
    return seen


def _strings(message):
    """Every string in ``message``, its nested messages' and maps' too."""
    from google.protobuf import descriptor
    for field, value in message.ListFields():
        if field.type == descriptor.FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
            items = list(value.keys()) + list(value.values())
        elif field.label == descriptor.FieldDescriptor.LABEL_REPEATED:
            items = list(value)
        else:
            items = [value]
        for item in items:
            if isinstance(item, str):
                yield item
            elif hasattr(item, "ListFields"):
                for text in _strings(item):
                    yield text


def _prune_collections(meta_graph_def, removed):
    from tensorflow.python.framework import ops
    for key, collection in list(meta_graph_def.collection_def.items()):
        if collection.HasField("node_list"):
            kept = [n for n in collection.node_list.value if _node_name(n) not in removed]
            del collection.node_list.value[:]
            collection.node_list.value.extend(kept)
        elif collection.HasField("bytes_list"):
            kind = ops.get_collection_proto_type(key)
            if kind is None:
                continue
            kept = []
            for data in collection.bytes_list.value:
                message = kind()
                message.ParseFromString(data)
                if not any(_node_name(text) in removed for text in _strings(message)):
                    kept.append(data)
            del collection.bytes_list.value[:]
            collection.bytes_list.value.extend(kept)


def prune_for_serving(meta_graph_def, findings):
    """Leave out of a SavedModel's graph the nodes TF 1.15 cannot read that nothing it serves needs, and every
    node that depends on them (a training step). Returns the number of nodes left out."""
    nodes = meta_graph_def.graph_def.node
    inputs = dict((node.name, [_node_name(i) for i in node.input]) for node in nodes)
    keep = _closure(_served_roots(meta_graph_def) & set(inputs), inputs)
    unneeded = findings.unreadable - keep
    if not unneeded:
        return 0
    consumers = {}
    for name, sources in inputs.items():
        for source in sources:
            consumers.setdefault(source, []).append(name)
    removed = _closure(unneeded, consumers)
    kept = [node for node in nodes if node.name not in removed]
    del nodes[:]
    nodes.extend(kept)
    _prune_collections(meta_graph_def, removed)
    findings.keep_only(set(n.name for n in kept))
    return len(removed)


# --- where exports happen ----------------------------------------------------------------------------


def _say_once(what, findings, failure=None):
    """One RuntimeWarning per kind of export and finding: what TF 1.15 cannot load in ``what`` (``findings``; none
    to say when None), or why it was left as TensorFlow 2.x wrote it (``failure``)."""
    if failure is not None:
        key = failure
        text = ("%s: written in TensorFlow 2.x's form, as rewriting it into TF 1.15's failed (%s); check it with "
                "retf-tf115-check" % (what, failure))
    else:
        key = "; ".join(findings.lines()) if findings is not None else ""
        text = "%s: TensorFlow 1.15 cannot load it: %s" % (what, key)
    kind = what.split(" at ")[0]
    if not key or (kind, key) in _said:
        return
    _said.add((kind, key))
    import warnings
    warnings.warn(text, RuntimeWarning, stacklevel=4)


def _in_tf115_form(proto, rewrite, what):
    """``proto`` (a GraphDef or MetaGraphDef) rewritten by ``rewrite`` on a copy, copied back once it succeeded: an
    unforeseen graph leaves the export as TensorFlow 2.x wrote it, said once, and never fails the user's save."""
    copy = type(proto)()
    copy.CopyFrom(proto)
    try:
        findings = rewrite(copy)
    except Exception as error:  # the export itself must not fail for this
        _say_once(what, None, "%s: %s" % (type(error).__name__, error))
        return
    proto.CopyFrom(copy)
    _say_once(what, findings)


def _rewrite_meta_graph(meta_graph_def):
    """A meta graph (Saver's .meta) keeps the whole graph, for resuming: rewritten, not pruned, and nothing said
    of the training ops TF 1.15 lacks, as every checkpoint writes one (the check names them)."""
    to_tf115(meta_graph_def.graph_def)
    _refresh_op_list(meta_graph_def)


def _rewrite_graph_quietly(graph_def):
    """A GraphDef written with tf.train.write_graph, often a training graph for TensorBoard or freeze_graph."""
    to_tf115(graph_def)


def _rewrite_saved_meta_graph(meta_graph_def):
    findings = to_tf115(meta_graph_def.graph_def)
    if prune_for_serving(meta_graph_def, findings) and findings.unreadable:
        findings = to_tf115(meta_graph_def.graph_def)  # a served node the training ops kept from its form (a GRU loop)
    _refresh_op_list(meta_graph_def)
    return findings


def install(v1):
    """Route the 1.x API's exports (``v1``: tf.compat.v1) through to_tf115."""
    if not enabled():
        return
    import functools

    from tensorflow.python.framework import graph_util, graph_util_impl, meta_graph
    from tensorflow.python.saved_model import builder_impl

    create = meta_graph.create_meta_graph_def

    @functools.wraps(create)
    def create_meta_graph_def(*args, **kwargs):
        result = create(*args, **kwargs)
        _in_tf115_form(result, _rewrite_meta_graph, "a meta graph")
        return result

    meta_graph.create_meta_graph_def = create_meta_graph_def

    add = builder_impl._SavedModelBuilder._tag_and_add_meta_graph

    @functools.wraps(add)
    def _tag_and_add_meta_graph(self, meta_graph_def, tags, signature_def_map):
        add(self, meta_graph_def, tags, signature_def_map)
        _in_tf115_form(self._saved_model.meta_graphs[-1], _rewrite_saved_meta_graph,
                       "the SavedModel at %s" % _text(self._export_dir))

    builder_impl._SavedModelBuilder._tag_and_add_meta_graph = _tag_and_add_meta_graph

    freeze = graph_util_impl.convert_variables_to_constants

    @functools.wraps(freeze)
    def convert_variables_to_constants(*args, **kwargs):
        result = freeze(*args, **kwargs)
        _in_tf115_form(result, to_tf115, "the frozen GraphDef")
        return result

    write = v1.train.write_graph

    @functools.wraps(write)
    def write_graph(graph_or_graph_def, logdir, name, as_text=True):
        from tensorflow.core.framework import graph_pb2
        if isinstance(graph_or_graph_def, graph_pb2.GraphDef):
            graph_def = graph_pb2.GraphDef()
            graph_def.CopyFrom(graph_or_graph_def)
        else:
            graph_def = graph_or_graph_def.as_graph_def()
        _in_tf115_form(graph_def, _rewrite_graph_quietly, "a written GraphDef")
        return write(graph_def, logdir, name, as_text)

    for module in (graph_util, graph_util_impl, v1.graph_util, v1.compat.v1.graph_util):
        module.convert_variables_to_constants = convert_variables_to_constants
    for module in (v1.train, v1.io, v1.compat.v1.train, v1.compat.v1.io):
        module.write_graph = write_graph


def _text(path):
    return path.decode("utf-8", "replace") if isinstance(path, bytes) else str(path)


# --- retf-tf115-check ------------------------------------------------------------------------------


class CheckError(Exception):
    pass


def _read(path):
    """[(label, GraphDef or MetaGraphDef)] of a SavedModel folder, a meta graph or a GraphDef file."""
    from google.protobuf import message, text_format
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
    if os.path.isdir(path):
        for name, text in (("saved_model.pb", False), ("saved_model.pbtxt", True)):
            if os.path.isfile(os.path.join(path, name)):
                saved = saved_model_pb2.SavedModel()
                _parse(os.path.join(path, name), saved, text)
                return [("meta graph %s" % (",".join(m.meta_info_def.tags) or "untagged"), m)
                        for m in saved.meta_graphs]
        raise CheckError("%s: a folder without saved_model.pb or saved_model.pbtxt; give a SavedModel folder, "
                         "a .meta file or a GraphDef (.pb, .pbtxt)" % path)
    if not os.path.isfile(path):
        raise CheckError("%s: no such file or folder" % path)
    text = path.endswith((".pbtxt", ".txt"))
    kinds = (meta_graph_pb2.MetaGraphDef, graph_pb2.GraphDef) if path.endswith(".meta") else \
        (graph_pb2.GraphDef, meta_graph_pb2.MetaGraphDef)
    for kind in kinds:
        proto = kind()
        try:
            _parse(path, proto, text)
        except (message.DecodeError, text_format.ParseError, CheckError):
            continue
        nodes = proto.node if kind is graph_pb2.GraphDef else proto.graph_def.node
        if len(nodes):
            return [("graph", proto)]
    raise CheckError("%s: neither a GraphDef nor a MetaGraphDef with nodes; give a SavedModel folder, a .meta file "
                     "or a GraphDef (.pb, .pbtxt)" % path)


def _parse(path, proto, text):
    from google.protobuf import message, text_format
    try:
        with open(path, "rb") as source:
            data = source.read()
    except OSError as error:
        raise CheckError("%s: cannot be read: %s" % (path, error.strerror or error)) from error
    try:
        if text:
            text_format.Merge(data.decode("utf-8"), proto)
        else:
            proto.ParseFromString(data)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as error:
        raise CheckError("%s: cannot be read as %s: %s" % (path, type(proto).__name__, error)) from error


def check(path):
    """Lines saying what TensorFlow 1.15 would refuse in ``path``; empty if it reads all of it."""
    from tensorflow.core.framework import graph_pb2
    lines = []
    for label, proto in _read(path):
        graph_def = proto if isinstance(proto, graph_pb2.GraphDef) else proto.graph_def
        lines += ["%s, %s: %s" % (path, label, line) for line in to_tf115(graph_def, rewrite=False).lines()]
    return lines


def main(argv=None):
    """retf-tf115-check PATH...: exit 0 if TensorFlow 1.15 reads every one, 1 if not (saying what), 2 on bad input."""
    arguments = sys.argv[1:] if argv is None else argv
    if not arguments or arguments[0] in ("-h", "--help"):
        sys.stdout.write("usage: retf-tf115-check PATH...\nReports what TensorFlow 1.15 (its loaders, TF Serving 1.15) "
                         "would refuse in each SavedModel folder, meta graph (.meta) or GraphDef (.pb, .pbtxt).\n")
        return 0 if arguments else 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    refused = 0
    for path in arguments:
        try:
            lines = check(path)
        except CheckError as error:
            sys.stderr.write("retf-tf115-check: %s\n" % error)
            return 2
        if lines:
            refused += 1
            sys.stdout.write("".join("%s\n" % line for line in lines))
        else:
            sys.stdout.write("%s: TensorFlow 1.15 reads it\n" % path)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
