"""The TF 1.x API as `import tensorflow` (expose_v1_api, its injected call), with 1.x behaviour."""

import os

from . import check_schema, switches

CONTRIB_MESSAGE = (
    "tf.contrib is not part of TensorFlow 2.x, which this build is; it provides the parts TF 1.x code uses most: "
    "tf.contrib.layers, .framework, .slim and .metrics (tf_slim), .rnn, .opt's LazyAdam, AdamW, MomentumW and "
    "MovingAverage optimizers, .data, .distribute, .estimator's heads, .summary, .feature_column's sequence columns, "
    ".tpu (TPUEstimator, with use_tpu=False too), .cluster_resolver, .lookup, .training (HParams), .crf, "
    ".seq2seq (attention and beam search), .legacy_seq2seq, .learn's ModeKeys. Replacements for the rest: "
    "tf.contrib.image -> tf.image; tf.contrib.cudnn_rnn -> tf.keras.layers' LSTM and GRU; tf.contrib.learn -> "
    "tf.estimator; tf.contrib.gan -> TF-GAN (tensorflow_gan); tf.contrib.signal -> tf.signal. See TensorFlow's "
    "guide on migrating from 1.x.")


class RemovedContrib(object):
    """Stands in for tf.contrib: any use says what replaced it."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError("tf.contrib.%s: %s" % (name, CONTRIB_MESSAGE))

    def __repr__(self):
        return "<tf.contrib: removed in TensorFlow 2.x>"


def _contrib():
    """tensorflow.contrib as the wheel ships it (the parts TF 1.x CTR code uses), or the stand-in."""
    try:
        import importlib
        return importlib.import_module("tensorflow.contrib")
    except ImportError:  # a wheel without the package: every use says what replaced it
        return RemovedContrib()


def _route_embedding_lookups(v1):
    """tf.nn.embedding_lookup_sparse and tf.nn.safe_embedding_lookup_sparse, and the module functions of those
    names that feature columns, linear_model and tf.contrib.layers call, become retf's: the fused ops for one 2-D
    table, TensorFlow's own functions for everything else."""
    from tensorflow.python.ops import embedding_ops

    from retf import nn
    embedding_ops.embedding_lookup_sparse = nn.embedding_lookup_sparse
    embedding_ops.safe_embedding_lookup_sparse = nn.safe_embedding_lookup_sparse
    for api in (v1, v1.compat.v1):
        api.nn.embedding_lookup_sparse = nn.embedding_lookup_sparse
        api.nn.safe_embedding_lookup_sparse = nn.safe_embedding_lookup_sparse


# DeepRec's optimizer names, provided in tf.train when the recipe sets [features] deeprec_api or deeprec_optimizers.
DEEPREC_OPTIMIZERS = ("AdamAsyncOptimizer", "AdagradDecayOptimizer")
DEEPREC_MESSAGE = ("tf.train.%s is one of DeepRec's optimizers, which this TensorFlow (%s) provides only when built "
                   "with deeprec_api = true (or deeprec_optimizers = true) in its retfwheel recipe's [features]. Fix: "
                   "rebuild the wheel with that switch, or use tf.train.AdamOptimizer / tf.train.AdagradOptimizer.")


def _deeprec_optimizers(train_module, provided, label):
    """Put DeepRec's optimizers into tf.train, or make asking for them say which switch provides them."""
    if provided:
        from retf import train
        for name in DEEPREC_OPTIMIZERS:
            setattr(train_module, name, getattr(train, name))
        return
    import types

    class TrainModule(types.ModuleType):
        def __getattr__(self, name):
            if name in DEEPREC_OPTIMIZERS:
                raise AttributeError(DEEPREC_MESSAGE % (name, label))
            raise AttributeError("module '%s' has no attribute '%s'" % (self.__name__, name))

    if type(train_module) is types.ModuleType:  # a plain module: Python 3.6 has no module __getattr__
        train_module.__class__ = TrainModule


# DeepRec's names for its EmbeddingVariable and options, in the tensorflow namespace with deeprec_api = true.
DEEPREC_NAMES = ("get_embedding_variable", "EmbeddingVariableOption", "CounterFilter", "CBFFilter", "GlobalStepEvict",
                 "L2WeightEvict", "InitializerOption", "StorageOption", "CheckpointOption", "WorkQueue",
                 "get_multihash_variable", "get_dynamic_dimension_embedding_variable")


