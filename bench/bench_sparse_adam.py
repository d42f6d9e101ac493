"""Fused lazy Adam (retf) against the composite lazy Adam, stock Adam and two memory floors, same run.

    python bench/bench_sparse_adam.py [--repeat N] [--quick] [--no-bfc-off]
    # a Python with TensorFlow and a built retf importable

Goals: fused >= 3x faster than the composite lazy Adam (what tfa.optimizers.LazyAdam runs:
dedup with unique + unsorted_segment_sum, then gather / compute / scatter in plain TF), with and
without TensorFlow's BFC allocator, and within 1.3x of the scattered-row floor at 1M x 64 / 16,384
rows and 200k x 128 / 65,536 rows.

The scattered-row floor is compiled code (C, built by this script with $CC or cc, run on as many
threads as TensorFlow's intra-op pool) that does the step's memory traffic and nothing else: for
each distinct row of the step, in the ascending order the kernel walks them, it reads the row of
var, m and v and the row's gradient and writes the three rows back (x += g), prefetching rows a
few ahead as the kernel does, on tables of the same shape allocated as TensorFlow's CPU allocator
allocates the variables (posix_memalign: 4 KiB pages unless the system's transparent huge pages are
"always"). Rows at random cost a TLB miss each on 4 KiB pages, so the page size is part of the floor:
the same floor on tables advised into 2 MiB pages (as NumPy advises its large arrays) is reported
beside it ("2M floor"), the goal is held against the floor on the tables' own kind of page. The
bandwidth floor is the bytes a step must move over the copy bandwidth measured now; rows at random
cost more than a sequential copy, so the scattered-row floor is the one to hold the kernel to. Stock
tf.compat.v1.train.AdamOptimizer (a dense update of the whole table) is reported, and so is retf's
fused kernel for those same dense semantics (retf.train.AdamOptimizer: one pass over the table).
Medians of timed steps after warm-up; fused, composite and the scattered-row floors are timed in
turns, eight steps to a call, each step over its own random rows and after the step before. Then retf's fused Adagrad and FTRL against what tf.compat.v1's AdagradOptimizer and
FtrlOptimizer run for a sparse gradient (unique + unsorted_segment_sum, then TensorFlow's
ResourceSparseApplyAdagrad / ResourceSparseApplyFtrl), in turns. Then, unless --no-bfc-off, the script runs itself again with TF_CPU_ALLOCATOR_USE_BFC=false
and reports fused against composite there.
"""

import ctypes
import os
import subprocess
import sys
import tempfile
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from timing import interleaved_medians, median_seconds  # noqa: E402  (bench/timing.py, beside this file)

import retf  # noqa: E402

LR, BETA1, BETA2, EPSILON = 0.001, 0.9, 0.999, 1e-7
# Fused, composite and floor steps are timed STEPS_PER_CALL to a call (one tf.function, one thread start):
# calling a tf.function costs 0.1-0.5 ms here (the header prints it), a cost of eager Python that a training
# step in a graph does not pay per op, and that would otherwise count as the kernel's.
STEPS_PER_CALL = 8


def copy_bandwidth(threads=2, floats=64 * 2 ** 20, repeat=5):
    """Bytes per second (read + written) of a large float copy split over `threads` threads."""
    src = np.ones(floats, np.float32)
    dst = np.zeros(floats, np.float32)
    chunks = np.array_split(np.arange(floats), threads)
    bounds = [(c[0], c[-1] + 1) for c in chunks]

    def copy():
        workers = [threading.Thread(target=np.copyto, args=(dst[a:b], src[a:b])) for a, b in bounds]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    return 2 * src.nbytes / median_seconds(copy, repeat, warmup=1)


FLOOR_SOURCE = r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A table as TensorFlow's CPU allocator makes one (posix_memalign, 64-byte aligned, so 4 KiB pages unless the
   system's transparent huge pages are "always"), or with huge = 1 also advised into 2 MiB pages, as NumPy
   advises its large arrays. Zeroed, so every page is in place before timing. */
float* floor_table(int64_t bytes, int huge) {
  void* p = 0;
  if (posix_memalign(&p, 64, (size_t)bytes) != 0) return 0;
  if (huge) {
    const uintptr_t page = (uintptr_t)1 << 21;
    const uintptr_t begin = ((uintptr_t)p + page - 1) & ~(page - 1), end = ((uintptr_t)p + bytes) & ~(page - 1);
    if (end > begin) madvise((void*)begin, end - begin, MADV_HUGEPAGE);
  }
  memset(p, 0, (size_t)bytes);
  return (float*)p;
}

