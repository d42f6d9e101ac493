"""One Keras for the 1.x API mode, as TF 1.15 had, and no silent self-deadlock (tensorflow._retf.keras_bridge).

TF 2.6.2 in 1.x API mode has two Keras copies in one process: `keras` (tf.keras, tf.layers,
tf.nn.rnn_cell) and the legacy `tensorflow.python.keras` (what TF 1.x-era libraries import, e.g.
DeepCTR's `from tensorflow.python.keras.layers import Layer`). Each keeps its own thread-local
call_context(), so a layer of one copy called inside a layer of the other thinks it is a top-level
functional-API call and runs create_keras_history, which evaluates "constant" inputs with a
Session. Inside tf.while_loop (dynamic_rnn) the graph's mutation lock is held by the same thread,
so Session._extend_graph waits on the session-run lock forever. TF 1.15 had one Keras copy.

The copies also keep separate backend state: a layer of one copy inside a model of the other gets
its variables tracked (for lazy initialization), its learning phase and its session from its own
copy, so after the hang is gone, Model.fit fails with "Could not find variable ..." (uninitialized).
So the `keras` copy's backend shares the per-process state objects of `tensorflow.python.keras`'s.
And a model of one copy lists only its own copy's layers in Model.layers (isinstance in
Layer._flatten_layers): DeepCTR's tf.keras.models.Model over tensorflow.python.keras layers then
saves 2 of 9 weights with save_weights(.h5) and save_model(.h5) raises KeyError; both copies'
_flatten_layers accept a Layer of either copy.

The `keras` copy is the package the API's `tf.keras` loads from: `keras`, or `tensorflow._vendor.keras` in a wheel
that keeps Keras under a private name (a user's own standalone Keras, under the public name, is never patched).

With layer_norm_moments, layer_norm_in_moments() also gives both copies' LayerNormalization TF 1.15's form (tf.nn.moments
and tf.nn.batch_normalization) in place of TF 2.x's FusedBatchNormV3.

The bootstrap calls apply() once, when it exposes the 1.x API (Python 3.6, standard library and TensorFlow only).
"""
import sys
import threading

_KERAS_UTILS = ["tensorflow.python.keras.engine.base_layer_utils"]  # apply() adds the keras copy's
_building_loops = threading.local()  # .graphs: graphs whose while loop this thread is building


def _in_any_layer_call():
    for name in _KERAS_UTILS:
        module = sys.modules.get(name)
        if module is not None and module.call_context().in_call:
            return True
    return False


def _bridge(base_layer_utils):
    """needs_keras_history: False inside a layer call of *either* Keras copy (TF 1.15's semantics)."""
    original = getattr(base_layer_utils, "needs_keras_history", None)
    if original is None or getattr(original, "_retf_bridged", False):
        return

    def needs_keras_history(tensors, ignore_call_context=False):
        if not ignore_call_context and _in_any_layer_call():
            return False
        return original(tensors, ignore_call_context=ignore_call_context)

    needs_keras_history.__doc__ = original.__doc__
    needs_keras_history._retf_bridged = True
    base_layer_utils.needs_keras_history = needs_keras_history


# Module-level state of keras/backend.py that tensorflow/python/keras/backend.py also has (identical
# code in TF 2.6.2 / Keras 2.6.0): the session, per-graph learning phase / variables / optimizers,
# layer-name uids, the FuncGraph thread-locals and the eager placeholder key those caches use.
_SHARED_BACKEND_STATE = ("_SESSION", "_GRAPH", "_CURRENT_SCRATCH_GRAPH", "PER_GRAPH_OBJECT_NAME_UIDS",
                         "OBSERVED_NAMES", "_DUMMY_EAGER_GRAPH", "_GRAPH_LEARNING_PHASES", "_GRAPH_VARIABLES",
                         "_GRAPH_TF_OPTIMIZERS")


def _share_backend_state(keras_backend):
    from tensorflow.python.keras import backend as tf_backend
    if keras_backend is tf_backend:
        return
    for name in _SHARED_BACKEND_STATE:
        if hasattr(keras_backend, name) and hasattr(tf_backend, name):  # a later Keras may rename one
            setattr(keras_backend, name, getattr(tf_backend, name))


def _count_both_copies_as_layers(keras_base_layer):
    from tensorflow.python.keras.engine import base_layer as tf_base_layer
    layer_types = (tf_base_layer.Layer, keras_base_layer.Layer)

    def _flatten_layers(self, recursive=True, include_self=True):
        for m in self._flatten_modules(recursive=recursive, include_self=include_self):
            if isinstance(m, layer_types):
                yield m

    _flatten_layers._retf_bridged = True
    for cls in set(layer_types):
        cls._flatten_layers = _flatten_layers


class _ThenPatch(object):
    """Loader wrapper: run the real loader, then patch the fresh module."""

    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)

    def __getattr__(self, name):  # get_source, get_code, is_package, ...
        return getattr(self._loader, name)


class _PatchOnImport(object):
    """sys.meta_path entry: patch modules of `patches` (name -> function) when imported (keras stays lazy)."""

    def __init__(self, patches):
        self.patches = patches

    def find_spec(self, fullname, path=None, target=None):
        patch = self.patches.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenPatch(spec.loader, patch)
                return spec
        return None


