"""Recommendation models on TensorFlow 1.15.5 against the `api = "v1"` wheel, same run, same data, in turns.

    python bench/bench_models.py                       # build + verify the wheel, then every row, 3 repetitions
    python bench/bench_models.py --env /tmp/k1/venv    # a venv kept by `retfwheel verify --keep-env`
    python bench/bench_models.py --models din,dien --optimizers adam --repeat 5
    python bench/bench_models.py --models deepfm --optimizers adam,lazyadam --profile   # also trace, top ops

Runs bench/models/*.py unchanged (TF 1.x programs: W&D, DeepFM, DLRM, DCN, DCN-V2 on Criteo-format
data; DSSM, MMoE, DIN, DIEN on Taobao-like data), and bench/public/'s W&D, DeepFM, DLRM, DCN-V2, MMoE, DSSM,
DIN, DIEN and BST as public model zoos write them (wide_deep_public, deepfm_public, dlrm_public, dcnv2_public,
mmoe_public, dssm_public, din_public, dien_public, bst_public: each recipe's own optimizers, under `adam`), with each
optimizer on three sides (--sides):
  TF 1.15.5           `retfwheel run --recipe recipes/emulated-py36.toml`
  wheel, stock        the tf1api wheel in its kept env with TensorFlow's own behaviour: the move to
                      the 2.x codebase alone (TF_CPU_ALLOCATOR_USE_BFC=false, RETF_SPARSE_ADAM=dense,
                      RETF_FUSED_SPARSE=0, RETF_FUSED_EMBEDDING=0, RETF_FUSED_MATMUL_GRAD=0,
                      RETF_FAST_DECODE_CSV=0, RETF_LARGE_BLOCK_ALLOCATOR=0, RETF_FUSED_CONCAT_GRAD=0,
                      RETF_PAIR_DENSE_LINEAR=0, RETF_FUSED_GRU=0, RETF_SMALL_BATCH_MATMUL=0,
                      RETF_LAYER_NORM_MOMENTS=0, RETF_BATCH_MOMENTS=0, RETF_LAYER_NORM_KERNELS=0)
  wheel               the same wheel with its recipe's defaults: the sparse updates of
                      tf.train.AdamOptimizer, AdagradOptimizer and FtrlOptimizer in retf's fused
                      kernels (the same results), tf.nn.embedding_lookup_sparse (feature columns) in
                      retf's fused lookup, small weights' MatMul gradients in retf's transposed product,
                      DIN's activation-unit concat gradient in one retf kernel and its dense layer by the
                      pieces' linearity, tf.nn.dynamic_rnn's GRUCell loops in one retf kernel, small batch
                      products of tf.matmul in retf's kernel, Keras's LayerNormalization in TF 1.15's moments
                      form, batch and layer normalization in retf's kernels, DecodeCSV and BiasAddGrad in retf's
                      kernels, large blocks kept by the CPU allocator, and the recipe's runtime defaults (none)
  wheel, BFC off/on   (--sides ...,nobfc or bfc) the wheel's defaults but TensorFlow's own CPU
                      allocator, or the BFC allocator: the evidence for a runtime default
  wheel, fused / TF's lookups (--sides ...,emb or noemb) the wheel's defaults with RETF_FUSED_EMBEDDING=1 or 0:
                      tf.nn.embedding_lookup_sparse (feature columns) in retf's fused lookup or TensorFlow's ops
  wheel, retf / TF's weight gradients (--sides ...,mmg or nommg) the wheel's defaults with
                      RETF_FUSED_MATMUL_GRAD=1 or 0: the evidence for fused_matmul_grad
  wheel, retf / TF's DecodeCSV (--sides ...,csv or nocsv) the wheel's defaults with
                      RETF_FAST_DECODE_CSV=1 or 0: the evidence for fast_decode_csv
  wheel, large blocks kept / TF's allocator (--sides ...,blocks or noblocks): RETF_LARGE_BLOCK_ALLOCATOR
  wheel, retf / TF's concat grad (--sides ...,cat or nocat): RETF_FUSED_CONCAT_GRAD=1 or 0, the
                      evidence for fused_concat_grad
  wheel, by pieces / one product (--sides ...,pdl or nopdl): RETF_PAIR_DENSE_LINEAR=1 or 0, the evidence
                      for pair_dense_linear
  wheel, retf / TF's GRU loop (--sides ...,gru or nogru): RETF_FUSED_GRU=1 or 0, the evidence for fused_gru
  wheel, retf / TF's batch products (--sides ...,bmm or nobmm): RETF_SMALL_BATCH_MATMUL=1 or 0, the evidence
                      for small_batch_matmul
  wheel, retf / TF's BiasAddGrad (--sides ...,bias or nobias): RETF_FAST_BIAS_GRAD=1 or 0, the evidence for
                      fast_bias_grad
  wheel, moments / fused LayerNormalization (--sides ...,lnm or nolnm): RETF_LAYER_NORM_MOMENTS=1 or 0, the evidence
                      for layer_norm_moments
  wheel, Adam split / one pass (--sides ...,split or nosplit): RETF_SPLIT_DENSE_ADAM=1 or 0, whether
                      retf.train.AdamOptimizer decays the untouched rows early
  XLA (--sides tf115,wheel,xla115,xla,jit115,jit): TF 1.15.5 and the wheel with XLA auto-clustering
                      (TF_XLA_FLAGS=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit), or with the model built in
                      tf.xla.experimental.jit_scope() (bench/models/common.py --xla-jit-scope)
  wheel, EmbeddingVariables (--sides ...,ev): the wheel's defaults with the Criteo models' categorical embeddings
                      in DeepRec's EmbeddingVariables (bench/models/common.py --ev; a deeprec_api wheel)
  wheel, malloc mmap 1 MiB (--sides ...,mmap): the wheel's defaults with glibc's mmap threshold fixed at 1 MiB
                      (MALLOC_MMAP_THRESHOLD_=1048576): every malloc of 1 MiB or more mapped and unmapped, none
                      kept in the heap
  wheel, heap kept after saves (--sides ...,keepheap): RETF_HEAP_TRIM=0, the heap left as TensorFlow 2.x's
                      checkpoint writes leave it (by default the wheel returns its free pages while and after a save runs)
  wheel, load pages kept (--sides ...,keeppages): RETF_PAGE_TRIM=0, TensorFlow's native libraries keep resident
                      what their loading read (by default the wheel gives their read-only pages back once loaded)
Every row also gives the CPU time per step (all of the process's threads).
Each repetition runs every side once per (model, optimizer), with its own seed (--seed, +1 a repetition),
the sides' order rotating from one repetition to the next, so a slow spell of this shared machine hits
each side alike. Reports the median over repetitions of steps/s after warm-up (the mean over the timed
steps, and the fastest 10-step window) with the range, the median and range of the per-repetition ratio
to the first side (TF 1.15.5), and each side's final loss and AUC over the seeds against TF 1.15.5's. lazyadam is
retf.train.LazyAdamOptimizer on the wheel and tf.contrib.opt.LazyAdamOptimizer on TF 1.15.5.
Runs with the host Python; everything TensorFlow runs through the retfwheel command line.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "bench" / "models"
TF115_RECIPE = REPO / "recipes" / "emulated-py36.toml"
V1_RECIPE = REPO / "recipes" / "emulated-py36-tf1api.toml"
DATA = {"criteo": "make_criteo_data.py", "taobao": "make_taobao_data.py"}
# Each model's input, its usual optimizer (first: the one its public recipes train with) and the others
# benchmarked: Adam, as DeepRec's model zoo trains every model in its TF 1.15.5 baseline (`train.py --tf`
# builds tf.train.AdamOptimizer, DLRM's included); DLRM also with plain SGD, as Facebook's reference trains.
CATALOG = {
    "wide_deep": ("criteo", ["adam", "adagrad", "ftrl", "lazyadam"]),
    "deepfm": ("criteo", ["adam", "adagrad", "ftrl", "lazyadam"]),
    "dlrm": ("criteo", ["adam", "sgd", "adagrad", "ftrl", "lazyadam"]),
    "dcn": ("criteo", ["adam", "adagrad", "ftrl", "lazyadam"]),
    "dcnv2": ("criteo", ["adam", "adagrad", "ftrl", "lazyadam"]),
    "dssm": ("taobao", ["adam", "adagrad", "ftrl", "lazyadam"]),
    "mmoe": ("taobao", ["adam", "adagrad", "ftrl", "lazyadam"]),
    "din": ("taobao", ["adam", "adagrad", "ftrl", "lazyadam"]),
    "dien": ("taobao", ["adam", "adagrad", "ftrl", "lazyadam"]),
    # Written the way public model zoos write these models (bench/public/): their recipes' shapes, optimizers
    # and input pipelines; "adam" names each recipe's own optimizers (W&D: Adam for the MLP, FTRL for the linear part).
    "wide_deep_public": ("criteo", ["adam"]),
    "deepfm_public": ("criteo", ["adam"]),
    "dlrm_public": ("criteo", ["adam"]),
    "dcnv2_public": ("criteo", ["adam"]),
    "mmoe_public": ("taobao", ["adam"]),
    "dssm_public": ("taobao", ["adam"]),
    "din_public": ("taobao", ["adam"]),
    "dien_public": ("taobao", ["adam"]),
    "bst_public": ("taobao", ["adam"]),
}
PUBLIC = {"wide_deep_public": REPO / "bench" / "public" / "wide_and_deep.py",
          "deepfm_public": REPO / "bench" / "public" / "deepfm.py",
          "dlrm_public": REPO / "bench" / "public" / "dlrm.py",
          "dcnv2_public": REPO / "bench" / "public" / "dcnv2.py",
          "mmoe_public": REPO / "bench" / "public" / "mmoe.py",
          "dssm_public": REPO / "bench" / "public" / "dssm.py",
          "din_public": REPO / "bench" / "public" / "din.py",
          "dien_public": REPO / "bench" / "public" / "dien.py",
          "bst_public": REPO / "bench" / "public" / "bst.py"}
# Stock Adam updates every row of every table each step (~3 steps/s here): fewer steps for it.
STEPS = {"adam": 30, "adagrad": 80, "lazyadam": 80, "ftrl": 80, "sgd": 80}


class Side:
    def __init__(self, label, recipe, venv=None, env=None, args=()):
        self.label, self.recipe, self.venv, self.env, self.args = label, recipe, venv, env or {}, tuple(args)

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


SIDES = ("tf115", "stock", "wheel", "nobfc", "bfc", "emb", "noemb", "mmg", "nommg", "csv", "nocsv", "blocks", "noblocks",
         "cat", "nocat", "pdl", "nopdl", "gru", "nogru", "bmm", "nobmm", "lnm", "nolnm", "split", "nosplit", "xla115", "xla", "jit115", "jit",
         "ev", "mmap", "keepheap", "keeppages", "onednn", "bnm", "nobnm", "lnk", "nolnk", "bias", "nobias")
# XLA auto-clustering of every op the CPU can compile (TF 1.15 and 2.x read the same flags); jit_scope instead marks
# the model's own ops (bench/models/common.py --xla-jit-scope)
XLA_AUTO = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"}


def stale_env_problem(venv, recipe=V1_RECIPE):
    """Why a kept environment cannot stand for `recipe`'s wheel, or None: its wheel must have been built from
    the recipe file as it is now (the recipe sha256 the build records in retfwheel.json), or its sides would
    measure other defaults than the recipe's."""
    records = sorted(Path(venv).glob("lib/python*/site-packages/tensorflow-*.dist-info/retfwheel.json"))
    if not records:
        return (f"--env {venv}: no retfwheel-built tensorflow in it (no tensorflow-*.dist-info/retfwheel.json); "
                f"give the venv that `retfwheel verify WHEEL --recipe {recipe.name} --keep-env DIR` kept (DIR/venv)")
    try:
        record = json.loads(records[-1].read_text())
    except (OSError, ValueError) as error:
        return f"--env {venv}: cannot read {records[-1]}: {error}"
    built_from = record.get("recipe") if isinstance(record, dict) else None
    built_from = built_from if isinstance(built_from, dict) else {}
    now = hashlib.sha256(recipe.read_bytes()).hexdigest()
    if built_from.get("name") != recipe.stem or built_from.get("sha256") != now:
        return (f"--env {venv}: its wheel was built from recipe {built_from.get('name')!r} "
                f"(sha256 {str(built_from.get('sha256'))[:12]}), not from {recipe.name} as it is now "
                f"(sha256 {now[:12]}), so its defaults may not be the recipe's; build and keep a new one "
                f"(retfwheel build, then verify WHEEL --recipe {recipe.name} --keep-env DIR) or leave out --env")
    return None


