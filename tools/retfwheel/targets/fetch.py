"""Downloading a recipe's default input wheel for its target, once, into the cache."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from retfwheel.cache import entry_lock, entry_path, publish_folder, scratch_path, usable
from retfwheel.errors import FetchError
from retfwheel.manylinux import installable_platforms
from retfwheel.process import last_line
from retfwheel.targets.recipe import Recipe

Progress = Callable[[str], None]


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


def input_entry(recipe: Recipe, cache: Path) -> Path:
    """The cache entry (kind inputs) that holds the recipe's [input] wheel: keyed by the requirement and the
    target's pip options, not by content (which is known only once downloaded)."""
    key = hashlib.sha256(" ".join([str(recipe.input_requirement), *pip_target_options(recipe)]).encode()).hexdigest()[:16]
    return entry_path(cache, "inputs", key)


def fetch_default_input(recipe: Recipe, cache: Path, progress: Progress = lambda message: None) -> Path:
    """The recipe's [input] requirement as a wheel file for its target, downloaded on first use."""
    requirement = recipe.input_requirement
    if requirement is None:
        raise FetchError(f"{recipe.path}: no INPUT given and the recipe has no [input] requirement",
                         hint="pass a wheel file, or add [input] requirement = \"tensorflow-cpu==2.6.2\" to the recipe")
    folder = input_entry(recipe, cache)
    with entry_lock(folder):
        if not usable(folder, "inputs", progress, "input", "downloading it again"):
            _download_input(recipe, folder)
        found = sorted(folder.glob("*.whl"))
        if len(found) != 1:
            raise FetchError(f"{folder}: holds {len(found)} wheels, not one; remove it and retry")
        return found[0]


def _download_input(recipe: Recipe, folder: Path) -> None:
    staging = scratch_path(folder)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   *pip_target_options(recipe), "-d", str(staging), str(recipe.input_requirement)]
        result = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(staging.glob("*.whl"))
        if result.returncode != 0 or len(wheels) != 1:
            raise FetchError(f"downloading {recipe.input_requirement} for {recipe.target.python_tag} failed: {last_line(result)}")
        publish_folder(folder, "inputs", staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
