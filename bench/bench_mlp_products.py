"""A model's dense-layer products on TF 1.15.5 and on the wheel, in turns, against this machine's FMA peak: how
much of an MLP-bound step the 2.x codebase can gain.

    python bench/bench_mlp_products.py --env VENV [--models wide_deep_public,deepfm_public] [--rounds 3]

For each dense layer of the model (batch B, input width I, output width O) it times the three products a training
step computes: the forward `x w` (B x I x O), the weight gradient `x^T g` (`transpose_a`) and the input gradient
`g w^T` (`transpose_b`), each as `tf.matmul` on variables in a graph session, the median of --repeat calls, in a
process of the side's own (TF 1.15.5: `retfwheel run --recipe recipes/emulated-py36.toml`; the wheel: its kept
environment VENV). The sides take turns, --rounds times. The ceiling is this machine's peak: a C loop of
independent FMAs, 8-float and, where the CPU has AVX-512, 16-float, on one and on all cores (compiled here with
the host's cc). Runs with the host Python.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TF115_RECIPE = REPO / "recipes" / "emulated-py36.toml"
V1_RECIPE = REPO / "recipes" / "emulated-py36-tf1api.toml"
# Batch, input width and layer widths of each model's MLPs (bench/public/ and bench/models/).
MODELS = {
    "wide_deep_public": [(2048, 2189, [1024, 512, 256, 1])],  # 26 embeddings of 64 or 128 + 13 numerics
    "deepfm_public": [(2048, 429, [1024, 256, 32]), (2048, 34, [128, 64, 1])],  # deep MLP, then the final one
    "dlrm_public": [(512, 13, [512, 256, 64, 16]), (512, 432, [512, 256, 1])],  # bottom MLP; top over the cat
    "dcnv2_public": [(512, 2189, [1024, 512, 256, 1]), (512, 2189, [2189, 2189, 1])],  # the MLP; the cross layers
    "wide_deep": [(1024, 429, [1024, 512, 256, 1])],
    "dcnv2": [(1024, 429, [429, 429, 429, 1024, 512, 256, 1])],
}

# Independent FMA chains (more than the FMA latency times the pipes), so the loop runs at the FMA units' peak.
# Compiled twice: with 8-float (AVX2) and with 16-float (AVX-512) vectors; the peak is the wider one the CPU runs.
PEAK_SOURCE = r"""
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CHAINS 12
#ifdef WIDE
#define LANES 16
#define VEC __m512
#define SET1 _mm512_set1_ps
#define FMADD _mm512_fmadd_ps
#define STORE _mm512_storeu_ps
#else
#define LANES 8
#define VEC __m256
#define SET1 _mm256_set1_ps
#define FMADD _mm256_fmadd_ps
#define STORE _mm256_storeu_ps
#endif
static long iterations = 50000000;
static void *run(void *out) {
  VEC acc[CHAINS];
  const VEC a = SET1(0.999999f), b = SET1(1e-7f);
  for (int c = 0; c < CHAINS; ++c) acc[c] = SET1((float)c);
  for (long i = 0; i < iterations; ++i)
    for (int c = 0; c < CHAINS; ++c) acc[c] = FMADD(acc[c], a, b);
  float sum = 0, lanes[LANES];
  for (int c = 0; c < CHAINS; ++c) { STORE(lanes, acc[c]); sum += lanes[0]; }
  *(float *)out = sum;
  return NULL;
}
int main(int argc, char **argv) {
  int threads = atoi(argv[1]);
  pthread_t ids[64]; float sums[64];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int t = 0; t < threads; ++t) pthread_create(&ids[t], NULL, run, &sums[t]);
  for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  printf("%.3f %g\n", 2.0 * LANES * CHAINS * iterations * threads / seconds / 1e9, sums[0]);
  return 0;
}
"""

# Runs inside the side's environment (Python 3.6): times each product, prints one JSON line.
CHILD = r"""
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
products, repeat = json.loads(sys.argv[1]), int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from timing import median_seconds  # bench/timing.py
rng = np.random.RandomState(0)
times = []
for m, k, n, transpose_a, transpose_b in products:
    with tf.Graph().as_default():
        a = tf.Variable(rng.uniform(-1, 1, (k, m) if transpose_a else (m, k)).astype(np.float32))
        b = tf.Variable(rng.uniform(-1, 1, (n, k) if transpose_b else (k, n)).astype(np.float32))
        product = tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b).op
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            times.append(median_seconds(lambda: session.run(product), repeat))
print(json.dumps({"version": tf.__version__, "seconds": times}))
"""


def products(model):
    """(M, K, N, transpose_a, transpose_b, what) of every product of the model's training step."""
    listed = []
    for batch, width, layers in MODELS[model]:
        for units in layers:
            listed += [(batch, width, units, False, False, f"x w  {batch} x {width} x {units}"),
                       (width, batch, units, True, False, f"x^T g {width} x {batch} x {units}"),
                       (batch, units, width, False, True, f"g w^T {batch} x {units} x {width}")]
            width = units
    return listed