void floor_free(float* p) { free(p); }

/* The memory traffic of one sparse Adam step over rows[begin, end), nothing else: each row of var, m and v
   read and written once (x += g), its gradient row read; rows a few ahead prefetched, as the kernel does. */
void touch_rows(float* var, float* m, float* v, const float* grad, const int64_t* rows, int64_t begin,
                int64_t end, int64_t dim, int64_t distance) {
  for (int64_t u = begin; u < end; ++u) {
    if (u + distance < end) {
      const int64_t ahead = rows[u + distance] * dim;
      for (int64_t j = 0; j < dim; j += 16) {
        __builtin_prefetch(var + ahead + j, 1, 3);
        __builtin_prefetch(m + ahead + j, 1, 3);
        __builtin_prefetch(v + ahead + j, 1, 3);
        __builtin_prefetch(grad + (u + distance) * dim + j, 0, 3);
      }
    }
    float* a = var + rows[u] * dim;
    float* b = m + rows[u] * dim;
    float* c = v + rows[u] * dim;
    const float* g = grad + u * dim;
    for (int64_t j = 0; j < dim; ++j) {
      a[j] += g[j];
      b[j] += g[j];
      c[j] += g[j];
    }
  }
}
"""


def build_floor(directory):
    """FLOOR_SOURCE compiled with $CC (or cc) and loaded: its touch_rows, floor_table and floor_free."""
    source = os.path.join(directory, "floor.c")
    library = os.path.join(directory, "floor.so")
    with open(source, "w") as stream:
        stream.write(FLOOR_SOURCE)
    subprocess.check_call([os.environ.get("CC", "cc"), "-O3", "-shared", "-fPIC", source, "-o", library])
    floor = ctypes.CDLL(library)
    floor.touch_rows.restype = None  # a ctypes call releases the GIL: threads run in parallel
    floor.touch_rows.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 4
    floor.floor_table.restype = ctypes.c_void_p
    floor.floor_table.argtypes = [ctypes.c_int64, ctypes.c_int]
    floor.floor_free.restype = None
    floor.floor_free.argtypes = [ctypes.c_void_p]
    return floor


def scattered_floor_step(floor, problem, threads, huge_pages):
    """One call runs the floor's traffic for the distinct rows of each of problem's batches in turn, each
    batch split over `threads` threads, on tables allocated as TensorFlow allocates them, or (huge_pages)
    advised into 2 MiB pages; step.close() frees them."""
    tables = [floor.floor_table(problem.rows * problem.dim * 4, int(huge_pages)) for _ in range(3)]
    if not all(tables):
        raise MemoryError("the floor's tables: {:,} x {:,} floats, three times".format(problem.rows, problem.dim))
    # Per batch: its rows ascending, as the kernel walks them, and their gradient rows.
    batches = [(np.sort(batch.unique.numpy()).astype(np.int64), np.ascontiguousarray(batch.unique_grad.numpy()))
               for batch in problem.batches]
    # The kernel's prefetch distance: 4 KiB of var, m, v and gradient rows ahead.
    distance = max(1, 4096 // (4 * problem.dim * 4))
    bounds = [(int(c[0]), int(c[-1]) + 1) for c in np.array_split(np.arange(problem.distinct), threads) if len(c)]

    def run(begin, end):
        for rows, grad in batches:
            floor.touch_rows(*(tables + [grad.ctypes.data, rows.ctypes.data, begin, end, problem.dim, distance]))

    def step():
        workers = [threading.Thread(target=run, args=bounds_of_one) for bounds_of_one in bounds]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    def close():
        for table in tables:
            floor.floor_free(table)
        del tables[:]
    step.close = close
    return step


class Batch:
    """One step's sparse gradient: `ids` indices over `distinct` random rows, and the same rows pre-summed."""

    def __init__(self, rng, rows, dim, ids, distinct):
        pool = rng.choice(rows, size=distinct, replace=False)
        self.indices = tf.constant(pool if ids == distinct else pool[rng.randint(0, distinct, size=ids)], tf.int64)
        self.grad = tf.constant(rng.uniform(-1, 1, (ids, dim)).astype(np.float32))
        # The same rows, duplicates already summed: the fused kernel's work without dedup.
        self.unique = tf.constant(pool, tf.int64)
        self.unique_grad = tf.constant(rng.uniform(-1, 1, (distinct, dim)).astype(np.float32))


