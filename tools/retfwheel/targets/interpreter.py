"""Finding an interpreter for a target Python version: option, environment, pyenv, then PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from retfwheel.cache import Progress, entry_lock, seal, usable
from retfwheel.errors import FetchError, InputFileError
from retfwheel.process import last_line


def env_variable(version: tuple[int, int]) -> str:
    return f"RETF_PYTHON{version[0]}{version[1]}"


def find_python(version: tuple[int, int], explicit: Path | None = None) -> Path:
    """A Python executable of ``version``; raises InputFileError saying where it looked."""
    name = f"python{version[0]}.{version[1]}"
    variable = env_variable(version)
    candidates: list[tuple[str, Path]] = []
    if explicit:
        candidates.append(("--python", Path(explicit)))
    if os.environ.get(variable):
        candidates.append((variable, Path(os.environ[variable])))
    for root in _pyenv_roots():
        for folder in sorted((root / "versions").glob(f"{version[0]}.{version[1]}.*"), reverse=True):
            candidates.append(("pyenv", folder / "bin" / name))
    on_path = shutil.which(name)
    if on_path:
        candidates.append(("PATH", Path(on_path)))
    for source, path in candidates:
        if path.is_file() and os.access(path, os.X_OK) and _reports(path, version):
            return path
        if source in ("--python", variable):
            raise InputFileError(f"{source}={path}: not a working Python {version[0]}.{version[1]} interpreter",
                                 hint=f"point {source} at a Python {version[0]}.{version[1]} executable, or unset it")
    raise InputFileError(
        f"no Python {version[0]}.{version[1]} interpreter found (looked at ${variable}, pyenv, and {name} on PATH)",
        hint=f"install it (e.g. `pyenv install {version[0]}.{version[1]}`) or set {variable}=/path/to/{name}",
    )


def _pyenv_roots() -> list[Path]:
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(Path(os.environ["PYENV_ROOT"]))
    pyenv = shutil.which("pyenv")
    if pyenv:
        result = subprocess.run([pyenv, "root"], capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.strip():
            roots.append(Path(result.stdout.strip()))
    roots.append(Path.home() / ".pyenv")
    unique = []
    for root in roots:
        if root not in unique and (root / "versions").is_dir():
            unique.append(root)
    return unique


def _reports(path: Path, version: tuple[int, int]) -> bool:
    try:
        result = subprocess.run([str(path), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and result.stdout.strip() == f"{version[0]}.{version[1]}"


# pip 18.1, which a Python 3.6 venv starts with, cannot see manylinux2010 wheels; pip 22 dropped 3.6.
# wheel: legacy setup.py sdists (clang 5.0, termcolor 1.1.0) build only with it installed.
VENV_TOOLS = ("pip<22", "wheel<0.38")


def pip_venv(python: Path, folder: Path, progress: Progress = lambda message: None) -> Path:
    """A venv of ``python`` at the cache entry ``folder`` (kind venvs) whose pip understands manylinux2010/2014;
    made once."""
    with entry_lock(folder):  # builds sharing the cache make it once: the second waits, then uses it
        if not usable(folder, "venvs", progress, "venv", "making it again"):
            progress(f"preparing a Python {python} venv with {', '.join(VENV_TOOLS)} (once)")
            make_venv(python, folder)
            seal(folder, "venvs")
    return folder / "bin" / "python"


def make_venv(python: Path, folder: Path) -> Path:
    """A new venv of ``python`` at ``folder`` (made in place: a venv is not moved once made) with VENV_TOOLS."""
    executable = folder / "bin" / "python"
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    for command in (
        [str(python), "-m", "venv", str(folder)],
        [str(executable), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-U", *VENV_TOOLS],
    ):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise FetchError(f"preparing a Python venv at {folder} failed: {last_line(result)}")
    return executable
