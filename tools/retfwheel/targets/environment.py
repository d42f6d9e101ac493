"""Emulated old user environments: a target-Python venv with the recipe's packages, run with the
target's old libstdc++ mounted over this machine's in a private mount namespace.

Environments are made once per recipe environment and cached; each verification works on a fresh
copy so the cached one is never changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name

from retfwheel.cache import check, entry_lock, entry_path, publish_file, seal, usable
from retfwheel.errors import EmulationError, FetchError, InputFileError, RecipeError
from retfwheel.process import last_line
from retfwheel.targets.interpreter import VENV_TOOLS, find_python, make_venv
from retfwheel.targets.recipe import Recipe
from retfwheel.targets.runtime import obtain_runtime

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Environment:
    venv: Path
    python: Path
    system_runtime: Path | None  # the old libstdc++ to mount over this machine's, if the recipe has one

    def copy_to(self, folder: Path) -> "Environment":
        """A fresh, independent copy of this environment at ``folder``."""
        shutil.copytree(self.venv, folder / "venv", symlinks=True)
        _retarget_scripts(folder / "venv", self.venv)
        return Environment(folder / "venv", folder / "venv" / "bin" / "python", self.system_runtime)


def prepare_environment(recipe: Recipe, cache: Path, explicit_python: Path | None, progress: Progress) -> Environment:
    """The recipe's emulated environment, created on first use."""
    spec = recipe.environment
    if spec is None:
        raise RecipeError([f"{recipe.path}: has no [environment] section to verify in"],
                          hint="add [environment] packages = [...] (see recipes/emulated-py36.toml)")
    interpreter = find_python(recipe.target.python, explicit_python)
    folder = _environment_folder(recipe, cache, interpreter)
    runtime = None
    if spec.system_libstdcxx is not None:
        runtime = entry_path(cache, "environments", f"{recipe.name}-libstdc++-{spec.system_libstdcxx.sha256[:16]}.so.6")
        with entry_lock(runtime):
            if not usable(runtime, "environments", progress, "system libstdc++", "fetching it again"):
                _fetch_system_runtime(spec, recipe, runtime, cache, progress)
    python = folder / "bin" / "python"
    with entry_lock(folder):
        if not usable(folder, "environments", progress, f"{recipe.name} environment", "making it again"):
            _make_environment(spec, recipe, interpreter, folder, python, progress)
    return Environment(folder, python, runtime)


def _fetch_system_runtime(spec, recipe: Recipe, runtime: Path, cache: Path, progress: Progress) -> None:
    progress(f"fetching the target's system libstdc++ ({spec.system_libstdcxx.suite} {spec.system_libstdcxx.package} "
             f"{spec.system_libstdcxx.version})")
    data, _ = obtain_runtime(spec.system_libstdcxx, recipe.target.arch, cache, progress)
    publish_file(runtime, "environments", data)


def _make_environment(spec, recipe: Recipe, interpreter: Path, folder: Path, python: Path, progress: Progress) -> None:
    progress(f"creating the {recipe.name} environment: Python {interpreter}, pip {spec.pip}, "
             f"{', '.join(spec.packages + spec.upgrades) or 'nothing else'} (once)")
    make_venv(interpreter, folder)  # in place: a venv is not moved once made
    # The upgrades go in a second install: pip resolves them over the first one's pins, as users' own
    # `pip install numpy==...` does (warning that tensorflow 1.15.5 asked for less). The packages are resolved
    # by a pip that backtracks over releases newer than the target's Python, which the user's older pip met
    # only later; the user's pip goes in last, and installs the wheel.
    for requirements in (spec.packages, spec.upgrades, (f"pip=={spec.pip}",)):
        if requirements:
            result = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *requirements],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                shutil.rmtree(folder, ignore_errors=True)
                raise FetchError(f"installing {', '.join(requirements)} into the environment failed: {last_line(result)}")
    (folder / ".retfwheel-environment").write_text(json.dumps(list(spec.packages + spec.upgrades)))
    seal(folder, "environments")


def _environment_folder(recipe: Recipe, cache: Path, interpreter: Path) -> Path:
    spec = recipe.environment
    assert spec is not None
    key = hashlib.sha256(json.dumps([str(interpreter), list(spec.packages), list(VENV_TOOLS), spec.pip]
                                    + ([list(spec.upgrades)] if spec.upgrades else [])).encode()).hexdigest()[:16]
    return entry_path(cache, "environments", f"{recipe.name}-{key}")


def installed_distributions(recipe: Recipe, cache: Path) -> tuple[Path, dict[str, dict]] | None:
    """(its folder, {canonical name: {"version", "files"}}) of the recipe's environment if it has been made (None
    if not): read, never made. The files are those its RECORDs list, relative to the folder."""
    if recipe.environment is None:
        return None
    try:
        folder = _environment_folder(recipe, cache, find_python(recipe.target.python, None))
    except InputFileError:
        return None
    if check(folder, "environments") is not None:
        return None
    found: dict[str, dict] = {}
    for info in sorted(folder.glob("lib/python*/site-packages/*.dist-info")) + sorted(folder.glob("lib/python*/site-packages/*.egg-info")):
        stem = info.name.rsplit(".", 1)[0]
        name, _, version = stem.partition("-")
        found.setdefault(str(canonicalize_name(name)), {"version": version.split("-py", 1)[0],
                                                        "files": _listed_files(info, folder)})
    return folder, found


def _listed_files(info: Path, folder: Path) -> list[str]:
    record, listing = info / "RECORD", info / "installed-files.txt"
    if record.is_file():
        base, lines = info.parent, [line.rsplit(",", 2)[0].strip('"') for line in record.read_text().splitlines()]
    elif listing.is_file():
        base, lines = info, listing.read_text().splitlines()
    else:
        return []
    prefix = str(base.relative_to(folder))
    return [os.path.normpath(f"{prefix}/{line}") if ".." in line else f"{prefix}/{line}"
            for line in (entry.strip() for entry in lines) if line]


def system_runtime_path() -> Path:
    """The real file behind this machine's libstdc++.so.6 (the one to mount over)."""
    for folder in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        candidate = Path(folder) / "libstdc++.so.6"
        if candidate.exists():
            return candidate.resolve()
    raise EmulationError("this machine has no libstdc++.so.6 to replace")


def namespace_prefix() -> list[str]:
    """The unshare command that gives a private mount namespace here, or EmulationError."""
    attempts = [["unshare", "-m"], ["unshare", "-Urm"]] if os.geteuid() == 0 else [["unshare", "-Urm"]]
    for attempt in attempts:
        try:
            if subprocess.run([*attempt, "true"], capture_output=True).returncode == 0:
                return attempt
        except OSError:
            break
    raise EmulationError("cannot make a private mount namespace here: neither `unshare -m` (as root) nor "
                         "`unshare -Urm` (user namespaces) is allowed, so the old libstdc++ cannot be mounted")


def emulated_command(environment: Environment, command: list[str]) -> list[str]:
    """``command`` run with the environment's old libstdc++ mounted over the system's (if any)."""
    if environment.system_runtime is None:
        return command
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    return [*namespace_prefix(), "sh", "-c", script, "sh", str(environment.system_runtime), str(system_runtime_path()), *command]


def _retarget_scripts(venv: Path, original: Path) -> None:
    """Point the copied venv's script shebangs and activate files at the copy."""
    old, new = str(original).encode(), str(venv).encode()
    for path in (venv / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data[:4096]:
            path.write_bytes(data.replace(old, new))