class Problem:
    """A table shape and STEPS_PER_CALL batches, each over its own random rows, as training's steps are: a step
    finds its rows out of cache (the batches' rows together outgrow it) and steps in one function cannot be
    merged as common subexpressions. batches[0]'s fields are the problem's own, for the single-step timings."""

    def __init__(self, rows, dim, ids, distinct, seed=0):
        rng = np.random.RandomState(seed)
        self.rows, self.dim, self.ids, self.distinct = rows, dim, ids, distinct
        self.batches = [Batch(rng, rows, dim, ids, distinct) for _ in range(STEPS_PER_CALL)]
        first = self.batches[0]
        self.indices, self.grad, self.unique, self.unique_grad = first.indices, first.grad, first.unique, first.unique_grad

    def variables(self):
        table = np.random.RandomState(1).uniform(-1, 1, (self.rows, self.dim)).astype(np.float32)
        return tf.Variable(table), tf.Variable(np.zeros_like(table)), tf.Variable(np.zeros_like(table))

    def moved_floats(self):
        return self.distinct * self.dim * 6 + self.ids * self.dim  # var, m, v read + written; grad read


def per_step_medians(steps, repeat):
    """interleaved_medians of steps that each run STEPS_PER_CALL steps a call, per step."""
    return [seconds / STEPS_PER_CALL for seconds in interleaved_medians(steps, repeat)]


def empty_call_seconds(repeat):
    """What calling a tf.function that does nothing costs here."""
    @tf.function
    def empty():
        return tf.constant(0)
    return median_seconds(empty, repeat)


def fused_step(var, m, v, batches):
    """One call runs a fused step for each of batches, (grad, indices) pairs, in order, in one function."""
    @tf.function
    def step():
        for grad, indices in batches:
            retf.ops.sparse_apply_adam(var, m, v, BETA1 ** 10, BETA2 ** 10, LR, BETA1, BETA2, EPSILON, grad,
                                       indices)
    return step


def composite_step(var, m, v, batches):
    """tfa LazyAdam's sparse path in plain TF, including Keras's duplicate-index merge; a step for each of
    batches, (grad, indices) pairs, a call."""
    @tf.function
    def step():
        after = []
        for grad, indices in batches:
            # A step's ids exist once the step before has run, as in training: no step's dedup runs ahead.
            with tf.control_dependencies(after):
                after = composite_once(grad, indices)

    def composite_once(grad, indices):
        unique, position = tf.unique(indices)
        summed = tf.math.unsorted_segment_sum(grad, position, tf.shape(unique)[0])
        lr = LR * (np.sqrt(1 - BETA2 ** 10) / (1 - BETA1 ** 10))
        m_t = BETA1 * tf.gather(m, unique) + (1 - BETA1) * summed
        v_t = BETA2 * tf.gather(v, unique) + (1 - BETA2) * tf.square(summed)
        return [m.scatter_update(tf.IndexedSlices(m_t, unique)), v.scatter_update(tf.IndexedSlices(v_t, unique)),
                var.scatter_sub(tf.IndexedSlices(lr * m_t / (tf.sqrt(v_t) + EPSILON), unique))]
    return step


def fused_dense_step(var, m, v, grad, indices):
    @tf.function
    def step():
        retf.ops.sparse_apply_adam_dense(var, m, v, BETA1 ** 10, BETA2 ** 10, LR, BETA1, BETA2, EPSILON, grad,
                                         indices)
    return step


def stock_adam_step(var, grad, indices, rows):
    optimizer = tf.compat.v1.train.AdamOptimizer(LR, BETA1, BETA2, EPSILON)
    slices = tf.IndexedSlices(grad, indices, tf.constant([rows, int(grad.shape[1])], tf.int64))
    optimizer.apply_gradients([(slices, var)])  # creates the slots outside the traced function

    @tf.function
    def step():
        optimizer.apply_gradients([(slices, var)])
    return step


