"""Parameter-server clusters and Estimator jobs on the 1.x-API wheel, in the emulated old environment
under the old runtime (slow; run in CI).

Every task is its own process started through `unshare` with the old libstdc++ mounted, on localhost
ports picked here, bounded in time and stopped by its process id (retfwheel.proof.cluster). The ps tasks run
the usual launcher (runtime/probes/ps_server.py: import tensorflow, start the server, join), so they only have
the retf kernels if `import tensorflow` registers them.
"""

from __future__ import annotations

import importlib.resources
import json
import math
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import RECIPES, training_differences
from retfwheel.proof.cluster import Task, cluster_spec, run_cluster
from retfwheel.targets.environment import Environment, emulated_command, prepare_environment
from retfwheel.targets.fetch import cache_root
from retfwheel.targets.recipe import load_recipe

pytestmark = pytest.mark.slow

PROGRAMS = Path(__file__).resolve().parent / "programs"
PROBES = importlib.resources.files("retfwheel.runtime") / "probes"
TIMEOUT = 300.0
# The optimizer each way of running sparse Adam ends up with on the wheel.
MODES = {
    "dense": ({"RETF_SPARSE_ADAM": "dense"}, "adam", "tensorflow.python.training.adam.AdamOptimizer"),
    "fused": ({}, "adam", "retf.train.AdamOptimizer"),  # the recipe's default
    "lazy": ({"RETF_SPARSE_ADAM": "lazy"}, "adam", "retf.train.LazyAdamStandIn"),
    "retf.train.LazyAdamOptimizer": ({}, "lazy", "retf.train.LazyAdamOptimizer"),
    # fused_sparse: the ps tasks run Retf>SparseApplyAdagradRef / Retf>SparseApplyFtrlRef for their shards
    "adagrad": ({}, "adagrad", "retf.train.AdagradOptimizer"),
    "ftrl": ({}, "ftrl", "retf.train.FtrlOptimizer"),
}


@pytest.fixture(scope="module")
def wheel_env(v1_venv) -> Environment:
    base = prepare_environment(load_recipe(RECIPES / "emulated-py36-tf1api.toml"), cache_root(), None, lambda m: None)
    return Environment(v1_venv, v1_venv / "bin" / "python", base.system_runtime)


@pytest.fixture(scope="module")
def tf115_env(python36) -> Environment:
    """TensorFlow 1.15.5 in the old environment itself (only read)."""
    return prepare_environment(load_recipe(RECIPES / "emulated-py36.toml"), cache_root(), None, lambda m: None)


def ps_training(ps_env: Environment, worker_env: Environment, *, ps: int = 2, workers: int = 2, steps: int = 20,
                optimizer: str = "adam", worker_vars: dict | None = None, ps_vars: dict | None = None,
                threads: int = 0, worker_args: tuple = ()):
    spec = json.dumps(cluster_spec({"ps": ps, "worker": workers}))
    tasks = [Task("ps", i, tuple(emulated_command(ps_env, [str(ps_env.python), str(PROBES / "ps_server.py"), spec, str(i)])),
                  env=dict(ps_vars or {}), server=True) for i in range(ps)]
    for index in range(workers):
        command = [str(worker_env.python), str(PROBES / "ps_worker.py"), spec, str(index), "--steps", str(steps),
                   "--optimizer", optimizer, "--threads", str(threads), *worker_args]
        tasks.append(Task("worker", index, tuple(emulated_command(worker_env, command)), env=dict(worker_vars or {})))
    return run_cluster(tasks, TIMEOUT, env=_clean_environ())


def _clean_environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("RETF_", "TF_CONFIG"))}


# Clusters wait more than they compute (a worker that is not the chief finds the model not yet initialised and
# sleeps 30 s before it looks again), so three run at once.
_CLUSTERS = ThreadPoolExecutor(max_workers=3)


