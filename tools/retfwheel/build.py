"""`retfwheel build`: read -> plan -> materialize -> write -> audit -> atomic rename."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from retfwheel import __version__
from retfwheel.audit import AuditReport, audit_wheel
from retfwheel.elf import ElfInfo
from retfwheel.errors import OutputError
from retfwheel.inspection import Inspection, analyse
from retfwheel.plan import BuildPlan, CopyMember, make_plan
from retfwheel.recipe import Recipe
from retfwheel.scan import scan_wheel
from retfwheel.wheel import read_wheel
from retfwheel.writer import build_epoch, write_wheel

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildResult:
    plan: BuildPlan
    inspection: Inspection
    output: Path | None  # None for a dry run
    audit: AuditReport | None


def build_wheel(input_path: Path, recipe: Recipe, out_dir: Path, *, dry_run: bool = False,
                progress: Progress = lambda message: None) -> BuildResult:
    """Rebuild ``input_path`` for ``recipe`` into ``out_dir``; nothing is left there on failure."""
    progress(f"reading {input_path.name}")
    wheel = read_wheel(input_path)
    progress(f"verifying {len(wheel.archive.members)} members against RECORD and analysing ELF files")
    scan = scan_wheel(wheel, verify=True)
    inspection = analyse(wheel, scan.elves, recipe)
    plan = make_plan(inspection, recipe, file_sha256(input_path), __version__)
    if dry_run:
        return BuildResult(plan, inspection, None, None)
    epoch = build_epoch()
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".retfwheel-", dir=out_dir))
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create the output ({exc.strerror or exc})") from exc
    try:
        progress(f"writing {plan.filename}")
        written = write_wheel(plan, wheel.archive, staging / plan.filename, epoch)
        progress("auditing the written wheel")
        report = audit_wheel(written, plan, recipe, output_elves(plan, scan.elves))
        final = out_dir / plan.filename
        os.chmod(written.path, 0o644)
        os.replace(written.path, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildResult(plan, inspection, final, report)


def output_elves(plan: BuildPlan, input_elves: tuple[ElfInfo, ...]) -> tuple[ElfInfo, ...]:
    """ELF analyses under their output names (copied members keep their bytes, so their analysis)."""
    by_source = {e.path: e for e in input_elves}
    return tuple(
        dataclasses.replace(by_source[m.source.name], path=m.name)
        for m in plan.members
        if isinstance(m, CopyMember) and m.source.name in by_source
    )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
