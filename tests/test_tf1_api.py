"""The 1.x API mode on the real wheel, in the emulated TF 1.15 environment (slow; run in CI)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import PROGRAM_TIMEOUT, RECIPES, installed_environment, run_bounded, run_cli

pytestmark = pytest.mark.slow

LAZY_PROBE = """
import json
import numpy as np
import tensorflow as tf

table = tf.get_variable("table", initializer=np.ones((4, 2), np.float32))
ids = tf.placeholder(tf.int32, [None])
train = tf.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(tf.nn.embedding_lookup(table, ids)))
with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    session.run(train, {ids: [0]})
    first = session.run(table)[0].tolist()
    session.run(train, {ids: [1]})  # row 0 untouched: dense Adam still moves it (momentum), lazy Adam does not
    print(json.dumps({"optimizer": tf.train.AdamOptimizer.__module__ + "." + tf.train.AdamOptimizer.__name__,
                      "untouched_row_moved": session.run(table)[0].tolist() != first,
                      "slots": sorted(v.op.name for v in tf.global_variables() if v.op.name.startswith("table/"))}))
"""

SURFACE = """
import json, os
import tensorflow as tf
from tensorflow.python.ops import partitioned_variables
from tensorflow.python.framework import versions
report = {"version": tf.__version__, "versions": [tf.VERSION, tf.version.VERSION, tf.compat.v1.VERSION],
          "build": versions.__version__, "git": tf.version.GIT_VERSION, "eager": tf.executing_eagerly(), "placeholder": hasattr(tf, "placeholder"),
          "session": hasattr(tf, "Session"), "v2": hasattr(tf.compat.v2, "function"), "v1": tf.compat.v1.Session is tf.Session,
          "partitioned": hasattr(partitioned_variables, "fixed_size_partitioner"),
          "bfc": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC")}
try:
    import tensorflow.contrib.gan
except ImportError as error:
    report["contrib_import"] = str(error)
try:
    tf.contrib.gan
except AttributeError as error:
    report["contrib_attribute"] = str(error)
try:
    tf.contrib.layers.sparse_column_with_hash_bucket
except AttributeError as error:
    report["contrib_missing_name"] = str(error)
import tensorflow.contrib.layers
import tf_slim
report["contrib_layers"] = tf.contrib.layers.batch_norm is tf_slim.batch_norm
report["learn_modes"] = [tf.contrib.learn.ModeKeys.TRAIN, tf.contrib.learn.ModeKeys.EVAL, tf.contrib.learn.ModeKeys.INFER]
try:
    tf.contrib.learn.Estimator
except AttributeError as error:
    report["learn_missing_name"] = str(error)
# the module paths BERT, ALBERT, NMT and tensorflow/tpu import from (the survey in docs/guide.md)
from tensorflow.contrib import tpu as contrib_tpu, cluster_resolver as contrib_cluster_resolver
from tensorflow.contrib.tpu.python.tpu import tpu_config, tpu_estimator, tpu_optimizer
from tensorflow.contrib.training.python.training import hparam
report["contrib_paths"] = [tpu_estimator.TPUEstimator is tf.contrib.tpu.TPUEstimator is contrib_tpu.TPUEstimator,
                           tpu_config.RunConfig is tf.contrib.tpu.RunConfig,
                           tpu_optimizer.CrossShardOptimizer is tf.contrib.tpu.CrossShardOptimizer,
                           hparam.HParams is tf.contrib.training.HParams,
                           contrib_cluster_resolver.TPUClusterResolver is tf.distribute.cluster_resolver.TPUClusterResolver]
print(json.dumps(report))
"""


def run_in(recipe, venv, code, **environ):

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETF_", "TF_CPU"))}
    env.update(environ)
    result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(recipe), "--env", str(venv),
                             "python", "-c", code], PROGRAM_TIMEOUT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# A probe is one process that spends its time importing TensorFlow on one core; this machine has two.
_PROBES = ThreadPoolExecutor(max_workers=2)


def run_in_each(recipe, venv, code, *environs: dict[str, str]) -> list[dict]:
    """``code`` run as run_in runs it once with each of ``environs``'s variables, two at a time: the reports, in
    their order."""
    return list(_PROBES.map(lambda environ: run_in(recipe, venv, code, **environ), environs))


@pytest.fixture(scope="module")
def lazy_recipe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lazy-recipe")
    text = (RECIPES / "emulated-py36-tf1api.toml").read_text().replace('sparse_adam = "fused"', 'sparse_adam = "lazy"')
    (folder / "emulated-py36-tf1api-lazy.toml").write_text(text)
    shutil.copy(RECIPES / "emulated-py36-tf1api.tensorflow-cpu-2.6.2.lock",
                folder / "emulated-py36-tf1api-lazy.tensorflow-cpu-2.6.2.lock")
    return folder / "emulated-py36-tf1api-lazy.toml"


def test_import_tensorflow_is_the_1x_api(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    report = run_in(recipe, v1_venv, SURFACE)
    # the API it serves, as TF 1.x libraries branch on it; the build's own version where TensorFlow keeps it
    assert report["version"] == "1.15.5" and report["versions"] == ["1.15.5"] * 3 and report["eager"] is False
    assert report["build"] == "2.6.2" and report["git"].startswith("v2.6")
    assert report["placeholder"] and report["session"] and report["v2"] and report["v1"] and report["partitioned"]
    for key in ("contrib_import", "contrib_attribute"):  # a part not provided says what replaced it
        assert "not part of TensorFlow 2.x" in report[key] and "tf.contrib.image -> tf.image" in report[key]
    assert report["contrib_missing_name"].startswith("tf.contrib.layers.sparse_column_with_hash_bucket is not provided")
    assert "tf.feature_column" in report["contrib_missing_name"]
    assert report["contrib_layers"] is True  # tf_slim, served from the wheel
    assert report["contrib_paths"] == [True] * 5
    assert report["learn_modes"] == ["train", "eval", "infer"]  # TF 1.15's, as tensorflow/nmt branches on them
    assert "tf.contrib.learn became tf.estimator" in report["learn_missing_name"]


def test_the_allocator_is_tensorflows_unless_the_user_chose(v1_venv):
    # bench/MODELS.md ("The BFC allocator") does not show the BFC allocator helping across the models, so the
    # recipe sets no allocator; a user's own setting reaches TensorFlow untouched.
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    default, chosen = run_in_each(recipe, v1_venv, SURFACE, {}, {"TF_CPU_ALLOCATOR_USE_BFC": "true"})
    assert default["bfc"] is None and chosen["bfc"] == "true"


def test_2x_api_on_request(v1_venv):
    report = run_in(RECIPES / "emulated-py36-tf1api.toml", v1_venv,
                    "import json, tensorflow as tf; print(json.dumps({'eager': tf.executing_eagerly(), 'version': tf.__version__}))",
                    RETF_API="2")
    assert report == {"eager": True, "version": "2.6.2"}


def test_adam_keeps_dense_semantics_through_the_fused_kernel(v1_venv):
    report = run_in(RECIPES / "emulated-py36-tf1api.toml", v1_venv, LAZY_PROBE)
    assert report == {"optimizer": "retf.train.AdamOptimizer", "untouched_row_moved": True,
                      "slots": ["table/Adam", "table/Adam_1"]}


def test_sparse_adam_chosen_per_process(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    stock, lazy = run_in_each(recipe, v1_venv, LAZY_PROBE, {"RETF_SPARSE_ADAM": "dense"}, {"RETF_SPARSE_ADAM": "lazy"})
    assert stock == {"optimizer": "tensorflow.python.training.adam.AdamOptimizer", "untouched_row_moved": True,
                     "slots": ["table/Adam", "table/Adam_1"]}
    assert lazy["optimizer"] == "retf.train.LazyAdamStandIn" and lazy["untouched_row_moved"] is False
    result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(recipe), "--env", str(v1_venv),
                             "python", "-c", "import tensorflow"], PROGRAM_TIMEOUT,
                            env=dict(os.environ, RETF_SPARSE_ADAM="eager"))
    assert result.returncode != 0
    assert "RETF_SPARSE_ADAM=eager is not one of dense, fused, lazy" in result.stderr


def test_opt_in_lazy_adam_leaves_untouched_rows_alone(real_wheel, python36, lazy_recipe, tmp_path):
    """The recipe's switch, not the process's: the wheel built with sparse_adam = "lazy" (verify proves the same
    build with the shipped switch, v1_venv) takes DeepRec's semantics with no variable set."""
    built = run_cli("build", real_wheel, "--recipe", lazy_recipe, "--out-dir", tmp_path / "out")
    assert built.returncode == 0, built.stderr[-3000:]
    venv = installed_environment(lazy_recipe, Path(built.stdout.strip().splitlines()[-1]), tmp_path / "env")
    report = run_in(lazy_recipe, venv, LAZY_PROBE)
    assert report == {"optimizer": "retf.train.LazyAdamStandIn", "untouched_row_moved": False,
                      "slots": ["table/Adam", "table/Adam_1"]}


LEGACY_LAYERS = """
import json, sys, warnings
import tensorflow as tf
if hasattr(tf, "placeholder"):
    v1 = tf
else:
    v1 = tf.compat.v1
    v1.disable_v2_behavior()
x = v1.placeholder(tf.float32, [None, 4])
h = v1.layers.dense(x, 8)
h = v1.layers.batch_normalization(h, training=True)
layer = v1.layers.Dense(2)
out = layer.apply(h)
with v1.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
    out = tf.identity(out)
wide = v1.feature_column.linear_model({"a": v1.placeholder(tf.float32, [None, 1])},
                                     [v1.feature_column.numeric_column("a")])
print(json.dumps({"ok": True}))
"""


def test_the_1x_layer_api_used_as_intended_says_nothing(v1_venv):
    """TF 1.15 printed no warning for tf.layers, layer.apply, UPDATE_OPS or linear_model (whose layer calls
    add_variable); in 1.x API mode neither does the wheel."""
    recipe = RECIPES / "emulated-py36-tf1api.toml"

    def stderr_of(**environ):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RETF_", "TF_CPU"))}
        env.update(environ)
        result = run_bounded([sys.executable, "-m", "retfwheel", "run", "--recipe", str(recipe), "--env", str(v1_venv),
                                 "python", "-c", LEGACY_LAYERS], PROGRAM_TIMEOUT, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stderr

    assert "UserWarning" not in stderr_of()
    assert "`tf.layers.dense` is deprecated" in stderr_of(RETF_API="2")  # the 2.x API keeps Keras' own advice


FUSED_PROBE = """
import json
import os
import numpy as np
import tensorflow as tf

report = {}
for name in ("AdagradOptimizer", "FtrlOptimizer"):
    cls = getattr(tf.train, name)
    report[name] = cls.__module__ + "." + cls.__name__
    with tf.Graph().as_default():
        table = tf.get_variable("table", initializer=np.ones((4, 2), np.float32))
        train = cls(0.1).minimize(tf.reduce_sum(tf.nn.embedding_lookup(table, [0, 2, 0])))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            session.run(train)
            report[name + "_ops"] = sorted({op.type for op in tf.get_default_graph().get_operations()
                                            if "Apply" in op.type})
for name in ("AdamAsyncOptimizer", "AdagradDecayOptimizer"):
    report[name] = getattr(tf.train, name).__module__  # deeprec_api = true provides them
# The switch's other side, on this same wheel: the bootstrap puts retf's classes in a module.
import types
from tensorflow._retf import v1_api
module = types.ModuleType("train")
v1_api._deeprec_optimizers(module, True, "label")
report["provided"] = [module.AdamAsyncOptimizer.__module__, module.AdagradDecayOptimizer.__name__]
# DeepRec's documented usage, in graph mode on reference variables (their sparse updates need the op library).
for name in ("AdamAsyncOptimizer", "AdagradDecayOptimizer") if os.environ.get("RETF_OPS") != "0" else ():
    with tf.Graph().as_default():
        var = tf.get_variable("var_0", shape=[10, 16], initializer=tf.ones_initializer(tf.float32))
        emb = tf.nn.embedding_lookup(var, tf.cast([0, 1, 2, 5, 6, 7], tf.int64))
        loss = tf.reduce_sum(tf.square(emb - 0.5))
        gs = tf.train.get_or_create_global_step()
        opt = module.AdamAsyncOptimizer(0.1) if name == "AdamAsyncOptimizer" else module.AdagradDecayOptimizer(0.1, gs)
        train_op = opt.apply_gradients(opt.compute_gradients(loss), global_step=gs)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            report[name + "_losses"] = [float(session.run([loss, train_op])[0]) for _ in range(3)]
            report[name + "_ops"] = sorted({op.type for op in tf.get_default_graph().get_operations()
                                            if op.type.startswith("Retf>")})
print(json.dumps(report))
"""


DEEPREC_MODULES_PROBE = """
import json
import tensorflow as tf
report = {}
for module, statement in (("work_queue", "from tensorflow.python.ops.work_queue import WorkQueue; WorkQueue(['a.csv'])"),
                          ("parquet", "from tensorflow.python.data.experimental.ops import parquet_dataset_ops; "
                                      "parquet_dataset_ops.ParquetDataset('a.parquet', batch_size=8)")):
    try:
        exec(statement)
    except Exception as error:
        report[module] = type(error).__name__ + ": " + str(error)
print(json.dumps(report))
"""


def test_deeprec_modules_its_scripts_import_are_there_and_name_the_flag_to_change(v1_venv):
    """DeepRec's model-zoo scripts import WorkQueue and ParquetDataset from DeepRec's own modules (behind --workqueue
    and --parquet_dataset): the import works and the call says which flag to change, not an ImportError."""
    report = run_in(RECIPES / "emulated-py36-tf1api.toml", v1_venv, DEEPREC_MODULES_PROBE)
    assert report["work_queue"].startswith("EmbeddingVariableError: tf.WorkQueue: DeepRec's work queue is not provided")
    assert report["work_queue"].endswith("Fix: drop the script's --workqueue flag"), report
    assert report["parquet"].startswith("EmbeddingVariableError: ParquetDataset: DeepRec's Parquet reader is not provided")
    assert report["parquet"].endswith("Fix: pass the script's --parquet_dataset False"), report


def test_adagrad_and_ftrl_take_the_fused_kernels_and_deeprec_names_come_with_their_switch(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    report, stock, off = run_in_each(recipe, v1_venv, FUSED_PROBE, {}, {"RETF_FUSED_SPARSE": "0"}, {"RETF_OPS": "0"})
    assert report["AdagradOptimizer"] == "retf.train.AdagradOptimizer"
    assert report["FtrlOptimizer"] == "retf.train.FtrlOptimizer"
    assert report["AdagradOptimizer_ops"] == ["Retf>SparseApplyAdagradRef"]
    assert report["FtrlOptimizer_ops"] == ["Retf>SparseApplyFtrlRef"]
    for name in ("AdamAsyncOptimizer", "AdagradDecayOptimizer"):  # without it: tests/test_bootstrap.py
        assert report[name] == "retf.train"
    assert report["provided"] == ["retf.train", "AdagradDecayOptimizer"]
    for name, op in (("AdamAsyncOptimizer", "Retf>SparseApplyAdamAsyncRef"),
                     ("AdagradDecayOptimizer", "Retf>SparseApplyAdagradDecayRef")):
        losses = report[name + "_losses"]
        assert losses[0] == 6 * 16 * 0.25 and losses[2] < losses[1] < losses[0], losses
        assert report[name + "_ops"] == [op]
    assert stock["AdagradOptimizer"] == "tensorflow.python.training.adagrad.AdagradOptimizer"
    assert stock["AdagradOptimizer_ops"] == ["SparseApplyAdagrad"]
    assert stock["FtrlOptimizer_ops"] == ["SparseApplyFtrl"]
    assert off["FtrlOptimizer"] == "tensorflow.python.training.ftrl.FtrlOptimizer"


EMBEDDING_PROBE = """
import json
import numpy as np
import tensorflow as tf

def retf_ops(graph):
    return sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})

report = {"public": tf.nn.embedding_lookup_sparse.__module__}
# A TF 1.15 model's feature columns: a hashed column's embedding (mean) and linear_model's weights (sum).
with tf.Graph().as_default() as graph:
    tf.set_random_seed(1)
    features = {"c": tf.constant([["a"], ["b"], ["a"], ["d"]]), "n": tf.constant([[1.0], [2.0], [0.5], [0.0]])}
    column = tf.feature_column.categorical_column_with_hash_bucket("c", 50)
    embedded = tf.feature_column.input_layer(features, [tf.feature_column.embedding_column(
        column, 4, initializer=tf.truncated_normal_initializer(stddev=0.1, seed=3))])
    wide = tf.feature_column.linear_model(features, [column, tf.feature_column.numeric_column("n")])
    loss = tf.reduce_mean(tf.square(tf.reduce_sum(embedded, 1, keepdims=True) + wide - 1.0))
    train = tf.train.AdagradOptimizer(0.5).minimize(loss)
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        report["losses"] = [float(session.run([loss, train])[0]) for _ in range(4)]
    report["ops"] = retf_ops(graph)
# A partitioned table takes TensorFlow's own path; a single table on a parameter server is looked up there.
with tf.Graph().as_default() as graph:
    sp_ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([1, 3, 3], tf.int64), [2, 2])
    parts = tf.get_variable("parts", [6, 2], partitioner=tf.fixed_size_partitioner(2))
    tf.nn.embedding_lookup_sparse(parts, sp_ids, None)
    report["partitioned_ops"] = retf_ops(graph)
    with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
        table = tf.get_variable("table", [6, 2])
        tf.nn.embedding_lookup_sparse(table, sp_ids, None)
    report["devices"] = sorted({op.device for op in graph.get_operations() if op.type.startswith("Retf>")})
print(json.dumps(report))
"""


WEIGHT_GRADIENT_PROBE = """
import json
import numpy as np
import tensorflow as tf

# A TF 1.15 model's dense layers (tf.layers.dense: MatMul + BiasAdd) over a batch the graph does not know.
with tf.Graph().as_default() as graph:
    tf.set_random_seed(1)
    x = tf.placeholder(tf.float32, [None, 36])
    hidden = tf.layers.dense(x, 20, activation=tf.nn.relu, kernel_initializer=tf.glorot_uniform_initializer(seed=2))
    logits = tf.layers.dense(hidden, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=3))
    loss = tf.reduce_mean(tf.square(logits - 1.0))
    train = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    feed = {x: np.random.RandomState(4).uniform(-1, 1, (700, 36)).astype(np.float32)}
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        losses = [float(session.run([loss, train], feed)[0]) for _ in range(5)]
    ops = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
print(json.dumps({"losses": losses, "ops": ops}))
"""


def test_small_weights_take_retfs_weight_gradient_by_the_switch(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    routed, stock = run_in_each(recipe, v1_venv, WEIGHT_GRADIENT_PROBE, {"RETF_FUSED_MATMUL_GRAD": "1"},
                                {"RETF_FUSED_MATMUL_GRAD": "0"})
    assert routed["ops"] == ["Retf>TransposedMatMul"] and stock["ops"] == []
    # Only the order of the weight gradients' sums differs.
    assert_same_training(routed["losses"], stock["losses"])


def assert_same_training(routed, stock):
    """The routed probe trains, and to the stock one's losses within float32 rounding."""
    assert routed[-1] < routed[0]
    for ours, theirs in zip(routed, stock):
        assert abs(ours - theirs) <= 1e-5 * max(1.0, abs(theirs)), (routed, stock)


ACTIVATION_UNIT_PROBE = """
import json
import numpy as np
import tensorflow as tf

def ancestors(*ops):
    # ops and every op they wait for: what a session runs to run them.
    found, stack = set(ops), list(ops)
    while stack:
        op = stack.pop()
        for above in [value.op for value in op.inputs] + list(op.control_inputs):
            if above not in found:
                found.add(above)
                stack.append(above)
    return found


def unordered_reads(graph, fetches):
    # The ops a step of fetches runs that read an updated variable (or a tensor sharing its buffer) and that the
    # update does not wait for: each could read the variable half-updated.
    sharing = {"Identity", "Split", "SplitV", "Reshape", "Slice", "StridedSlice", "Squeeze", "ExpandDims"}
    runs = ancestors(*fetches)
    found = []
    for update in graph.get_operations():
        if "Apply" not in update.type or update.inputs[0].op.type != "VariableV2":
            continue
        before = ancestors(update)
        values = list(update.inputs[0].op.outputs)
        while values:
            for reader in values.pop().consumers():
                if reader.type in sharing:
                    values.extend(reader.outputs)
                elif reader in runs and reader is not update and reader not in before:
                    found.append(reader.name)
    return sorted(set(found))


# DIN's activation unit as TF 1.15 programs write it: [q, k, q - k, q * k] into an MLP, trained with Adam.
with tf.Graph().as_default() as graph:
    tf.set_random_seed(1)
    items = tf.get_variable("items", [50, 8], initializer=tf.truncated_normal_initializer(stddev=0.5, seed=5))
    ad = tf.placeholder(tf.int64, [None])
    history = tf.placeholder(tf.int64, [None, None])
    query, keys = tf.nn.embedding_lookup(items, ad), tf.nn.embedding_lookup(items, history)
    queries = tf.tile(tf.expand_dims(query, 1), [1, tf.shape(keys)[1], 1])
    din_all = tf.concat([queries, keys, queries - keys, queries * keys], axis=-1)
    hidden = tf.layers.dense(din_all, 6, activation=tf.nn.sigmoid, kernel_initializer=tf.glorot_uniform_initializer(seed=2))
    scores = tf.squeeze(tf.layers.dense(hidden, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=3)), 2)
    interest = tf.reduce_sum(keys * tf.expand_dims(tf.nn.softmax(scores), 2), axis=1)
    loss = tf.reduce_mean(tf.square(tf.reduce_sum(interest * query, axis=1) - 1.0))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    rng = np.random.RandomState(4)
    feed = {ad: rng.randint(0, 50, 64), history: rng.randint(0, 50, (64, 12))}
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        losses = [float(session.run([loss, train], feed)[0]) for _ in range(8)]
    ops = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")})
print(json.dumps({"losses": losses, "ops": ops, "unordered_reads": unordered_reads(graph, [loss.op, train]),
                  "concat_computed": din_all.op in ancestors(loss.op, train), "hidden_shape": hidden.shape.as_list(),
                  "updates": sorted({op.type for op in graph.get_operations() if "Apply" in op.type})}))
"""


def test_the_activation_units_concat_gradient_takes_retfs_kernel_by_the_switch(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    # The dense layer as one product over the concat, whose gradient the switch routes.
    routed, stock = run_in_each(recipe, v1_venv, ACTIVATION_UNIT_PROBE, *(
        {"RETF_FUSED_CONCAT_GRAD": concat, "RETF_FUSED_MATMUL_GRAD": "0", "RETF_PAIR_DENSE_LINEAR": "0"}
        for concat in ("1", "0")))
    # The dense layer's: its operands' gradients (the query's once per query), its lazy input gradient.
    for op in ("Retf>RepeatedPairGrad", "Retf>PairDenseInputGrad"):
        assert op in routed["ops"] and op not in stock["ops"], (routed["ops"], stock["ops"])
    # Adam updates the layer's weights only after every gradient op reading them has run.
    for result in (routed, stock):
        assert "ApplyAdam" in result["updates"] and result["unordered_reads"] == [], result
    # The layer's gradients are the same sums grouped by piece.
    assert_same_training(routed["losses"], stock["losses"])


def test_the_activation_units_dense_layer_computes_by_its_pieces_by_the_switch(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    # the recipe's pair_dense_linear = true, then off
    linear, product = run_in_each(recipe, v1_venv, ACTIVATION_UNIT_PROBE, {}, {"RETF_PAIR_DENSE_LINEAR": "0"})
    # By pieces no one computes the concat, and the routed gradient over it is not built.
    assert (linear["concat_computed"], product["concat_computed"]) == (False, True)
    assert "Retf>PairDenseInputGrad" not in linear["ops"] and "Retf>PairDenseInputGrad" in product["ops"]
    assert linear["hidden_shape"] == product["hidden_shape"] == [None, None, 6]
    for result in (linear, product):
        assert "ApplyAdam" in result["updates"] and result["unordered_reads"] == [], result
    assert_same_training(linear["losses"], product["losses"])


DECODE_CSV_PROBE = """
import json
import tensorflow as tf
from tensorflow.python.framework import kernels

# A TF 1.15 input function: lines batched, then tf.decode_csv in Dataset.map; one malformed batch last.
lines = ["%d,%s,u%d,%s" % (i, i * 0.5, i % 7, "|".join(["12"] * (i % 30))) for i in range(64)] + ["1,2"]
with tf.Graph().as_default():
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(16).map(
        lambda line: tf.decode_csv(line, record_defaults=[[0], [0.0], [""], [""]]), num_parallel_calls=2)
    batch = dataset.make_one_shot_iterator().get_next()
    values, error = [], None
    with tf.Session() as session:
        while True:
            try:
                values.append([column.tolist() for column in session.run(batch)])
            except tf.errors.OutOfRangeError:
                break
            except tf.errors.InvalidArgumentError as failure:
                error = failure.message.split("\\n")[0]
                break
    ops = sorted({op.type for op in tf.get_default_graph().get_operations()})
priorities = sorted(k.priority for k in kernels.get_registered_kernels_for_op("DecodeCSV").kernel
                    if k.device_type == "CPU" and not k.label)
values = [[[x.decode() if isinstance(x, bytes) else x for x in column] for column in batch] for batch in values]
print(json.dumps({"values": values, "error": error, "priorities": priorities,
                  "retf_ops": [op for op in ops if op.startswith("Retf>")]}))
"""


def test_decode_csv_takes_retfs_kernel_by_the_switch(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    # the recipe's fast_decode_csv = true, then off
    ours, stock = run_in_each(recipe, v1_venv, DECODE_CSV_PROBE, {}, {"RETF_FAST_DECODE_CSV": "0"})
    assert ours["priorities"] == [0, 1] and stock["priorities"] == [0]
    assert ours["retf_ops"] == [] and stock["retf_ops"] == []  # the graph keeps TensorFlow's op
    assert ours["values"] == stock["values"] and len(ours["values"]) == 4
    assert ours["error"] == stock["error"] and ours["error"].startswith("Expect 4 fields but have 2 in record 0")


TF_LITE_PROBE = """
import gc, json, sys
import numpy as np
import tensorflow as tf

loaded_at_import = "tensorflow.lite.python.lite" in sys.modules
import_made = {"retf wrappers": sys.modules["retf._library"]._module is not None, "collector on": gc.isenabled()}
x = tf.placeholder(tf.float32, [1, 4], name="x")
y = tf.identity(tf.matmul(x, tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))), name="y")
with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    model = tf.lite.TFLiteConverter.from_session(session, [x], [y]).convert()
interpreter = tf.lite.Interpreter(model_content=model)
interpreter.allocate_tensors()
interpreter.set_tensor(interpreter.get_input_details()[0]["index"], np.ones((1, 4), np.float32))
interpreter.invoke()
print(json.dumps({"loaded_at_import": loaded_at_import, "import_made": import_made, "out": interpreter.get_tensor(
    interpreter.get_output_details()[0]["index"]).tolist(), "same": tf.lite is tf.compat.v1.lite}))
"""


def test_tf_lite_loads_on_first_use_and_converts_a_session(v1_venv):
    """So do retf's op wrappers, which TensorFlow compiles from source (the routings need only the kernels); the
    garbage collector, paused for the import, is back on."""
    seen = run_in(RECIPES / "emulated-py36-tf1api.toml", v1_venv, TF_LITE_PROBE)
    assert seen == {"loaded_at_import": False, "import_made": {"retf wrappers": False, "collector on": True},
                    "out": [[12.0, 16.0]], "same": True}


RESIDENT_PROBE = """
import json, os
import tensorflow as tf

resident, path = {}, None
for line in open("/proc/self/smaps"):
    fields = line.split()
    if "-" in fields[0] and not fields[0].endswith(":"):
        path = os.path.basename(fields[-1]) if len(fields) == 6 else None
    elif path and fields[0] == "Rss:":
        resident[path] = resident.get(path, 0) + int(fields[1])
x = tf.placeholder(tf.float32, [None, 3])
w = tf.get_variable("w", [3, 1], initializer=tf.ones_initializer())
loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
step = tf.train.AdamOptimizer(0.1).minimize(loss)
with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    losses = [float(session.run([loss, step], {x: [[1.0, 2.0, 3.0]]})[0]) for _ in range(3)]
print(json.dumps({"library_kib": resident["_pywrap_tensorflow_internal.so"],
                  "framework_kib": resident["libtensorflow_framework.so.2"], "losses": losses}))
"""


def test_tensorflows_native_library_keeps_resident_only_what_the_process_reads_after_loading(v1_venv):
    released, kept = run_in_each(RECIPES / "emulated-py36-tf1api.toml", v1_venv, RESIDENT_PROBE, {},
                                 {"RETF_PAGE_TRIM": "0"})
    # 2.6.2's library keeps about 90 MiB resident after loading (its relocation and symbol tables, and the code its
    # static initializers ran), 20 MiB once those are given back; the program trains the same either way.
    assert released["library_kib"] * 2 < kept["library_kib"], (released, kept)
    assert released["framework_kib"] < kept["framework_kib"], (released, kept)
    assert released["losses"] == kept["losses"] and released["losses"][-1] < released["losses"][0]


def test_embedding_lookups_take_the_fused_op_where_it_applies(v1_venv):
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    # linear_model's numeric weight is a MatMul: its weight gradient stays TensorFlow's here, the op sets
    # being about the lookups.
    # the fused run takes the recipe's lookups: retf's
    fused, stock = run_in_each(recipe, v1_venv, EMBEDDING_PROBE, {"RETF_FUSED_MATMUL_GRAD": "0"},
                               {"RETF_FUSED_EMBEDDING": "0", "RETF_FUSED_MATMUL_GRAD": "0"})
    assert fused["public"] == "retf.nn" and stock["public"] != "retf.nn"
    # Feature columns look up through safe_embedding_lookup_sparse: retf's safe op, pruning and zeroing included.
    assert fused["ops"] == ["Retf>SafeEmbeddingLookupSparse", "Retf>SafeEmbeddingLookupSparseGrad",
                            "Retf>SparseApplyAdagradRef"], fused["ops"]
    assert stock["ops"] == ["Retf>SparseApplyAdagradRef"]
    # Same training either way, to float32 rounding (the fused op sums a row's ids in the same order).
    assert fused["losses"][-1] < fused["losses"][0]
    for ours, theirs in zip(fused["losses"], stock["losses"]):
        assert abs(ours - theirs) <= 1e-6 * max(1.0, abs(theirs)), (fused["losses"], stock["losses"])
    assert fused["partitioned_ops"] == []
    assert fused["devices"] == ["/job:ps/task:0"]


PARSING_EXPORT = """
import json, sys, tempfile
import tensorflow as tf
from tensorflow._retf import tf115_export

serialized = tf.placeholder(tf.string, [None])
features = tf.parse_example(serialized, {"user": tf.FixedLenFeature([], tf.string, default_value=""),
                                         "clicks": tf.VarLenFeature(tf.int64)})
weights = tf.get_variable("weights", [10, 2])
ids = tf.string_to_hash_bucket_fast(features["user"], 10)
output = tf.nn.embedding_lookup(weights, ids) + tf.cast(tf.sparse.reduce_sum(features["clicks"], 1), tf.float32)[:, None]
folder = tempfile.mkdtemp() + "/saved_model"
with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    tf.saved_model.simple_save(session, folder, {"examples": serialized}, {"output": output})
print(json.dumps({"ops": sorted({n.op for n in tf.get_default_graph().as_graph_def().node if "Parse" in n.op}),
                  "check": tf115_export.check(folder)}))
"""


def test_exports_take_tf_1_15s_form_unless_switched_off(v1_venv):
    """tf.parse_example builds ParseExampleV2 in the graph; the SavedModel holds ParseExample, which TF 1.15 has, and
    RETF_TF115_EXPORTS=0 writes TensorFlow 2.x's form, which the check refuses, naming the op and the fix."""
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    rewritten, kept = run_in_each(recipe, v1_venv, PARSING_EXPORT, {}, {"RETF_TF115_EXPORTS": "0"})
    assert rewritten["ops"] == ["ParseExampleV2"] and rewritten["check"] == []
    assert len(kept["check"]) == 1 and "op ParseExampleV2" in kept["check"][0]
    assert "TensorFlow 1.15 has no such op" in kept["check"][0] and "export it again" in kept["check"][0]


ATTENTION_EXPORT = """
import json, os, tempfile
import tensorflow as tf
from tensorflow._retf import tf115_export

steps = tf.placeholder(tf.float32, [None, 10, 8], name="steps")
scores = tf.matmul(steps, tf.layers.dense(steps, 8), transpose_b=True)
output = tf.reduce_sum(tf.matmul(tf.nn.softmax(scores), steps), axis=1)
train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(output))
folder = tempfile.mkdtemp() + "/saved_model"
with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    # oneDNN's gemm stops the process on some CPUs (a floating-point exception on AMD EPYC, TensorFlow's own, with or
    # without the wheel): under it the graph is built and saved, not run
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "1":
        session.run([output, train], {steps: [[[0.5] * 8] * 10] * 2})
    tf.saved_model.simple_save(session, folder, {"steps": steps}, {"output": output})
    nodes = session.graph_def.node
    labels = [n.attr["_kernel"].s.decode() for n in nodes if n.op == "BatchMatMulV2" and "gradients" not in n.name]
    bias_labels = [n.attr["_kernel"].s.decode() for n in nodes if n.op == "BiasAddGrad"]
print(json.dumps({"labels": labels, "bias_labels": bias_labels, "check": tf115_export.check(folder)}))
"""


def test_exports_leave_out_retfs_kernel_label_unless_switched_off(v1_venv):
    """tf.matmul's batch products (small_batch_matmul) and the dense layer's bias gradient (fast_bias_grad) carry
    retf's kernel label in the graph; the SavedModel leaves it out, so TF 1.15 runs them on its own kernels, and
    RETF_TF115_EXPORTS=0 keeps it, which the check names. Where oneDNN's graph rewrite runs (TF_ENABLE_ONEDNN_OPTS=1),
    which stops the process at a labelled node, they keep TensorFlow's ops unlabelled."""
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    rewritten, kept, stock, onednn = run_in_each(
        recipe, v1_venv, ATTENTION_EXPORT, {}, {"RETF_TF115_EXPORTS": "0"},
        {"RETF_SMALL_BATCH_MATMUL": "0", "RETF_FAST_BIAS_GRAD": "0"}, {"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert rewritten["labels"] == ["retf", "retf"] and rewritten["bias_labels"] == ["retf"], rewritten
    assert rewritten["check"] == [], rewritten
    named = sorted(line for line in kept["check"] if 'kernel label "retf"' in line)  # besides the weight gradients' op
    assert len(named) == 2 and "op BatchMatMulV2" in named[0] and "op BiasAddGrad" in named[1], kept["check"]
    assert all("export it again" in line for line in named)
    assert stock["labels"] == ["", ""] and stock["bias_labels"] == [""] and stock["check"] == []
    assert onednn["labels"] == ["", ""] and onednn["bias_labels"] == [""] and onednn["check"] == []


LAYER_NORM_FORMS = """
import json
import tensorflow as tf
from tensorflow.python.keras.layers import LayerNormalization
x = tf.placeholder(tf.float32, [None, 5, 8])
tf.keras.layers.LayerNormalization(axis=2)(x)
LayerNormalization()(x)
tf.contrib.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)  # BERT's
tf.contrib.layers.layer_norm(x)  # over the last two axes
types = [op.type for op in tf.get_default_graph().get_operations()]
print(json.dumps({"fused": types.count("FusedBatchNormV3"), "means": types.count("Mean"),
                  "retf": types.count("Retf>LayerMoments") + types.count("Retf>LayerNormalize")}))
"""


def test_keras_layer_normalization_takes_tf_2s_fused_form_only_when_switched_off(v1_venv):
    """Both Keras copies' LayerNormalization computes tf.nn.moments and tf.nn.batch_normalization as TF 1.15's Keras
    did (layer_norm_moments), which over the last axis run retf's kernels, as contrib's layer_norm over it does
    (layer_norm_kernels); contrib's over two axes keeps TensorFlow's means (two). RETF_LAYER_NORM_KERNELS=0, and the
    op library off, give TensorFlow's ops (two means each); RETF_LAYER_NORM_MOMENTS=0 gives Keras TF 2.x's
    FusedBatchNormV3."""
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    forms = run_in_each(recipe, v1_venv, LAYER_NORM_FORMS, {}, {"RETF_LAYER_NORM_KERNELS": "0"}, {"RETF_OPS": "0"},
                        {"RETF_LAYER_NORM_MOMENTS": "0"})
    assert forms == [{"fused": 0, "means": 2, "retf": 6}, {"fused": 0, "means": 8, "retf": 0},
                     {"fused": 0, "means": 8, "retf": 0}, {"fused": 2, "means": 2, "retf": 2}], forms


BATCH_NORM_FORMS = """
import collections, json
import tensorflow as tf
from tensorflow.python.keras.layers import BatchNormalization
x = tf.placeholder(tf.float32, [None, 8])
tf.layers.batch_normalization(x, training=True)
tf.keras.layers.BatchNormalization()(x, training=True)
BatchNormalization()(x, training=True)
tf.nn.batch_normalization(x, *tf.nn.moments(x, [0]), offset=tf.zeros([8]), scale=tf.ones([8]), variance_epsilon=1e-3)
tf.layers.batch_normalization(tf.placeholder(tf.float32, [None, 4, 4, 8]), training=True)  # an image: fused
tf.nn.moments(x, [1])  # over the columns: a layer normalization's
types = collections.Counter(op.type for op in tf.get_default_graph().get_operations())
print(json.dumps({key: types[key] for key in ("Retf>Moments", "Retf>BatchNormalize", "FusedBatchNormV3", "Mean",
                                              "Retf>LayerMoments")}))
"""


def test_a_dense_layers_batch_normalization_runs_retfs_kernels_in_every_api_unless_switched_off(v1_venv):
    """tf.layers', both Keras copies' and tf.nn's batch normalization of a matrix build retf's moments and
    normalization (batch_moments); an image keeps FusedBatchNormV3, and moments over the columns are a layer
    normalization's (layer_norm_kernels). RETF_BATCH_MOMENTS=0 gives TensorFlow's ops to the batch normalizations,
    RETF_OPS=0 everywhere."""
    recipe = RECIPES / "emulated-py36-tf1api.toml"
    routed, switched_off, no_ops = run_in_each(recipe, v1_venv, BATCH_NORM_FORMS, {}, {"RETF_BATCH_MOMENTS": "0"},
                                               {"RETF_OPS": "0"})
    assert routed == {"Retf>Moments": 4, "Retf>BatchNormalize": 4, "FusedBatchNormV3": 1, "Mean": 0,
                      "Retf>LayerMoments": 1}, routed
    stock = {"Retf>Moments": 0, "Retf>BatchNormalize": 0, "FusedBatchNormV3": 1, "Mean": 8}
    assert switched_off == dict(stock, **{"Retf>LayerMoments": 1}), switched_off
    assert no_ops == dict(stock, **{"Mean": 10, "Retf>LayerMoments": 0}), no_ops


FUSED_LOOKUP_EXPORT = """
import json, tempfile, warnings
import tensorflow as tf
from tensorflow._retf import tf115_export

ids = tf.sparse.placeholder(tf.int64, shape=[None, None], name="ids")
table = tf.get_variable("table", [20, 4])
resource = tf.get_variable("resource", [20, 4], use_resource=True)
weights = tf.SparseTensor(ids.indices, tf.ones_like(ids.values, tf.float32) * 0.5, ids.dense_shape)
outputs = {"mean": tf.nn.embedding_lookup_sparse(table, ids, None, combiner="mean"),
           "sqrtn": tf.nn.embedding_lookup_sparse(table, ids, weights, combiner="sqrtn"),
           "sum": tf.nn.embedding_lookup_sparse(resource, ids, weights, combiner="sum"),
           "safe_mean": tf.nn.safe_embedding_lookup_sparse(table, ids, weights),
           "safe_sqrtn": tf.nn.safe_embedding_lookup_sparse(resource, ids, None, combiner="sqrtn"),
           "safe_sum": tf.nn.safe_embedding_lookup_sparse(resource, ids, weights, combiner="sum")}
folder = tempfile.mkdtemp() + "/saved_model"
with tf.Session() as session, warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    session.run(tf.global_variables_initializer())
    tf.saved_model.simple_save(session, folder, {"ids_values": ids.values}, outputs)
    saved = tf.saved_model.loader.load(tf.Session(graph=tf.Graph()), ["serve"], folder).graph_def
print(json.dumps({"ops": sorted({n.op for n in tf.get_default_graph().as_graph_def().node if "Retf" in n.op}),
                  "saved": sorted({n.op for n in saved.node if "Segment" in n.op or "Retf" in n.op}),
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)],
                  "check": tf115_export.check(folder)}))
"""


def test_an_inference_graph_with_retfs_fused_lookup_is_written_in_tf_1_15s_lookup_ops(v1_venv):
    """Retf's lookups in the forward graph (fused_embedding), of a variable and of a resource variable, weighted or
    not, are written into the SavedModel as TF 1.15's ops compute them: tf.nn.embedding_lookup_sparse's as
    SparseSegmentMean of the table's rows unweighted, SegmentSum of the weighted rows otherwise; the safe lookup's as
    the kept entries' rows summed per row of the batch (UnsortedSegmentSum). TF 1.15 reads it; nothing is said.
    (test_tf1_programs serves such exports on TF 1.15.5.)"""
    report = run_in(RECIPES / "emulated-py36-tf1api.toml", v1_venv, FUSED_LOOKUP_EXPORT, RETF_FUSED_EMBEDDING="1")
    assert report["ops"] == ["Retf>EmbeddingLookupSparse", "Retf>ResourceEmbeddingLookupSparse",
                             "Retf>ResourceSafeEmbeddingLookupSparse", "Retf>SafeEmbeddingLookupSparse"], report
    assert report["saved"] == ["SegmentSum", "SparseSegmentMean", "UnsortedSegmentSum"], report
    assert report["warnings"] == [] and report["check"] == [], report


def test_a_graph_the_rewrite_cannot_handle_is_exported_as_tf_2_wrote_it_and_said_once(v1_venv):
    """The rewrite runs on a copy: when it fails, the SavedModel is written in TensorFlow 2.x's form, the save goes
    on, and one warning says so (a rewrite made to fail stands in for an unforeseen graph)."""
    code = PARSING_EXPORT.replace("serialized = tf.placeholder", """import warnings
def failing(node, scope):
    raise RuntimeError("unforeseen node")
tf115_export._REWRITES["ParseExampleV2"] = failing
warnings.simplefilter("always")
caught = warnings.catch_warnings(record=True).__enter__()
serialized = tf.placeholder""").replace('"check": tf115_export.check(folder)}', '''"check": tf115_export.check(folder),
                  "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}''')
    report = run_in(RECIPES / "emulated-py36-tf1api.toml", v1_venv, code)
    assert len(report["check"]) == 1 and "op ParseExampleV2" in report["check"][0]
    (warning,) = [w for w in report["warnings"] if "SavedModel" in w]
    assert "written in TensorFlow 2.x's form" in warning and "RuntimeError: unforeseen node" in warning
