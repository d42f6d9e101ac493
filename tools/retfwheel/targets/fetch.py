"""Downloading a recipe's default input wheel for its target, once, into the cache."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from retfwheel.errors import FetchError
from retfwheel.native.policy import installable_platforms
from retfwheel.process import last_line
from retfwheel.targets.recipe import Recipe


def cache_root(explicit: Path | None = None) -> Path:
    """Where downloads and builds are cached: option, RETFWHEEL_CACHE_DIR, then XDG cache."""
    if explicit:
        return Path(explicit)
    if os.environ.get("RETFWHEEL_CACHE_DIR"):
        return Path(os.environ["RETFWHEEL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "retfwheel"


def pip_target_options(recipe: Recipe) -> list[str]:
    """pip options that select distributions for the recipe's target instead of this machine."""
    t = recipe.target
    options = ["--only-binary=:all:", "--python-version", f"{t.python[0]}.{t.python[1]}",
               "--implementation", t.implementation, "--abi", t.abi]
    for platform in installable_platforms(t.glibc, t.arch):
        options += ["--platform", platform]
    return options


def fetch_default_input(recipe: Recipe, cache: Path) -> Path:
    """The recipe's [input] requirement as a wheel file for its target, downloaded on first use."""
    requirement = recipe.input_requirement
    if requirement is None:
        raise FetchError(f"{recipe.path}: no INPUT given and the recipe has no [input] requirement",
                         hint="pass a wheel file, or add [input] requirement = \"tensorflow-cpu==2.6.2\" to the recipe")
    options = pip_target_options(recipe)
    key = hashlib.sha256(" ".join([str(requirement), *options]).encode()).hexdigest()[:16]
    folder = cache / "inputs" / key
    found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if len(found) == 1:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".inputs-", dir=cache))
    try:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   *options, "-d", str(staging), str(requirement)]
        result = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(staging.glob("*.whl"))
        if result.returncode != 0 or len(wheels) != 1:
            raise FetchError(f"downloading {requirement} for {recipe.target.python_tag} failed: {last_line(result)}")
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
        return folder / wheels[0].name
    finally:
        shutil.rmtree(staging, ignore_errors=True)
