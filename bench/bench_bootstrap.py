"""Cost of the bootstrap inside a produced wheel, in the recipe's emulated old environment.

Installs WHEEL into a copy of the environment, then, in fresh processes under the old libstdc++,
times the bootstrap's run() with the settings injected into tensorflow/__init__.py, and, when the
wheel ships the retf op library, its registration at the end of `import tensorflow` (register_ops).
What TensorFlow's own pywrap_tensorflow.py imports in every `import tensorflow` (ctypes) is imported
before run()'s clock: the bootstrap's use of it adds nothing. The baseline measured in the same run is
the interpreter's own start-up; the goal is <= 15 ms per process for the two together. Then the whole
`import tensorflow as tf; tf.constant(1)` that every script pays: wall time and peak memory of the wheel
against the environment's own TF 1.15.5, the two sides timed in turns; alone, and in the order users' scripts
import (pandas, numpy, absl and six first), where TF 1.15.5 no longer pays for the pandas its own import loads.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from retfwheel.targets.environment import emulated_command, prepare_environment  # noqa: E402
from retfwheel.targets.fetch import cache_root  # noqa: E402
from retfwheel.targets.recipe import load_recipe  # noqa: E402
from retfwheel.wheelfile.injection import BEGIN, OPS_BEGIN  # noqa: E402

TIMER = """
import importlib, json, sys, time, types
site, config = sys.argv[1], json.loads(sys.argv[2])
for name in filter(None, sys.argv[3].split(",")):  # what `import tensorflow` imports anyway: not the bootstrap's cost
    importlib.import_module(name)