def _deeprec_api(namespace, v1):
    """DeepRec's API: EmbeddingVariable (its names in tf and tf.feature_column, lookups that take it, and the
    optimizers, Saver and replica_device_setter taught about it), tf.staged's prefetching stage, and the sessions
    and savers taking DeepRec's incremental-checkpoint arguments."""
    try:
        from retf import embedding_variable, incremental_checkpoints, prefetch
    except ImportError as error:
        raise ImportError("DeepRec's EmbeddingVariable needs the retf op library, which this build does not ship "
                          "([ops] build = false in its recipe, or RETF_OPS=0): %s" % error) from error
    lookups = embedding_variable.install()
    for api in (v1, v1.compat.v1):
        for name, function in lookups.items():
            setattr(api.nn, name, function)
        for name in DEEPREC_NAMES:
            setattr(api, name, getattr(embedding_variable, name))
        api.feature_column.categorical_column_with_embedding = embedding_variable.categorical_column_with_embedding
        api.feature_column.categorical_column_with_adaptive_embedding = \
            embedding_variable.categorical_column_with_adaptive_embedding
        api.feature_column.embedding_column = embedding_variable.embedding_column_for(api.feature_column.embedding_column)
        api.GraphKeys.EMBEDDING_VARIABLES = embedding_variable.EMBEDDING_VARIABLES
    for name in DEEPREC_NAMES:
        namespace[name] = getattr(embedding_variable, name)
    for api in (namespace, vars(v1), vars(v1.compat.v1)):
        api["staged"], api["make_prefetch_hook"] = prefetch.staged, prefetch.make_prefetch_hook
    for name, members in embedding_variable.MODULES.items():
        _provide_module(name, members)
    sessions, _ = incremental_checkpoints.install()  # the hook and savers take DeepRec's arguments in place
    for api in (v1, v1.compat.v1):
        api.train.MonitoredTrainingSession = sessions
    _refuse_micro_batches()


def _provide_module(name, members):
    """A module DeepRec has and TensorFlow lacks, importable by its name, holding members."""
    import importlib
    import sys
    import types

    if name in sys.modules:
        return
    parent, _, leaf = name.rpartition(".")
    module = types.ModuleType(name, "DeepRec's %s, as this TensorFlow provides it." % leaf)
    vars(module).update(members)
    sys.modules[name] = module
    setattr(importlib.import_module(parent), leaf, module)


MICRO_BATCH_MESSAGE = (
    "ConfigProto.graph_options.optimizer_options.micro_batch_num = %d asks for DeepRec's micro-batching (each step's "
    "batch split in %d, their gradients summed), which this TensorFlow does not provide; a step here computes the whole "
    "batch at once.\nFix: leave micro_batch_num at 0 or 1 (drop --micro_batch from a DeepRec model-zoo command line)")


def _refuse_micro_batches():
    """DeepRec's ConfigProto fields (the build adds them to OptimizerOptions) are accepted and change nothing here but
    micro_batch_num, which would change what a step computes: a session given more than one refuses to start."""
    import functools

    from tensorflow.python.client import session

    original = session.BaseSession.__init__
    if getattr(original, "retf_deeprec_config", False):
        return

    @functools.wraps(original)
    def __init__(self, target="", graph=None, config=None):
        options = config.graph_options.optimizer_options if config is not None else None
        batches = getattr(options, "micro_batch_num", 0)
        if batches > 1:
            self._session = None  # what BaseSession.__del__ reads of a session that never started
            raise ValueError(MICRO_BATCH_MESSAGE % (batches, batches))
        original(self, target, graph, config)

    __init__.retf_deeprec_config = True
    session.BaseSession.__init__ = __init__