def adagrad_ftrl_steps(problem):
    """(fused, stock) step pairs for Adagrad and FTRL: retf's one kernel against what tf.compat.v1's optimizers
    run (unique + unsorted_segment_sum, then TensorFlow's sparse apply op)."""
    table = np.random.RandomState(3).uniform(-1, 1, (problem.rows, problem.dim)).astype(np.float32)
    var, accum, linear = tf.Variable(table), tf.Variable(np.full_like(table, 0.1)), tf.Variable(np.zeros_like(table))
    lr, l1, l2, power = (np.float32(x) for x in (0.05, 0.001, 0.001, -0.5))

    def dedup(grad, indices):
        unique, position = tf.unique(indices)
        return unique, tf.math.unsorted_segment_sum(grad, position, tf.shape(unique)[0])

    def fused_adagrad(grad, indices):
        return retf.ops.sparse_apply_adagrad(var, accum, lr, grad, indices)

    def stock_adagrad(grad, indices):
        unique, summed = dedup(grad, indices)
        return tf.raw_ops.ResourceSparseApplyAdagrad(var=var.handle, accum=accum.handle, lr=lr, grad=summed,
                                                     indices=unique)

    def fused_ftrl(grad, indices):
        return retf.ops.sparse_apply_ftrl(var, accum, linear, grad, indices, lr, l1, l2, power)

    def stock_ftrl(grad, indices):
        unique, summed = dedup(grad, indices)
        return tf.raw_ops.ResourceSparseApplyFtrl(var=var.handle, accum=accum.handle, linear=linear.handle,
                                                  grad=summed, indices=unique, lr=lr, l1=l1, l2=l2, lr_power=power)

    def over_batches(once):
        @tf.function
        def step():
            after = []
            for batch in problem.batches:
                with tf.control_dependencies(after):  # no step's dedup runs ahead of the step before
                    after = [once(batch.grad, batch.indices)]
        return step
    fused_adagrad, stock_adagrad, fused_ftrl, stock_ftrl = map(over_batches, (fused_adagrad, stock_adagrad,
                                                                              fused_ftrl, stock_ftrl))
    return [("Adagrad", fused_adagrad, stock_adagrad), ("FTRL", fused_ftrl, stock_ftrl)], (var, accum, linear)


def adagrad_ftrl_run(repeat):
    print("Adagrad and FTRL: retf's fused kernel vs tf.compat.v1's sparse path (dedup ops + TensorFlow's apply op)")
    for name, problem in (("1M x 64, 16,384 rows", Problem(1000000, 64, 16384, 16384)),
                          ("1M x 64, 65,536 ids / 8,192 rows", Problem(1000000, 64, 65536, 8192))):
        steps, tables = adagrad_ftrl_steps(problem)
        for optimizer, fused, stock in steps:
            fused_s, stock_s = per_step_medians([fused, stock], repeat)
            print("{:<34} {:<8} fused {:7.2f} ms  stock {:7.2f} ms  {:5.1f}x".format(
                name, optimizer, fused_s * 1e3, stock_s * 1e3, stock_s / fused_s))
        del tables


def bfc_setting():
    return os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "unset (TensorFlow's default)")