def _fail_fast_instead_of_deadlock():
    """Session.run/make_callable while this thread builds a tf.while_loop of the same graph: raise.

    BuildLoop holds graph._mutation_lock() (GroupLock group 0) and Session._extend_graph needs
    graph._session_run_lock() (group 1) of the same non-reentrant GroupLock: it can never succeed.
    """
    from tensorflow.python.client import session
    from tensorflow.python.ops import control_flow_ops

    build_loop = control_flow_ops.WhileContext.BuildLoop
    if getattr(build_loop, "_retf_tracked", False):
        return

    def BuildLoop(self, *args, **kwargs):
        from tensorflow.python.framework import ops
        graphs = getattr(_building_loops, "graphs", None)
        if graphs is None:
            graphs = _building_loops.graphs = []
        graphs.append(ops.get_default_graph())
        try:
            return build_loop(self, *args, **kwargs)
        finally:
            graphs.pop()

    BuildLoop.__doc__ = build_loop.__doc__
    BuildLoop._retf_tracked = True
    control_flow_ops.WhileContext.BuildLoop = BuildLoop

    extend_graph = session.BaseSession._extend_graph

    def _extend_graph(self):
        if any(g is self._graph for g in getattr(_building_loops, "graphs", ())):
            raise RuntimeError(
                "Session.run / make_callable was called while this thread is building a tf.while_loop "
                "(e.g. tf.nn.dynamic_rnn) in the same graph; TensorFlow would wait forever on the graph's "
                "session-run lock (the loop holds its mutation lock). Common cause: a Keras layer of one "
                "Keras copy (keras / tensorflow.python.keras) called at functional-API top level inside a "
                "loop body, so Keras evaluates its constant inputs with backend.function. Call it from "
                "inside a Layer.call, or build the loop outside the Keras functional API.")
        return extend_graph(self)

    _extend_graph.__doc__ = extend_graph.__doc__
    session.BaseSession._extend_graph = _extend_graph


def keras_package(keras_api):
    """The package TensorFlow's `tf.keras` (``keras_api``, a lazily loaded module: not loaded here) comes from, or None
    when it is TensorFlow's own module tree (TF 2.4's tf.keras is the legacy copy: one Keras)."""
    name = getattr(keras_api, "__name__", "")
    package = name.split(".api.")[0] if ".api." in name else None
    return None if package is None or package.startswith("tensorflow.python.keras") else package


def apply(keras):
    """Bridge TensorFlow's legacy Keras and ``keras`` (keras_package()'s answer; None: one Keras)."""
    _fail_fast_instead_of_deadlock()
    try:
        from tensorflow.python.keras.engine import base_layer_utils
    except ImportError:  # a TensorFlow without the legacy copy has one Keras: nothing to bridge
        return
    _bridge(base_layer_utils)
    if keras is None:
        return
    _KERAS_UTILS[1:] = [keras + ".engine.base_layer_utils"]
    _patch_on_import({keras + ".backend": _share_backend_state, keras + ".engine.base_layer_utils": _bridge,
                      keras + ".engine.base_layer": _count_both_copies_as_layers})


def _patch_on_import(patches):
    """Patch each module of ``patches`` (name -> function): now if it is imported, else when it is."""
    pending = {}
    for name, patch in patches.items():
        if name in sys.modules:
            patch(sys.modules[name])
        else:
            pending[name] = patch
    for finder in sys.meta_path:
        if isinstance(finder, _PatchOnImport):
            finder.patches.update(pending)
            return
    if pending:
        sys.meta_path.insert(0, _PatchOnImport(pending))


# Where each Keras copy defines LayerNormalization: TensorFlow's legacy copy (a module up to TF 2.5, a package from
# 2.6) and the keras package (keras.src from Keras 2.13).
_LEGACY_LAYER_NORM_MODULES = ("tensorflow.python.keras.layers.normalization",
                              "tensorflow.python.keras.layers.normalization.layer_normalization")
_KERAS_LAYER_NORM_MODULES = (".layers.normalization.layer_normalization",
                             ".src.layers.normalization.layer_normalization")


def _never_fused(module):
    """The module's LayerNormalization, if it defines one that can take the fused form, never takes it."""
    layer = getattr(module, "LayerNormalization", None)
    fused_can_be_used = getattr(layer, "_fused_can_be_used", None)
    if fused_can_be_used is None or getattr(fused_can_be_used, "_retf_moments", False):
        return

    def _fused_can_be_used(self, ndims):
        return False

    _fused_can_be_used.__doc__ = fused_can_be_used.__doc__
    _fused_can_be_used._retf_moments = True
    layer._fused_can_be_used = _fused_can_be_used


def layer_norm_in_moments(keras):
    """LayerNormalization of both Keras copies (``keras``: keras_package()'s answer) computes tf.nn.moments and
    tf.nn.batch_normalization, as TF 1.15's Keras did, instead of FusedBatchNormV3 over the rows as the channels of
    one NCHW image, which TensorFlow's CPU kernels transpose both ways (bench/bench_layer_norm.py)."""
    names = _LEGACY_LAYER_NORM_MODULES + tuple(keras + suffix for suffix in _KERAS_LAYER_NORM_MODULES if keras)
    _patch_on_import({name: _never_fused for name in names})
