"""Criteo CTR models on TensorFlow 1.15.5 against the `api = "v1"` wheel, same run, same data.

    python bench/bench_models.py                       # build + verify the wheel, then every row
    python bench/bench_models.py --env /tmp/k1/venv    # a venv kept by `retfwheel verify --keep-env`
    python bench/bench_models.py --profile             # also trace DeepFM steps per side, top ops

Runs bench/models/{wide_deep,deepfm,dlrm}.py unchanged (TF 1.x programs) with each optimizer
(adam, adagrad, lazyadam) on three sides, one after the other for each model and optimizer:
  TF 1.15.5           `retfwheel run --recipe recipes/emulated-py36.toml`
  wheel, stock        the tf1api wheel in its kept env with TensorFlow's own behaviour: the move to
                      the 2.x codebase alone (TF_CPU_ALLOCATOR_USE_BFC=false, RETF_SPARSE_ADAM=dense)
  wheel               the same wheel with its recipe's defaults: the BFC allocator, and
                      tf.train.AdamOptimizer's sparse updates in retf's fused kernel (same results)
and prints steps/s after warm-up (the mean over all timed steps, and the fastest 10-step window,
which this shared machine's drifting speed disturbs least) with their ratios to TF 1.15.5 measured
in this run. lazyadam is retf.train.LazyAdamOptimizer on the wheel and
tf.contrib.opt.LazyAdamOptimizer on TF 1.15.5.
Runs with the host Python; everything TensorFlow runs through the retfwheel command line.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "bench" / "models"
TF115_RECIPE = REPO / "recipes" / "emulated-py36.toml"
V1_RECIPE = REPO / "recipes" / "emulated-py36-tf1api.toml"
# Stock Adam updates every row of every table each step (~3 steps/s here): fewer steps for it.
STEPS = {"adam": 30, "adagrad": 80, "lazyadam": 80}


class Side:
    def __init__(self, label, recipe, venv=None, env=None):
        self.label, self.recipe, self.venv, self.env = label, recipe, venv, env or {}

    def command(self, program, *args):
        env_option = ["--env", str(self.venv)] if self.venv else []
        return [sys.executable, "-m", "retfwheel", "run", "--recipe", str(self.recipe), *env_option, "python",
                str(program), *map(str, args)]


def progress(message):
    print(message, file=sys.stderr, flush=True)


def retfwheel(*args):
    run = subprocess.run([sys.executable, "-m", "retfwheel", *map(str, args)], capture_output=True, text=True,
                         cwd=REPO)
    if run.returncode != 0:
        sys.exit(f"retfwheel {args[0]} failed:\n{run.stdout[-2000:]}{run.stderr[-3000:]}")
    return run.stdout


def prepare_wheel(work):
    progress("building the tf1api wheel and installing it into a copy of the old environment")
    wheel = retfwheel("build", "--recipe", V1_RECIPE, "--out-dir", work / "wheel").strip().splitlines()[-1]
    retfwheel("verify", wheel, "--recipe", V1_RECIPE, "--keep-env", work / "env")
    return work / "env" / "venv"


def run_model(side, model, optimizer, data, steps, warmup, batch_size, trace=None):
    args = ["--data", data, "--optimizer", optimizer, "--steps", steps, "--warmup", warmup,
            "--batch-size", batch_size]
    if trace:
        args += ["--trace", trace]
    # Only the side's own switches: none inherited from this shell.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETF_", "TF_CPU_ALLOCATOR"))}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", **side.env)
    run = subprocess.run(side.command(MODELS / f"{model}.py", *args), capture_output=True, text=True, env=env,
                         cwd=REPO)
    if run.returncode != 0:
        sys.exit(f"{model} --optimizer {optimizer} failed on {side.label}:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def table(rows):
    header = (f"{'model':<10} {'optimizer':<9} {'side':<12} {'implementation':<36} {'steps/s':>8} {'vs 1.15.5':>9}"
              f" {'best 10':>8} {'vs 1.15.5':>9}")
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(f"{row['model']:<10} {row['optimizer']:<9} {row['side']:<12} {row['implementation']:<36} "
                     f"{row['steps_per_sec']:>8.2f} {row['ratio']:>8.2f}x "
                     f"{row['best_window_steps_per_sec']:>8.2f} {row['best_ratio']:>8.2f}x")
    return "\n".join(lines)


def profile_table(profiles):
    lines = []
    for label, result in profiles:
        lines.append(f"\nDeepFM step, {label}: {result['traced_step_ms']:.0f} ms wall (median of 3 traced)")
        lines.append(f"  {'op type':<32} {'ms/step':>8} {'share':>6}")
        for kind, millis, share in result["top_ops"]:
            lines.append(f"  {kind:<32} {millis:>8.1f} {share:>6.1%}")
        lines.append(f"  Chrome trace of the last: {result['trace']}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, help="venv with the tf1api wheel (from verify --keep-env DIR: DIR/venv)")
    parser.add_argument("--models", default="wide_deep,deepfm,dlrm")
    parser.add_argument("--optimizers", default="adam,adagrad,lazyadam")
    parser.add_argument("--steps", type=float, default=1.0, help="scale the timed steps per optimizer by this")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (the first two are slow)")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=100000, help="rows of synthetic Criteo data")
    parser.add_argument("--profile", action="store_true", help="trace three DeepFM steps per side and list the top ops")
    parser.add_argument("--work-dir", type=Path, help="keep data, wheel and traces here")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = parser.parse_args()

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-models-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    venv = args.env or prepare_wheel(work)
    tf115 = Side("TF 1.15.5", TF115_RECIPE)
    sides = [tf115,
             Side("wheel, stock", V1_RECIPE, venv, {"TF_CPU_ALLOCATOR_USE_BFC": "false", "RETF_SPARSE_ADAM": "dense"}),
             Side("wheel", V1_RECIPE, venv)]

    data = work / "criteo.csv"
    if not data.exists():
        progress(f"writing {args.rows} rows of Criteo-format data to {data}")
        make = subprocess.run(tf115.command(MODELS / "make_criteo_data.py", data, "--rows", args.rows),
                              capture_output=True, text=True)
        if make.returncode != 0:
            sys.exit(make.stderr[-3000:])

    rows = []
    for model in args.models.split(","):
        for optimizer in args.optimizers.split(","):
            steps = max(1, round(STEPS[optimizer] * args.steps))
            baseline = None
            for side in sides:
                begun = time.time()
                result = run_model(side, model, optimizer, data, steps, args.warmup, args.batch_size)
                baseline = baseline or result
                rows.append(dict(model=model, optimizer=optimizer, side=side.label,
                                 implementation=result["optimizer"], steps=steps, last_loss=result["last_loss"],
                                 steps_per_sec=result["steps_per_sec"],
                                 ratio=result["steps_per_sec"] / baseline["steps_per_sec"],
                                 best_window_steps_per_sec=result["best_window_steps_per_sec"],
                                 best_ratio=result["best_window_steps_per_sec"]
                                 / baseline["best_window_steps_per_sec"]))
                progress(f"{model:<10} {optimizer:<9} {side.label:<12} {result['steps_per_sec']:.2f} steps/s "
                         f"({steps} steps, loss {result['first_loss']:.4f} -> {result['last_loss']:.4f}; "
                         f"{time.time() - begun:.0f} s)")

    profiles = []
    if args.profile:
        for side, optimizer in ((sides[0], "adam"), (sides[0], "lazyadam"), (sides[2], "adam"),
                                (sides[2], "lazyadam")):
            trace = work / f"deepfm-{side.label.replace(', ', '-').replace(' ', '')}-{optimizer}.json"
            result = run_model(side, "deepfm", optimizer, data, 5, 5, args.batch_size, trace=trace)
            profiles.append((f"{side.label}, {result['optimizer']}", dict(result, trace=str(trace))))

    if args.json:
        print(json.dumps({"rows": rows, "profiles": [dict(label=label, **result) for label, result in profiles]},
                         indent=1))
    else:
        print(f"batch {args.batch_size}, {os.cpu_count()} cores, {args.warmup} warm-up steps; "
              f"total {time.time() - started:.0f} s")
        print(table(rows))
        if profiles:
            print(profile_table(profiles))


if __name__ == "__main__":
    main()
