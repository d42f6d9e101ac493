"""Timing shared by the kernel benchmarks (Python 3.6 syntax: they run in the target's interpreter)."""

import statistics
import time


def median_seconds(step, repeat=30, warmup=3):
    """The median wall time of `repeat` calls of step(), after `warmup` untimed ones."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