# Keras (private, 2.x) warns on every call of the TF 1.x layer API that TF 1.15 offered without a
# word: tf.layers.*, layer.apply, layer.add_variable, and tf.layers.batch_normalization's advice
# against tf.control_dependencies(UPDATE_OPS), which is the TF 1.x idiom and works. Both Keras copies
# warn: the private keras package and TensorFlow's own tensorflow.python.keras, whose layers the
# v1 feature columns (linear_model) are. A filter's module pattern must match from the name's start.
_INTENDED_V1_WARNINGS = r"(%s)\.(legacy_tf_layers|engine\.base_layer_v1)(\.|$)"  # in either Keras copy
# tf.data warns that Dataset.options() in graph mode keeps "the legacy behavior", which is TF 1.15's
# (Estimator input functions call it on every dataset).
_INTENDED_V1_DATA_WARNING = "To make it possible to preserve tf.data options across serialization boundaries"


def _quiet_intended_v1_use(keras):
    """In 1.x API mode, say no more than TF 1.15 said about using its API as intended (``keras``: the package
    tf.keras comes from, or None: TensorFlow's own copy)."""
    import re
    import warnings
    copies = "|".join(re.escape(name) for name in ("tensorflow.python.keras", keras) if name)
    warnings.filterwarnings("ignore", category=UserWarning, module=_INTENDED_V1_WARNINGS % copies)
    warnings.filterwarnings("ignore", message=_INTENDED_V1_DATA_WARNING, category=UserWarning)


# What 1.x API mode reports as tf.__version__, tf.VERSION and tf.version.VERSION: the API it serves.
# TF 1.x libraries branch on it (DeepCTR, DeepMatch, standalone Keras 2.3, tensorpack): reporting the
# build's 2.x version sent them down TF 2 paths, where their own TF 1.15 tests returned early or
# failed; with 1.15.5 their suites give TF 1.15.5's results test for test. No suffix: code parses it with
# StrictVersion and int(v.split(".")[2]). The build's own version stays in
# tensorflow.python.framework.versions (and tf.version.GIT_VERSION, pip, tf.sysconfig's flags).
V1_API_VERSION = "1.15.5"


