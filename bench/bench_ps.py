"""Parameter-server training on TensorFlow 1.15.5 against the `api = "v1"` wheel, same run, same program.

    python bench/bench_ps.py                       # build + verify the wheel first (~2 min)
    python bench/bench_ps.py --env /tmp/k1/venv    # a venv kept by `retfwheel verify --keep-env /tmp/k1`

One program (runtime/probes/ps_worker.py, TF 1.x: replica_device_setter, a 500,000 x 16
embedding table split over 2 ps by fixed_size_partitioner(2), MonitoredTrainingSession) runs on a
localhost cluster of 2 ps (import tensorflow, Server.join) + 2 asynchronous workers, on these sides:
  TF 1.15.5, adam        tf.train.AdamOptimizer, TensorFlow's dense update of every row each step
  wheel, dense           the same on the 2.x codebase (RETF_SPARSE_ADAM=dense)
  wheel, fused           the recipe's default: the same semantics in retf's one-pass kernel
  TF 1.15.5, lazy        tf.contrib.opt.LazyAdamOptimizer
  wheel, lazy            RETF_SPARSE_ADAM=lazy: tf.train.AdamOptimizer as retf's lazy kernel
Each repetition runs every side once, in turns, so load that drifts falls on all of them. Global
steps/s is the sum over workers of their steps after the first one over the time they took; the
final loss is the mean of each worker's last 10 losses (asynchronous runs are not deterministic).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from bench_models import prepare_wheel  # noqa: E402  (bench/ is on sys.path when run)

from retfwheel.proof.cluster import Task, cluster_spec, run_cluster  # noqa: E402
from retfwheel.targets.environment import Environment, emulated_command, prepare_environment  # noqa: E402
from retfwheel.targets.fetch import cache_root  # noqa: E402
from retfwheel.targets.recipe import load_recipe  # noqa: E402

PROBES = REPO / "runtime" / "probes"
TF115_RECIPE = REPO / "recipes" / "emulated-py36.toml"
V1_RECIPE = REPO / "recipes" / "emulated-py36-tf1api.toml"
# (label, side, ps_worker.py --optimizer, environment of every task)
SIDES = [
    ("TF 1.15.5, adam", "tf115", "adam", {}),
    ("wheel, dense", "wheel", "adam", {"RETF_SPARSE_ADAM": "dense"}),
    ("wheel, fused", "wheel", "adam", {}),
    ("TF 1.15.5, lazy", "tf115", "lazy", {}),
    ("wheel, lazy", "wheel", "adam", {"RETF_SPARSE_ADAM": "lazy"}),
]


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def train(env: Environment, optimizer: str, variables: dict, args) -> dict:
    spec = json.dumps(cluster_spec({"ps": 2, "worker": 2}))
    python = str(env.python)
    tasks = [Task("ps", i, tuple(emulated_command(env, [python, str(PROBES / "ps_server.py"), spec, str(i)])), server=True)
             for i in range(2)]
    tasks += [Task("worker", i, tuple(emulated_command(env, [
        python, str(PROBES / "ps_worker.py"), spec, str(i), "--steps", str(args.steps), "--rows", str(args.rows),
        "--dim", str(args.dim), "--batch", str(args.batch), "--optimizer", optimizer]))) for i in range(2)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RETF_", "TF_CPU_ALLOCATOR"))}
    run = run_cluster(tasks, args.timeout, env={**base, "TF_CPP_MIN_LOG_LEVEL": "2", **variables})
    if not run.ok:
        sys.exit(f"the cluster failed: {run.failure()}")
    reports = [r.json for r in run.of("worker")]
    rate = sum(r["timed_steps"] / r["seconds"] for r in reports if r["seconds"] > 0)
    final = statistics.mean(statistics.mean(r["losses"][-10:]) for r in reports)
    return {"steps_per_sec": rate, "final_loss": final, "optimizer": reports[0]["optimizer"]}


def _short(implementation: str) -> str:
    """tf.train.X / tf.contrib.opt.X for TensorFlow's own classes; retf's as they are."""
    cls = implementation.rsplit(".", 1)[-1]
    if implementation.startswith("tensorflow.contrib."):
        return f"tf.contrib.opt.{cls}"
    return f"tf.train.{cls}" if implementation.startswith("tensorflow.") else implementation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", type=Path, help="a venv with the tf1api wheel (DIR/venv of verify --keep-env DIR)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300, help="global steps per run")
    parser.add_argument("--rows", type=int, default=500000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ps-") as scratch:
        venv = args.env or prepare_wheel(Path(scratch))
        tf115 = prepare_environment(load_recipe(TF115_RECIPE), cache_root(), None, progress)
        wheel_base = prepare_environment(load_recipe(V1_RECIPE), cache_root(), None, progress)
        envs = {"tf115": tf115, "wheel": Environment(venv, venv / "bin" / "python", wheel_base.system_runtime)}
        results = {label: [] for label, *_ in SIDES}
        for repetition in range(args.repeat):
            for label, side, optimizer, variables in SIDES:
                progress(f"[{repetition + 1}/{args.repeat}] {label}")
                results[label].append(train(envs[side], optimizer, variables, args))
    rows = []
    for label, *_ in SIDES:
        runs = results[label]
        baseline = results["TF 1.15.5, lazy" if label.endswith("lazy") else "TF 1.15.5, adam"]
        rates = [r["steps_per_sec"] for r in runs]
        ratios = [r["steps_per_sec"] / b["steps_per_sec"] for r, b in zip(runs, baseline)]
        rows.append({"side": label, "implementation": runs[0]["optimizer"], "steps_per_sec": statistics.median(rates),
                     "min": min(rates), "max": max(rates), "ratio": statistics.median(ratios),
                     "final_loss": statistics.median(r["final_loss"] for r in runs)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"2 ps + 2 workers, {args.rows:,} x {args.dim} table, batch {args.batch}, {args.steps} global steps, "
          f"median of {args.repeat} (ratios per repetition, against TF 1.15.5 with the same kind of Adam)")
    header = f"{'side':<18} {'implementation':<48} {'steps/s':>8} {'range':>13} {'vs 1.15.5':>9} {'final loss':>10}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['side']:<18} {_short(row['implementation']):<48} {row['steps_per_sec']:>8.1f} "
              f"{row['min']:>6.1f}-{row['max']:<6.1f} {row['ratio']:>8.2f}x {row['final_loss']:>10.4f}")


if __name__ == "__main__":
    main()
