"""Timing shared by the kernel benchmarks (Python 3.6 syntax: they run in the target's interpreter)."""

import statistics
import time


def median_seconds(step, repeat=30, warmup=3):
    """The median wall time of `repeat` calls of step(), after `warmup` untimed ones."""
    return interleaved_medians([step], repeat, warmup)[0]


def interleaved_medians(steps, repeat=30, warmup=3):
    """The median wall time of each of steps, timed in turns (one call of each per round).

    Taking turns exposes every step to the same stretch of machine load, so the ratios between
    them hold even when the machine's speed drifts during the run.
    """
    for _ in range(warmup):
        for step in steps:
            step()
    times = [[] for _ in steps]
    for _ in range(repeat):
        for step, spent in zip(steps, times):
            start = time.perf_counter()
            step()
            spent.append(time.perf_counter() - start)
    return [statistics.median(spent) for spent in times]