package = types.ModuleType("tensorflow")  # the bootstrap alone: TensorFlow's own __init__ does not run
package.__path__ = [site + "/tensorflow"]
sys.modules["tensorflow"] = package
start = time.perf_counter()
module = importlib.import_module("tensorflow._retf")
module.run(site + "/tensorflow", config)
print((time.perf_counter() - start) * 1e3)
"""
# TensorFlow imported with the library left out, then the registration `import tensorflow` does, timed.
OPS_TIMER = """
import json, os, sys, time
os.environ["RETF_OPS"] = "0"
import tensorflow
del os.environ["RETF_OPS"]
from tensorflow._retf.ops import register_ops
start = time.perf_counter()
register_ops(vars(tensorflow), json.loads(sys.argv[1]))
print((time.perf_counter() - start) * 1e3)
"""
BASELINE = "import time, sys; print(0)"
# What a user feels on every script: the whole import, and the process's peak memory after it.
IMPORT = ("import resource, tensorflow as tf; tf.constant(1); "
          "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)")
ORDERS = {"alone": IMPORT, "after pandas, numpy, absl, six": "import pandas, numpy, absl, six; " + IMPORT}


def injected_config(init: str, marker: str = BEGIN, call: str = "_run") -> dict | None:
    """The settings literal of an injected call (the bootstrap's by default); None without that block."""
    if marker not in init:
        return None
    tree = ast.parse(init[init.index(marker):])
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == call:
            return ast.literal_eval(node.args[1])
    raise SystemExit(f"no {call} call found after {marker!r} in tensorflow/__init__.py")


def imported_by_tensorflow(site: str, names: tuple[str, ...] = ("ctypes",)) -> list[str]:
    """Of ``names``, which the bootstrap imports, those TensorFlow's own pywrap_tensorflow.py imports at its top level
    in every `import tensorflow` too: importing them is not a cost the bootstrap adds."""
    source = Path(site) / "tensorflow" / "python" / "pywrap_tensorflow.py"
    tree = ast.parse(source.read_text()) if source.is_file() else ast.Module(body=[], type_ignores=[])
    imported = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    return [name for name in names if name in imported]


def timed(command: list[str]) -> float:
    return float(subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()[-1])


def import_cost(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak MiB the process reported) of one run of IMPORT."""
    import time

    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, float(result.stdout.split()[-1])


def wall(command: list[str]) -> float:
    import time

    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--recipe", default=str(REPO / "recipes" / "emulated-py36.toml"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--import-runs", type=int, default=7, help="runs of the whole import on each side")
    args = parser.parse_args()
    recipe = load_recipe(Path(args.recipe))
    base = prepare_environment(recipe, cache_root(), None, lambda m: print(m, file=sys.stderr))
    with tempfile.TemporaryDirectory() as scratch:
        env = base.copy_to(Path(scratch))
        subprocess.run([str(env.python), "-m", "pip", "install", "-q", "--no-index", str(args.wheel)], check=True)
        site = subprocess.run([str(env.python), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        init = (Path(site) / "tensorflow" / "__init__.py").read_text()
        config, ops_config = injected_config(init), injected_config(init, OPS_BEGIN, "_call")
        if config is None:
            raise SystemExit(f"{args.wheel}: carries no retfwheel bootstrap")
        shared = imported_by_tensorflow(site)
        bootstrap, ops, startup = [], [], []
        for _ in range(args.runs):  # in turns, so load that drifts during the run falls on every measure
            bootstrap.append(timed(emulated_command(env, [str(env.python), "-c", TIMER, site, json.dumps(config),
                                                          ",".join(shared)])))
            if ops_config is not None:
                ops.append(timed(emulated_command(env, [str(env.python), "-c", OPS_TIMER, json.dumps(ops_config)])))
            startup.append(wall(emulated_command(env, [str(env.python), "-c", BASELINE])))
        sides = {"TF 1.15.5 (the environment as it was)": base, "the wheel": env}
        whole = {(order, label): ([], []) for order in ORDERS for label in sides}
        for _ in range(args.import_runs):  # the two sides in turns, each order
            for order, code in ORDERS.items():
                for label, side in sides.items():
                    seconds, peak = import_cost(emulated_command(side, [str(side.python), "-c", code]))
                    whole[order, label][0].append(seconds)
                    whole[order, label][1].append(peak)
    base_ms = statistics.median(startup)
    rows = [("bootstrap run()", bootstrap)] + ([("op library registration", ops)] if ops else [])
    total = [sum(parts) for parts in zip(*(times for _, times in rows))]
    if shared:
        print(f"imported before run()'s clock, as `import tensorflow` imports them anyway: {', '.join(shared)}")
    print(f"{'measure':<36} {'median ms':>10} {'max ms':>8}")
    print(f"{'interpreter start-up (baseline)':<36} {base_ms:10.2f} {max(startup):8.2f}")
    for name, times in rows + [("together", total)]:
        print(f"{name:<36} {statistics.median(times):10.2f} {max(times):8.2f}")
    cost = statistics.median(total)
    print(f"bootstrap / start-up: {cost / base_ms:.3f}x; goal <= 15 ms: {'met' if cost <= 15 else 'MISSED'} "
          f"(max of {args.runs}: {max(total):.2f} ms)")
    print(f"\n`import tensorflow as tf; tf.constant(1)`, whole process, median of {args.import_runs} in turns:")
    print(f"{'imported':<32} {'side':<40} {'wall s':>7} {'range':>13} {'peak MiB':>9}")
    for (order, label), (seconds, peaks) in whole.items():
        print(f"{order:<32} {label:<40} {statistics.median(seconds):7.2f} {min(seconds):6.2f}-{max(seconds):<6.2f} "
              f"{statistics.median(peaks):9.0f}")
    for order in ORDERS:
        (old_s, old_m), (new_s, new_m) = [(statistics.median(whole[order, label][0]),
                                           statistics.median(whole[order, label][1])) for label in sides]
        print(f"{order}: wheel / TF 1.15.5 {new_s / old_s:.2f}x time, {new_m / old_m:.2f}x peak memory "
              f"(goal: <= 1.00x both)")


if __name__ == "__main__":
    main()