def full_run(repeat, quick):
    bandwidth = copy_bandwidth()
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    print("TensorFlow {}, {} intra-op threads, TF_CPU_ALLOCATOR_USE_BFC={}; copy bandwidth {:.1f} GB/s "
          "(read + write, 2 threads)".format(tf.__version__, threads, bfc_setting(), bandwidth / 1e9))
    print("Milliseconds per step, {} steps to a call; an empty tf.function call costs {:.2f} ms here".format(
        STEPS_PER_CALL, empty_call_seconds(repeat) * 1e3))
    header = "{:<34} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>10}"
    print(header.format("case", "fused ms", "comp. ms", "rows floor", "2M floor", "bw floor", "adam ms", "vs comp",
                        "vs rows fl.", "vs adam", "dense ms", "adam/dense"))
    cases = [("1M x 64, 16,384 rows", Problem(1000000, 64, 16384, 16384)),
             ("200k x 128, 65,536 rows", Problem(200000, 128, 65536, 65536))]
    if not quick:
        cases.append(("1M x 64, 65,536 ids / 8,192 rows", Problem(1000000, 64, 65536, 8192)))
    verdicts = []
    with tempfile.TemporaryDirectory() as scratch:
        floor = build_floor(scratch)
        for name, problem in cases:
            var, m, v = problem.variables()
            floor_steps = [scattered_floor_step(floor, problem, threads, huge) for huge in (False, True)]
            batches = [(batch.grad, batch.indices) for batch in problem.batches]
            fused, composite, rows_floor, huge_floor = per_step_medians(
                [fused_step(var, m, v, batches), composite_step(var, m, v, batches)] + floor_steps, repeat)
            for step in floor_steps:
                step.close()
            del floor_steps
            bandwidth_floor = problem.moved_floats() * 4 / bandwidth
            adam = median_seconds(stock_adam_step(var, problem.grad, problem.indices, problem.rows), 1 if quick else 3,
                                  warmup=1)
            dense = median_seconds(fused_dense_step(var, m, v, problem.grad, problem.indices), 2 if quick else 5,
                                   warmup=1)
            print(header.format(name, "%.2f" % (fused * 1e3), "%.2f" % (composite * 1e3), "%.2f" % (rows_floor * 1e3),
                                "%.2f" % (huge_floor * 1e3), "%.2f" % (bandwidth_floor * 1e3), "%.0f" % (adam * 1e3),
                                "%.1fx" % (composite / fused), "%.2fx" % (fused / rows_floor), "%.0fx" % (adam / fused),
                                "%.1f" % (dense * 1e3), "%.1fx" % (adam / dense)))
            duplicated = problem.ids != problem.distinct
            verdicts.append((name, composite / fused, fused / rows_floor, fused / huge_floor, duplicated))
            if duplicated:
                deduped, = per_step_medians(
                    [fused_step(var, m, v, [(batch.unique_grad, batch.unique) for batch in problem.batches])], repeat)
                print("  dedup cost: fused on {:,} ids {:.2f} ms vs the same {:,} rows pre-summed {:.2f} ms "
                      "-> {:.2f} ms ({:.0f}% of the step); the rows floor is for the {:,} rows".format(
                          problem.ids, fused * 1e3, problem.distinct, deduped * 1e3, (fused - deduped) * 1e3,
                          100 * (fused - deduped) / fused, problem.distinct))
            del var, m, v
    print()
    for name, speedup, over_floor, over_huge_floor, duplicated in verdicts:
        # The >= 3x and <= 1.3x goals are set for the two cases without heavy duplication; the
        # duplicate-heavy one reports its dedup cost (above).
        versus = "vs composite {:5.1f}x ({})".format(
            speedup, "reported" if duplicated else "goal >= 3x: " + ("met" if speedup >= 3 else "MISSED"))
        floor_verdict = "reported" if duplicated else "goal <= 1.3x: " + ("met" if over_floor <= 1.3 else "MISSED")
        print("{:<34} {:<38} vs rows floor {:4.2f}x ({}); vs the 2 MiB-page floor {:4.2f}x".format(
            name, versus, over_floor, floor_verdict, over_huge_floor))


def bfc_off_run(repeat):
    """Fused against composite only, for the allocator comparison."""
    print("TF_CPU_ALLOCATOR_USE_BFC={}: fused vs composite".format(bfc_setting()))
    for name, problem in (("1M x 64, 16,384 rows", Problem(1000000, 64, 16384, 16384)),
                          ("200k x 128, 65,536 rows", Problem(200000, 128, 65536, 65536))):
        var, m, v = problem.variables()
        batches = [(batch.grad, batch.indices) for batch in problem.batches]
        fused, composite = per_step_medians([fused_step(var, m, v, batches), composite_step(var, m, v, batches)],
                                            repeat)
        print("{:<34} fused {:7.2f} ms  composite {:7.2f} ms  {:5.1f}x (goal >= 3x: {})".format(
            name, fused * 1e3, composite * 1e3, composite / fused, "met" if composite / fused >= 3 else "MISSED"))
        del var, m, v


def main():
    args = sys.argv[1:]
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 30
    quick = "--quick" in args
    if "--bfc-off-part" in args:
        bfc_off_run(repeat)
        return
    full_run(repeat, quick)
    print()
    adagrad_ftrl_run(repeat)
    if "--no-bfc-off" not in args:
        print()
        sys.stdout.flush()
        # The allocator is chosen when TensorFlow loads: a fresh process, with the variable set (a value the
        # user sets wins over the wheel's runtime default).
        environment = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="false")
        subprocess.check_call([sys.executable, os.path.abspath(__file__), "--bfc-off-part", "--repeat", str(repeat)],
                              env=environment)


if __name__ == "__main__":
    main()