def peak(work):
    """{threads: GFLOP/s} at one core and at all of them, and the vector width that reached it (8 or 16 floats)."""
    source = work / "peak.c"
    source.write_text(PEAK_SOURCE)
    found = None
    for lanes, flags in ((8, ["-mavx2", "-mfma"]), (16, ["-mavx512f", "-DWIDE"])):
        binary = work / f"peak{lanes}"
        try:
            build = subprocess.run(["cc", "-O3", *flags, "-pthread", str(source), "-o", str(binary)],
                                   capture_output=True, text=True)
        except OSError as error:
            sys.exit(f"cannot compile the FMA peak loop: no C compiler `cc` ({error.strerror}); install one (gcc)")
        if build.returncode != 0:
            sys.exit(f"cannot compile the FMA peak loop: {build.stderr.strip()[:500]}")
        if gflops(binary, 1) is None:  # the CPU lacks the instructions (it dies on the first one)
            if lanes == 8:
                sys.exit("the FMA peak loop failed: this bench needs a CPU with AVX2 and FMA")
            break
        # The best of five runs: a peak is what the cores reach when nothing else runs on them.
        rates = {threads: max(gflops(binary, threads) or 0.0 for _ in range(5)) for threads in (1, os.cpu_count())}
        if found is None or rates[1] > found[0][1]:
            found = (rates, lanes)
    return found


def gflops(binary, threads):
    run = subprocess.run([str(binary), str(threads)], capture_output=True, text=True)
    return float(run.stdout.split()[0]) if run.returncode == 0 else None


def side_times(recipe, venv, listed, repeat):
    env_option = ["--env", str(venv)] if venv else []
    spec = json.dumps([item[:5] for item in listed])
    run = subprocess.run([sys.executable, "-m", "retfwheel", "run", "--recipe", str(recipe), *env_option, "python",
                          "-c", CHILD, spec, str(repeat), str(REPO / "bench")], capture_output=True, text=True, cwd=REPO)
    if run.returncode != 0:
        sys.exit(f"timing the products failed under {recipe.name}:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", type=Path, required=True, help="venv with the tf1api wheel (verify --keep-env DIR: "
                                                                "DIR/venv)")
    parser.add_argument("--models", default="wide_deep_public,deepfm_public",
                        help=f"comma-separated, of {','.join(MODELS)}")
    parser.add_argument("--rounds", type=int, default=3, help="times each side runs, in turns")
    parser.add_argument("--repeat", type=int, default=9, help="timed calls of each product in a run (median)")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        sys.exit(f"--models: unknown {', '.join(unknown)}; known: {', '.join(MODELS)}")
    listed = [item for model in models for item in products(model)]
    with tempfile.TemporaryDirectory(prefix="bench-mlp-") as work:
        ceiling, lanes = peak(Path(work))
    runs = {"TF 1.15.5": [], "wheel": []}
    for _ in range(args.rounds):
        for label, recipe, venv in (("TF 1.15.5", TF115_RECIPE, None), ("wheel", V1_RECIPE, args.env)):
            runs[label].append(side_times(recipe, venv, listed, args.repeat)["seconds"])
    medians = {label: [statistics.median(r[i] for r in found) for i in range(len(listed))]
               for label, found in runs.items()}
    cores = os.cpu_count()
    print(f"FMA peak ({lanes}-float vectors): {ceiling[1]:.0f} GFLOP/s on one core, {ceiling[cores]:.0f} on {cores}; "
          f"products: median of "
          f"{args.repeat} calls, then of {args.rounds} runs a side in turns")
    print(f"{'product':<28} {'GFLOP':>6} {'TF 1.15.5 ms':>13} {'wheel ms':>9} {'TF/wheel':>9} {'wheel % of peak':>16}")
    offset = 0
    for model in models:
        count = len(products(model))
        rows = listed[offset:offset + count]
        old, new = medians["TF 1.15.5"][offset:offset + count], medians["wheel"][offset:offset + count]
        offset += count
        print(f"{model}:")
        flops = 0.0
        for (m, k, n, _, _, what), t_old, t_new in zip(rows, old, new):
            gflop = 2.0 * m * k * n / 1e9
            flops += gflop
            print(f"  {what:<26} {gflop:>6.2f} {t_old * 1e3:>13.1f} {t_new * 1e3:>9.1f} {t_old / t_new:>8.2f}x "
                  f"{gflop / t_new / ceiling[cores]:>15.0%}")
        print(f"  {'a step':<26} {flops:>6.2f} {sum(old) * 1e3:>13.1f} {sum(new) * 1e3:>9.1f} "
              f"{sum(old) / sum(new):>8.2f}x {flops / sum(new) / ceiling[cores]:>15.0%}   at peak: "
              f"{flops / ceiling[cores] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
