"""`retfwheel build` and `lock`: read -> plan -> materialize -> finish -> write -> audit -> atomic rename."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from retfwheel import __version__
from retfwheel.cache import ensure_writable, entry_lock, entry_path, publish_file, usable
from retfwheel.errors import InputFileError, OutputError, RecipeError
from retfwheel.native.elf import ElfInfo
from retfwheel.native.inspection import Inspection, analyse
from retfwheel.native.scan import verified_elves
from retfwheel.stages.audit import AuditReport, audit_wheel
from retfwheel.stages.finish import finish
from retfwheel.stages.materialize import materialize
from retfwheel.stages.oplib import derive_flags
from retfwheel.stages.plan import BuildPlan, make_plan
from retfwheel.targets.fetch import cache_root
from retfwheel.targets.interpreter import find_python, pip_venv
from retfwheel.targets.lock import (
    LOCK_STORE,
    Lock,
    check_lock,
    find_lock,
    format_lock,
    lock_destination,
    lock_name,
    resolve_lock,
    vendored_requirements,
)
from retfwheel.targets.recipe import Recipe, is_builtin
from retfwheel.wheelfile.record import file_sha256
from retfwheel.wheelfile.staging import remove_stale, staging_folder
from retfwheel.wheelfile.wheel import read_wheel
from retfwheel.wheelfile.writer import CopyMember, build_epoch, write_wheel

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    pass


@dataclass(frozen=True)
class BuildResult:
    plan: BuildPlan
    inspection: Inspection
    output: Path | None  # None for a dry run
    audit: AuditReport | None


def build_wheel(input_path: Path, recipe: Recipe, out_dir: Path, *, cache: Path | None = None, dry_run: bool = False,
                python: Path | None = None, lock_dir: Path | None = None, progress: Progress = _quiet) -> BuildResult:
    """Rebuild ``input_path`` for ``recipe`` into ``out_dir``; nothing is left there on failure."""
    progress(f"reading {input_path.name}")
    wheel = read_wheel(input_path)
    lock = _lock_for(wheel, recipe, lock_dir, _cache(cache), progress)
    input_sha256 = file_sha256(input_path)
    progress(f"verifying {len(wheel.archive.members)} members against RECORD and analysing ELF files")
    elves = verified_elves(wheel, input_sha256, _cache(cache), progress)
    inspection = analyse(wheel, elves, recipe)
    op_flags = derive_flags(wheel.archive, inspection.tensorflow_version or "", inspection.string_abi_symbols) \
        if recipe.ops.build and inspection.tensorflow_version else None
    plan = make_plan(inspection, recipe, input_sha256, __version__, lock, op_flags)
    if dry_run:
        return BuildResult(plan, inspection, None, None)
    target_python = _target_python(recipe, lock, cache, python, progress)
    results = materialize(plan, recipe, wheel.archive, _cache(cache), target_python, progress)
    plan = finish(plan, recipe, results, output_elves(plan, elves), input_path)
    shipped = output_elves(plan, elves) + results.elves
    epoch = build_epoch()
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        stale = remove_stale(out_dir)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create the output ({exc.strerror or exc})") from exc
    for folder in stale:
        progress(f"removed {folder.name}, left in {out_dir} by a build that was killed")
    with staging_folder(out_dir) as staging:
        progress(f"writing {plan.filename}")
        written = write_wheel(plan, staging / plan.filename, epoch)
        progress("auditing the written wheel")
        report = audit_wheel(written, plan, recipe, shipped, results.runtime.elf if results.runtime else None)
        final = out_dir / plan.filename
        os.chmod(written.path, 0o644)
        os.replace(written.path, final)
    return BuildResult(plan, inspection, final, report)


def lock_wheel(input_path: Path, recipe: Recipe, cache: Path, python: Path | None, lock_dir: Path | None = None,
               progress: Progress = _quiet) -> Lock:
    """Resolve and write the recipe's lock file for ``input_path`` (another input's lock is never touched)."""
    if recipe.deps is None or not recipe.deps.vendor:
        raise RecipeError([f"{recipe.path}: has no [deps] section with vendor = true; nothing to lock"])
    wheel = read_wheel(input_path)
    destination = lock_destination(recipe, wheel, lock_dir, entry_path(cache, LOCK_STORE), is_builtin(recipe))
    version = f"{recipe.target.python[0]}.{recipe.target.python[1]}"
    interpreter = pip_venv(find_python(recipe.target.python, python), entry_path(cache, "venvs", f"python{version}"), progress)
    lock = resolve_lock(wheel, recipe, interpreter, destination, progress)
    if destination.parent == entry_path(cache, LOCK_STORE):
        with entry_lock(destination):
            publish_file(destination, LOCK_STORE, format_lock(lock).encode())
        return lock
    temporary = lock.path.with_name(f".{lock.path.name}.tmp")
    try:
        lock.path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(format_lock(lock))
        os.replace(temporary, lock.path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise OutputError(f"{lock.path}: cannot write ({exc.strerror or exc})") from exc
    return lock


def _lock_for(wheel, recipe: Recipe, lock_dir: Path | None, cache: Path, progress: Progress) -> Lock | None:
    if recipe.deps is None or not recipe.deps.vendor:
        return None
    recipe_arg = recipe.name if is_builtin(recipe) else str(recipe.path)
    stored = entry_path(cache, LOCK_STORE, lock_name(recipe, wheel))
    with entry_lock(stored):  # a damaged lock in the cache is removed, and find_lock says how to make it again
        usable(stored, LOCK_STORE, progress, "lock", f"make it again with `retfwheel lock --recipe {recipe_arg}`")
    lock = find_lock(recipe, wheel, lock_dir, entry_path(cache, LOCK_STORE), recipe_arg)
    check_lock(lock, wheel, vendored_requirements(wheel, recipe.deps.leave, recipe.api_requirements), recipe_arg)
    return lock


def _target_python(recipe: Recipe, lock: Lock | None, cache: Path | None, explicit: Path | None,
                   progress: Progress) -> Path | None:
    """The target's interpreter (in a venv with a suitable pip), needed only to build locked sdists."""
    if lock is None or not any(p.kind == "sdist" for p in lock.packages):
        return None
    try:
        python = find_python(recipe.target.python, explicit)
    except InputFileError:
        return None  # fetch_locked says which sdist needed it, if any is not built yet
    version = f"{recipe.target.python[0]}.{recipe.target.python[1]}"
    return pip_venv(python, entry_path(_cache(cache), "venvs", f"python{version}"), progress)


def _cache(cache: Path | None) -> Path:
    return ensure_writable(cache_root(cache))


def output_elves(plan: BuildPlan, input_elves: tuple[ElfInfo, ...]) -> tuple[ElfInfo, ...]:
    """ELF analyses under their output names (copied members keep their bytes, so their analysis)."""
    by_source = {e.path: e for e in input_elves}
    return tuple(
        dataclasses.replace(by_source[m.source.name], path=m.name)
        for m in plan.members
        if isinstance(m, CopyMember) and m.source.name in by_source
    )