class Trainings:
    """ps_training runs, each (environments, options) begun once per module in the pool."""

    def __init__(self):
        self.runs: dict[tuple, Future] = {}

    def start(self, ps_env: Environment, worker_env: Environment, **options) -> Future:
        key = (ps_env.python, worker_env.python, json.dumps(options, sort_keys=True))
        if key not in self.runs:
            self.runs[key] = _CLUSTERS.submit(ps_training, ps_env, worker_env, **options)
        return self.runs[key]


@pytest.fixture(scope="module")
def trainings(request, wheel_env, tf115_env) -> Trainings:
    """The pool's runs, begun with those of every selected test that trains two workers or compares one's losses."""
    begun = Trainings()
    for item in request.session.items:
        if item.module is not request.module:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.originalname == "test_partitioned_embedding_variables_live_and_train_on_the_ps_tasks":
            embedding_variables(begun, wheel_env)
        elif item.originalname == "test_two_ps_two_workers_train":
            two_workers(begun, wheel_env, params["mode"])
        elif item.originalname == "test_one_worker_trains_as_tensorflow_1_15_does":
            one_worker_on_tf115(begun, tf115_env, params["reference"])
            one_worker(begun, wheel_env, params["mode"])
    return begun


def two_workers(trainings: Trainings, wheel_env: Environment, mode: str) -> Future:
    env, optimizer, _ = MODES[mode]
    return trainings.start(wheel_env, wheel_env, optimizer=optimizer, worker_vars=env)


def embedding_variables(trainings: Trainings, wheel_env: Environment) -> Future:
    return trainings.start(wheel_env, wheel_env, optimizer="adam", steps=30, worker_args=("--ev",))


def one_worker(trainings: Trainings, wheel_env: Environment, mode: str) -> Future:
    """One worker's 30 steps on one thread, on the wheel by ``mode`` (MODES)."""
    worker_vars, optimizer, _ = MODES[mode]
    return trainings.start(wheel_env, wheel_env, workers=1, steps=30, optimizer=optimizer, worker_vars=worker_vars,
                           threads=1)


def one_worker_on_tf115(trainings: Trainings, tf115_env: Environment, optimizer: str) -> Future:
    """One worker's 30 steps on one thread, on TF 1.15.5 with its own ``optimizer``."""
    return trainings.start(tf115_env, tf115_env, workers=1, steps=30, optimizer=optimizer, threads=1)


def losses(run: Future) -> list[float]:
    got = run.result()
    assert got.ok, got.failure()
    return got.of("worker")[0].json["losses"]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_two_ps_two_workers_train(trainings, wheel_env, mode):
    _, _, expected = MODES[mode]
    run = two_workers(trainings, wheel_env, mode).result()
    assert run.ok, run.failure()
    reports = [r.json for r in run.of("worker")]
    assert all(r is not None and r["optimizer"] == expected for r in reports), reports
    losses = [loss for r in reports for loss in r["losses"]]
    # Asynchronous workers share the 20 global steps between them; StopAtStepHook may let each take one more.
    assert 20 <= len(losses) <= 22 and all(math.isfinite(x) for x in losses), reports


@pytest.mark.parametrize("mode, reference", [("dense", "adam"), ("fused", "adam"), ("lazy", "lazy"),
                                             ("retf.train.LazyAdamOptimizer", "lazy"), ("adagrad", "adagrad"),
                                             ("ftrl", "ftrl")])
def test_one_worker_trains_as_tensorflow_1_15_does(trainings, wheel_env, tf115_env, mode, reference):
    """One worker is deterministic: its losses match TF 1.15.5's own ops (tf.contrib.opt's lazy Adam for lazy;
    TF 1.15.5's Adagrad and FTRL for the wheel's fused ones)."""
    problems = training_differences(losses(one_worker_on_tf115(trainings, tf115_env, reference)),
                                    losses(one_worker(trainings, wheel_env, mode)))
    assert not problems, "\n".join(problems)