def run_model(side, model, optimizer, data, steps, warmup, batch_size, seed=1, trace=None):
    args = ["--data", data, "--optimizer", optimizer, "--steps", steps, "--warmup", warmup, "--seed", seed]
    if batch_size:
        args += ["--batch-size", batch_size]
    if trace:
        args += ["--trace", trace]
    args += list(side.args)
    # Only the side's own switches: none inherited from this shell.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RETF_", "TF_CPU_ALLOCATOR", "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS"))}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", **side.env)
    program = PUBLIC.get(model, MODELS / f"{model}.py")
    run = subprocess.run(side.command(program, *args), capture_output=True, text=True, env=env, cwd=REPO)
    if run.returncode != 0:
        sys.exit(f"{model} --optimizer {optimizer} failed on {side.label}:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _within(values, spread, slack):
    """Whether the median of values lies in spread's [min, max], widened by slack (last-bit noise)."""
    return min(spread) - slack <= statistics.median(values) <= max(spread) + slack


def summarize(model, optimizer, side, runs, baselines):
    """One row: medians and ranges over the repetitions (one seed each); ratios per repetition against the
    baseline side's run of the same repetition; whether the final loss and AUC fall within the baseline's
    spread over the seeds."""
    rates = [r["steps_per_sec"] for r in runs]
    cpu = [r.get("cpu_seconds_per_step", 0.0) * 1e3 for r in runs]
    best = [r["best_window_steps_per_sec"] for r in runs]
    ratios = [r["steps_per_sec"] / b["steps_per_sec"] for r, b in zip(runs, baselines)]
    rss = [r.get("peak_rss_mib", 0.0) for r in runs]
    rss_ratios = [r.get("peak_rss_mib", 0.0) / b["peak_rss_mib"] for r, b in zip(runs, baselines)
                  if b.get("peak_rss_mib")]
    losses, base_losses = [r["last_loss"] for r in runs], [b["last_loss"] for b in baselines]
    aucs, base_aucs = [r.get("auc", 0.0) for r in runs], [b.get("auc", 0.0) for b in baselines]
    return dict(model=model, optimizer=optimizer, usual=optimizer == CATALOG[model][1][0], side=side.label,
                implementation=runs[0]["optimizer"], batch_size=runs[0]["batch_size"], steps=runs[0]["steps"],
                repetitions=len(runs), seeds=[r.get("seed") for r in runs], steps_per_sec=statistics.median(rates),
                range=[min(rates), max(rates)], best_window_steps_per_sec=statistics.median(best),
                cpu_ms_per_step=statistics.median(cpu), cpu_range=[min(cpu), max(cpu)],
                ratio=statistics.median(ratios), ratio_range=[min(ratios), max(ratios)],
                peak_rss_mib=statistics.median(rss), rss_range=[min(rss), max(rss)],
                rss_ratio=statistics.median(rss_ratios) if rss_ratios else None,
                last_loss=statistics.median(losses), last_loss_range=[min(losses), max(losses)],
                auc=statistics.median(aucs), auc_range=[min(aucs), max(aucs)], aucs=[r.get("aucs") for r in runs],
                as_baseline=_within(losses, base_losses, 1e-3 * abs(statistics.median(base_losses)))
                and _within(aucs, base_aucs, 1e-3))


def table(rows, baseline):
    header = (f"{'model':<16} {'optimizer':<10} {'side':<20} {'implementation':<36} {'steps/s':>8} {'range':>13} "
              f"{'ratio':>6} {'range':>11} {'best 10':>8} {'CPU ms':>7} {'peak MiB':>8} {'RSS':>6} {'last loss':>15} "
              f"{'AUC':>15} {'same':>4}")
    lines = [header, "-" * len(header)]
    for row in rows:
        low, high = row["range"]
        ratio_low, ratio_high = row["ratio_range"]
        loss_low, loss_high = row["last_loss_range"]
        auc_low, auc_high = row["auc_range"]
        optimizer = row["optimizer"] + ("*" if row["usual"] else "")
        lines.append(f"{row['model']:<16} {optimizer:<10} {row['side']:<20} {row['implementation']:<36} "
                     f"{row['steps_per_sec']:>8.2f} {low:>6.2f}-{high:<6.2f} {row['ratio']:>5.2f}x "
                     f"{ratio_low:>4.2f}-{ratio_high:<4.2f}x {row['best_window_steps_per_sec']:>8.2f} "
                     f"{row['cpu_ms_per_step']:>7.1f} {row['peak_rss_mib']:>8.0f} "
                     f"{format(row['rss_ratio'], '>5.2f') + 'x' if row['rss_ratio'] else '':>6} "
                     f"{loss_low:>7.4f}-{loss_high:<7.4f} {auc_low:>7.4f}-{auc_high:<7.4f} "
                     f"{'yes' if row['as_baseline'] else 'NO':>4}")
    lines.append(f"* the model's usual optimizer. CPU ms: the process's CPU time per timed step, all threads (median). "
                 f"Peak MiB: the process's peak resident memory when the timed steps end (median); RSS: its "
                 f"ratio to {baseline}'s in the same repetition (median). "
                 f"Ranges: lowest-highest over the repetitions, each with its own seed. "
                 f"Ratio: to {baseline}'s run of the same repetition. Last loss and AUC (the click's, over the batches "
                 f"after training): lowest-highest over the seeds; same: the side's medians within {baseline}'s range "
                 f"(widened by 1e-3).")
    return "\n".join(lines)


def profile_table(profiles):
    lines = []
    for label, result in profiles:
        lines.append(f"\n{label}: {result['traced_step_ms']:.0f} ms wall (median of 3 traced)")
        lines.append(f"  {'op type':<32} {'ms/step':>8} {'share':>6}")
        for kind, millis, share in result["top_ops"]:
            lines.append(f"  {kind:<32} {millis:>8.1f} {share:>6.1%}")
        lines.append(f"  Chrome trace of the last: {result['trace']}")
    return "\n".join(lines)


def selected(args):
    """(model, optimizer) pairs: each model's own optimizers, filtered by --models and --optimizers."""
    models = args.models.split(",") if args.models else list(CATALOG)
    unknown = [m for m in models if m not in CATALOG]
    if unknown:
        sys.exit(f"--models: unknown {', '.join(unknown)}; known: {', '.join(CATALOG)}")
    if args.optimizers == "usual":
        return [(m, CATALOG[m][1][0]) for m in models]
    wanted = set(args.optimizers.split(",")) if args.optimizers else None
    if wanted and wanted - set(STEPS):
        sys.exit(f"--optimizers: unknown {', '.join(sorted(wanted - set(STEPS)))}; known: {', '.join(STEPS)}, usual")
    return [(m, o) for m in models for o in CATALOG[m][1] if wanted is None or o in wanted]


def make_data(tf115, work, kind, rows):
    path = work / f"{kind}.csv"
    if not path.exists():
        progress(f"writing {rows} rows of {kind} data to {path}")
        make = subprocess.run(tf115.command(MODELS / DATA[kind], path, "--rows", rows), capture_output=True, text=True)
        if make.returncode != 0:
            sys.exit(make.stderr[-3000:])
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, help="venv with the tf1api wheel (from verify --keep-env DIR: DIR/venv), built from the "
                        "recipe as it is now (checked against the recipe sha256 the build recorded)")
    parser.add_argument("--models", help=f"comma-separated, of {','.join(CATALOG)} (default: all)")
    parser.add_argument("--optimizers", help="comma-separated, of adam,adagrad,ftrl,lazyadam,sgd, or 'usual' "
                                             "(each model's usual one); default: each model's whole list")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (each runs every side once)")
    parser.add_argument("--steps", type=float, default=1.0, help="scale the timed steps per optimizer by this")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (the first two are slow)")
    parser.add_argument("--seed", type=int, default=1,
                        help="repetition r runs every side with the models' --seed SEED + r (default 1: 1, 2, 3)")
    parser.add_argument("--sides", default="tf115,stock,wheel",
                        help="comma-separated, the first the baseline of the ratios: tf115 (TF 1.15.5), stock (the "
                             "wheel, TensorFlow's own behaviour), wheel (its recipe's defaults), nobfc / bfc (those with "
                             "TensorFlow's allocator / the BFC allocator), emb / noemb (those with retf's / TensorFlow's lookups), mmg / nommg "
                             "(those with retf's / TensorFlow's weight gradients), csv / nocsv (retf's / TensorFlow's DecodeCSV), "
                             "blocks / noblocks (retf's large-block allocator / TensorFlow's); "
                             "default: tf115,stock,wheel")
    parser.add_argument("--batch-size", type=int, help="every model's batch (default: each model's own)")
    parser.add_argument("--rows", type=int, default=100000, help="rows of each synthetic data set")
    parser.add_argument("--profile", action="store_true",
                        help="then trace three steps of each model x optimizer on TF 1.15.5 and the wheel; top ops")
    parser.add_argument("--work-dir", type=Path, help="keep data, wheel and traces here")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = parser.parse_args()
    pairs = selected(args)
    if args.repeat < 1:
        sys.exit("--repeat: at least 1")
    side_keys = args.sides.split(",")
    if not side_keys or set(side_keys) - set(SIDES):
        sys.exit(f"--sides: {args.sides!r}; known: {', '.join(SIDES)}")
    problem = stale_env_problem(args.env) if args.env else None
    if problem:
        sys.exit(problem)

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-models-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    venv = args.env or prepare_wheel(work)
    tf115 = Side("TF 1.15.5", TF115_RECIPE)
    known = {"tf115": tf115,
             "stock": Side("wheel, stock", V1_RECIPE, venv, {"TF_CPU_ALLOCATOR_USE_BFC": "false",
                                                            "RETF_SPARSE_ADAM": "dense", "RETF_FUSED_SPARSE": "0",
                                                            "RETF_FUSED_EMBEDDING": "0",
                                                            "RETF_FUSED_MATMUL_GRAD": "0",
                                                            "RETF_FAST_DECODE_CSV": "0",
                                                            "RETF_LARGE_BLOCK_ALLOCATOR": "0",
                                                            "RETF_FUSED_CONCAT_GRAD": "0",
                                                            "RETF_PAIR_DENSE_LINEAR": "0",
                                                            "RETF_FUSED_GRU": "0",
                                                            "RETF_SMALL_BATCH_MATMUL": "0",
                                                            "RETF_LAYER_NORM_MOMENTS": "0",
                                                            "RETF_BATCH_MOMENTS": "0",
                                                            "RETF_LAYER_NORM_KERNELS": "0"}),
             "wheel": Side("wheel", V1_RECIPE, venv),
             "nobfc": Side("wheel, BFC off", V1_RECIPE, venv, {"TF_CPU_ALLOCATOR_USE_BFC": "false"}),
             "bfc": Side("wheel, BFC on", V1_RECIPE, venv, {"TF_CPU_ALLOCATOR_USE_BFC": "true"}),
             "emb": Side("wheel, fused lookups", V1_RECIPE, venv, {"RETF_FUSED_EMBEDDING": "1"}),
             "noemb": Side("wheel, TF's lookups", V1_RECIPE, venv, {"RETF_FUSED_EMBEDDING": "0"}),
             "mmg": Side("wheel, retf weight gradients", V1_RECIPE, venv, {"RETF_FUSED_MATMUL_GRAD": "1"}),
             "nommg": Side("wheel, TF's weight gradients", V1_RECIPE, venv, {"RETF_FUSED_MATMUL_GRAD": "0"}),
             "csv": Side("wheel, retf's DecodeCSV", V1_RECIPE, venv, {"RETF_FAST_DECODE_CSV": "1"}),
             "blocks": Side("wheel, large blocks kept", V1_RECIPE, venv, {"RETF_LARGE_BLOCK_ALLOCATOR": "1"}),
             "noblocks": Side("wheel, TF's allocator", V1_RECIPE, venv, {"RETF_LARGE_BLOCK_ALLOCATOR": "0"}),
             "nocsv": Side("wheel, TF's DecodeCSV", V1_RECIPE, venv, {"RETF_FAST_DECODE_CSV": "0"}),
             "cat": Side("wheel, retf concat grad", V1_RECIPE, venv, {"RETF_FUSED_CONCAT_GRAD": "1"}),
             "nocat": Side("wheel, TF's concat grad", V1_RECIPE, venv, {"RETF_FUSED_CONCAT_GRAD": "0"}),
             "pdl": Side("wheel, dense layer by pieces", V1_RECIPE, venv, {"RETF_PAIR_DENSE_LINEAR": "1"}),
             "nopdl": Side("wheel, dense layer in one product", V1_RECIPE, venv, {"RETF_PAIR_DENSE_LINEAR": "0"}),
             "gru": Side("wheel, retf GRU loop", V1_RECIPE, venv, {"RETF_FUSED_GRU": "1"}),
             "nogru": Side("wheel, TF's GRU loop", V1_RECIPE, venv, {"RETF_FUSED_GRU": "0"}),
             "bmm": Side("wheel, retf batch products", V1_RECIPE, venv, {"RETF_SMALL_BATCH_MATMUL": "1"}),
             "nobmm": Side("wheel, TF's batch products", V1_RECIPE, venv, {"RETF_SMALL_BATCH_MATMUL": "0"}),
             "bias": Side("wheel, retf BiasAddGrad", V1_RECIPE, venv, {"RETF_FAST_BIAS_GRAD": "1"}),
             "nobias": Side("wheel, TF's BiasAddGrad", V1_RECIPE, venv, {"RETF_FAST_BIAS_GRAD": "0"}),
             "lnm": Side("wheel, moments LayerNormalization", V1_RECIPE, venv, {"RETF_LAYER_NORM_MOMENTS": "1"}),
             "nolnm": Side("wheel, fused LayerNormalization", V1_RECIPE, venv, {"RETF_LAYER_NORM_MOMENTS": "0"}),
             "split": Side("wheel, Adam split", V1_RECIPE, venv, {"RETF_SPLIT_DENSE_ADAM": "1"}),
             "nosplit": Side("wheel, Adam one pass", V1_RECIPE, venv, {"RETF_SPLIT_DENSE_ADAM": "0"}),
             "xla115": Side("TF 1.15.5, XLA auto", TF115_RECIPE, None, XLA_AUTO),
             "xla": Side("wheel, XLA auto", V1_RECIPE, venv, XLA_AUTO),
             "jit115": Side("TF 1.15.5, jit_scope", TF115_RECIPE, None, args=["--xla-jit-scope"]),
             "jit": Side("wheel, jit_scope", V1_RECIPE, venv, args=["--xla-jit-scope"]),
             "ev": Side("wheel, EmbeddingVariables", V1_RECIPE, venv, args=["--ev"]),
             "mmap": Side("wheel, malloc mmap 1 MiB", V1_RECIPE, venv, {"MALLOC_MMAP_THRESHOLD_": "1048576"}),
             "keepheap": Side("wheel, heap kept", V1_RECIPE, venv, {"RETF_HEAP_TRIM": "0"}),
             "keeppages": Side("wheel, load pages kept", V1_RECIPE, venv, {"RETF_PAGE_TRIM": "0"}),
             "bnm": Side("wheel, retf batch norm", V1_RECIPE, venv, {"RETF_BATCH_MOMENTS": "1"}),
             "nobnm": Side("wheel, TF's batch norm", V1_RECIPE, venv, {"RETF_BATCH_MOMENTS": "0"}),
             "lnk": Side("wheel, retf layer norm", V1_RECIPE, venv, {"RETF_LAYER_NORM_KERNELS": "1"}),
             "nolnk": Side("wheel, TF's layer norm", V1_RECIPE, venv, {"RETF_LAYER_NORM_KERNELS": "0"}),
             "onednn": Side("wheel, oneDNN ops", V1_RECIPE, venv, {"TF_ENABLE_ONEDNN_OPTS": "1"})}
    assert set(known) == set(SIDES), set(known) ^ set(SIDES)
    sides = [known[key] for key in side_keys]
    baseline = sides[0]
    data = {kind: make_data(tf115, work, kind, args.rows) for kind in {CATALOG[m][0] for m, _ in pairs}}

    results = {}  # (model, optimizer, side label) -> [result per repetition]
    for repetition in range(args.repeat):
        for model, optimizer in pairs:
            steps = max(1, round(STEPS[optimizer] * args.steps))
            turn = sides[repetition % len(sides):] + sides[:repetition % len(sides)]
            for side in turn:
                begun = time.time()
                result = run_model(side, model, optimizer, data[CATALOG[model][0]], steps, args.warmup,
                                   args.batch_size, seed=args.seed + repetition)
                results.setdefault((model, optimizer, side.label), []).append(result)
                progress(f"[{repetition + 1}/{args.repeat}] {model:<10} {optimizer:<9} {side.label:<12} "
                         f"{result['steps_per_sec']:.2f} steps/s ({steps} steps, loss {result['first_loss']:.4f} -> "
                         f"{result['last_loss']:.4f}; {time.time() - begun:.0f} s)")
    rows = [summarize(model, optimizer, side, results[(model, optimizer, side.label)],
                      results[(model, optimizer, baseline.label)])
            for model, optimizer in pairs for side in sides]

    profiles = []
    if args.profile:
        for model, optimizer in pairs:
            for side in (tf115, known["wheel"]):
                trace = work / f"{model}-{side.label.replace(', ', '-').replace(' ', '')}-{optimizer}.json"
                result = run_model(side, model, optimizer, data[CATALOG[model][0]], 5, args.warmup, args.batch_size,
                                   seed=args.seed, trace=trace)
                profiles.append((f"{model}, {side.label}, {result['optimizer']}", dict(result, trace=str(trace))))

    if args.json:
        print(json.dumps({"rows": rows, "profiles": [dict(label=label, **result) for label, result in profiles]},
                         indent=1))
    else:
        print(f"{os.cpu_count()} cores, {args.warmup} warm-up steps, {args.repeat} repetitions; "
              f"total {time.time() - started:.0f} s")
        print(table(rows, baseline.label))
        if profiles:
            print(profile_table(profiles))


if __name__ == "__main__":
    main()