def expose_v1_api(namespace, config):
    """Make the `tensorflow` module (its globals, ``namespace``) the TF 1.x API with 1.x behaviour."""
    if os.environ.get("RETF_API", "") == "2":
        return
    check_schema(config)
    from tensorflow._api.v2.compat import v1
    from tensorflow.python.util import deprecation
    with deprecation.silence():  # TF 1.15 printed no deprecation notices at import; neither do we
        v1.disable_v2_behavior()
    from . import keras_bridge
    keras = keras_bridge.keras_package(v1.keras)
    keras_bridge.apply(keras)  # tf.keras and tensorflow.python.keras act as TF 1.15's one Keras
    from . import tf115_export
    tf115_export.install(v1)  # SavedModels, meta graphs and frozen graphs in the form TF 1.15 reads
    for name in dir(v1):
        if not name.startswith("__"):
            namespace[name] = getattr(v1, name)
    namespace["contrib"] = _contrib()
    namespace["__version__"] = namespace["VERSION"] = V1_API_VERSION
    for api in (v1, v1.compat.v1):  # tf.version and tf.compat.v1 (a module of its own) say the same
        api.VERSION = api.version.VERSION = V1_API_VERSION
    _quiet_intended_v1_use(keras)
    sparse_adam = switches.switch(config, "sparse_adam")
    if sparse_adam != "dense":
        try:
            from retf import train
        except ImportError as error:
            raise ImportError("tf.train.AdamOptimizer: %s sparse Adam needs the retf op library, which this "
                              "build does not ship ([ops] build = false in its recipe): %s; unset "
                              "RETF_SPARSE_ADAM" % (sparse_adam, error)) from error
        v1.train.AdamOptimizer = train.AdamOptimizer if sparse_adam == "fused" else train.LazyAdamStandIn
    if switches.switch(config, "fused_sparse") == "1":
        try:
            from retf import train
        except ImportError as error:
            raise ImportError("tf.train.AdagradOptimizer: fused sparse updates need the retf op library, which this "
                              "build does not ship ([ops] build = false in its recipe): %s; set RETF_FUSED_SPARSE=0"
                              % error) from error
        v1.train.AdagradOptimizer = train.AdagradOptimizer
        v1.train.FtrlOptimizer = train.FtrlOptimizer
    if switches.switch(config, "fused_embedding") == "1":
        try:
            _route_embedding_lookups(v1)
        except ImportError as error:
            raise ImportError("tf.nn.embedding_lookup_sparse: the fused lookup needs the retf op library, which this "
                              "build does not ship ([ops] build = false in its recipe): %s; set RETF_FUSED_EMBEDDING=0"
                              % error) from error
    if switches.switch(config, "fused_matmul_grad") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("MatMul gradients: the transposed product needs the retf op library, which this build "
                              "does not ship ([ops] build = false in its recipe): %s; set RETF_FUSED_MATMUL_GRAD=0"
                              % error) from error
        ops.route_weight_gradients()
    if switches.switch(config, "fused_concat_grad") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("concat gradients: retf's kernel needs the retf op library, which this build does not "
                              "ship ([ops] build = false in its recipe): %s; set RETF_FUSED_CONCAT_GRAD=0"
                              % error) from error
        ops.route_pair_concat_gradients()
    if switches.switch(config, "pair_dense_linear") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("tf.matmul: the activation unit's products by pieces ship in the retf op package, which "
                              "this build does not ship ([ops] build = false in its recipe): %s; set "
                              "RETF_PAIR_DENSE_LINEAR=0" % error) from error
        ops.route_pair_dense_products()
    if switches.switch(config, "fused_gru") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("tf.nn.dynamic_rnn: retf's GRU kernel needs the retf op library, which this build does "
                              "not ship ([ops] build = false in its recipe): %s; set RETF_FUSED_GRU=0" % error) from error
        ops.route_dynamic_rnn()
    if switches.switch(config, "small_batch_matmul") == "1":
        try:
            from retf import ops
            ops.route_batch_matmul()
        except ImportError as error:
            raise ImportError("tf.matmul: retf's batch product kernel needs the retf op library, which this build "
                              "does not ship ([ops] build = false in its recipe): %s; set RETF_SMALL_BATCH_MATMUL=0"
                              % error) from error
    if switches.switch(config, "fast_bias_grad") == "1":
        try:
            from retf import ops
            ops.route_bias_gradients()
        except ImportError as error:
            raise ImportError("BiasAddGrad: retf's kernel needs the retf op library, which this build does not ship "
                              "([ops] build = false in its recipe): %s; set RETF_FAST_BIAS_GRAD=0" % error) from error
    if switches.switch(config, "batch_moments") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("tf.nn.moments and tf.nn.batch_normalization: retf's kernels need the retf op library, "
                              "which this build does not ship ([ops] build = false in its recipe): %s; set "
                              "RETF_BATCH_MOMENTS=0" % error) from error
        ops.route_batch_moments()
    if switches.switch(config, "layer_norm_kernels") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("tf.nn.moments and tf.nn.batch_normalization: retf's layer normalization kernels need "
                              "the retf op library, which this build does not ship ([ops] build = false in its "
                              "recipe): %s; set RETF_LAYER_NORM_KERNELS=0" % error) from error
        ops.route_layer_moments()
    if switches.switch(config, "layer_norm_moments") == "1":
        keras_bridge.layer_norm_in_moments(keras)
    if switches.switch(config, "fast_decode_csv") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("DecodeCSV: retf's kernel needs the retf op library, which this build does not ship "
                              "([ops] build = false in its recipe): %s; set RETF_FAST_DECODE_CSV=0" % error) from error
        try:
            ops.use_fast_decode_csv()
        except (OSError, AttributeError) as error:  # the library not loaded, or one without the kernel
            raise ImportError("DecodeCSV: cannot register retf's kernel from the retf op library: %s\nFix: reinstall "
                              "this wheel; or set RETF_FAST_DECODE_CSV=0 to keep TensorFlow's kernel" % error) from error
    # the build's choice even with RETF_OPS=0: then using one says the op library is off, not that it is missing
    deeprec_api = config["features"]["deeprec_api"]["value"] == "1"
    _deeprec_optimizers(v1.train, deeprec_api or config["features"]["deeprec_optimizers"]["value"] == "1",
                        config["label"])
    if deeprec_api:
        _deeprec_api(namespace, v1)
    namespace["__all__"] = [n for n in dir(v1) if not n.startswith("_")] + ["contrib"]