def test_partitioned_embedding_variables_live_and_train_on_the_ps_tasks(trainings, wheel_env):
    """DeepRec's EmbeddingVariable in two parts, one on each ps task (replica_device_setter places its handles
    there), looked up and updated there by two asynchronous workers, with a CounterFilter."""
    run = embedding_variables(trainings, wheel_env).result()
    assert run.ok, run.failure()
    reports = [r.json for r in run.of("worker")]
    assert all(r["table_devices"] == ["/job:ps/task:0", "/job:ps/task:1"] for r in reports), reports
    losses = [loss for r in reports for loss in r["losses"]]
    assert 30 <= len(losses) <= 32 and all(math.isfinite(x) for x in losses), reports
    first, last = sum(losses[:6]) / 6, sum(losses[-6:]) / 6
    assert last < first, reports


def test_lazy_and_dense_adam_differ_under_ps(trainings, wheel_env):
    """The comparison above can tell the semantics apart: lazy Adam's losses are not dense Adam's."""
    assert training_differences(losses(one_worker(trainings, wheel_env, "dense")),
                                losses(one_worker(trainings, wheel_env, "lazy")))


def test_ps_without_the_library_fails_the_cluster_with_a_fix(wheel_env):
    run = ps_training(wheel_env, wheel_env, workers=1, steps=5, ps_vars={"RETF_OPS": "0"})
    assert not run.ok
    worker = run.of("worker")[0]
    assert "Op type not registered 'Retf>SparseApplyAdamDenseRef'" in worker.stderr, worker.stderr[-3000:]
    assert "Fix: run every task of the cluster" in worker.stderr, worker.stderr[-3000:]


def test_ps_on_tensorflow_1_15_fails_the_cluster_with_a_fix(wheel_env, tf115_env):
    """A stock TF 1.15.5 ps cannot read the graphs a 2.x worker sends; the worker's error says so."""
    run = ps_training(tf115_env, wheel_env, ps=1, workers=1, steps=5)
    assert not run.ok
    worker = run.of("worker")[0]
    assert "NodeDef missing attrs" in worker.stderr, worker.stderr[-3000:]
    assert "retf: /job:ps/replica:0/task:0 runs another TensorFlow than this process" in worker.stderr, worker.stderr[-3000:]


def test_retf_ops_off_falls_back_to_tensorflow_adam_everywhere(wheel_env):
    """RETF_OPS=0 on every task: tf.train.AdamOptimizer emits TensorFlow's own ops, and the cluster trains."""
    run = ps_training(wheel_env, wheel_env, workers=1, steps=5, ps_vars={"RETF_OPS": "0"}, worker_vars={"RETF_OPS": "0"})
    assert run.ok, run.failure()
    assert run.of("worker")[0].json["optimizer"] == "tensorflow.python.training.adam.AdamOptimizer"


def test_estimator_train_and_evaluate_with_tf_config(wheel_env, tmp_path):
    spec = cluster_spec({"ps": 2, "chief": 1, "worker": 1})
    model_dir = tmp_path / "model"
    roles = [("ps", 0), ("ps", 1), ("chief", 0), ("worker", 0), ("evaluator", 0)]
    tasks = []
    for job, index in roles:
        config = json.dumps({"cluster": spec, "task": {"type": job, "index": index}})
        command = emulated_command(wheel_env, [str(wheel_env.python), str(PROGRAMS / "estimator_ps.py"), str(model_dir), "300"])
        # With the recipe's fused lookups (every task alike), the small table's lookup is a retf op on its ps.
        tasks.append(Task(job, index, tuple(command), env={"TF_CONFIG": config}, server=job == "ps"))
    run = run_cluster(tasks, TIMEOUT, env=_clean_environ())
    assert run.ok, run.failure()
    evaluation = run.of("evaluator")[0].json
    assert evaluation["global_step"] >= 300 and evaluation["auc"] > 0.7, evaluation
    # The small table's lookup ran where the table lives; the partitioned one took TensorFlow's ops.
    lookups = run.of("worker")[0].json["lookups"]
    assert len(lookups) == 1 and next(iter(lookups.values())).startswith("/job:ps/task:"), lookups
