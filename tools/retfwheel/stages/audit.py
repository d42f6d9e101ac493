"""Auditing a written wheel by reopening it with the same reader the input went through."""

from __future__ import annotations

import ast
import dataclasses
import zipfile
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from retfwheel.errors import AuditError, RetfError
from retfwheel.manylinux import load_policies
from retfwheel.native.elf import ElfInfo, format_version
from retfwheel.native.policy import violations
from retfwheel.native.verdict import Fit, bundled_libraries, judge_elf
from retfwheel.stages.oplib import OPS_LIBRARY
from retfwheel.stages.plan import (
    BOOTSTRAP_FILE,
    BOOTSTRAP_MODULE,
    DEPS_DIR,
    PACKAGE,
    PRIVATE_PARENT,
    RUNTIME_DIR,
    BuildPlan,
)
from retfwheel.stages.sbom import SBOM_NAME, check_sbom, read_sbom
from retfwheel.stages.sharing import PRIVATE_METADATA_SUFFIX
from retfwheel.targets.recipe import Recipe, Target
from retfwheel.wheelfile.archive import read_content
from retfwheel.wheelfile.injection import BEGIN, END, RESUME
from retfwheel.wheelfile.record import hash_bytes
from retfwheel.wheelfile.wheel import PROVENANCE_FILE, read_wheel
from retfwheel.wheelfile.writer import CopyMember, NewMember, WrittenWheel, member_order


@dataclass(frozen=True)
class AuditReport:
    checks: tuple[str, ...]  # what was checked and held, in order


def audit_wheel(written: WrittenWheel, plan: BuildPlan, recipe: Recipe, elves: tuple[ElfInfo, ...],
                runtime: ElfInfo | None = None) -> AuditReport:
    """Check the wheel at ``written.path`` against its plan; raise AuditError on the first failure.

    ``elves`` are the analyses of every ELF member under its output name; ``runtime`` is the
    vendored libstdc++ among them, if any.
    """
    try:
        wheel = read_wheel(written.path)
    except RetfError as exc:
        raise AuditError(f"the written wheel does not read back: {exc}") from exc
    checks = []
    _expect(wheel.filename == plan.filename, f"file name {wheel.filename} != planned {plan.filename}")
    _expect(wheel.dist_info == plan.dist_info, f".dist-info is {wheel.dist_info}, planned {plan.dist_info}")
    _expect(str(wheel.version) == plan.version and wheel.metadata_name == plan.name, "METADATA Name/Version differ from the plan")
    checks.append(f"reads back as {plan.name} {plan.version}; RECORD lists exactly its {len(wheel.archive.members)} members")

    names = [m.name for m in wheel.archive.members]
    _expect(names == sorted(names, key=lambda n: member_order(n, plan.dist_info)), "members are not in canonical order")
    with zipfile.ZipFile(written.path) as zf:
        stamps = {i.date_time for i in zf.infolist()}
        modes = {i.external_attr >> 16 for i in zf.infolist()}
    _expect(len(stamps) == 1, f"members carry {len(stamps)} different timestamps")
    _expect(modes <= {0o100644, 0o100755}, f"unexpected file modes {sorted(oct(m) for m in modes)}")
    checks.append("sorted members, .dist-info then RECORD last, one fixed timestamp, normalized modes")

    planned = {m.name: m for m in plan.members}
    _expect(set(planned) | {plan.record_path} == set(names), "the archive's members differ from the plan")
    for name, item in planned.items():
        member = wheel.archive.member(name)
        assert member is not None  # the member list was checked equal to the plan's just above
        entry = wheel.record[name]
        if isinstance(item, CopyMember):
            same = (member.crc, member.size, member.method) == (item.source.crc, item.source.size, item.source.method)
            _expect(same and entry.hash == item.hash, f"{name} is not an unchanged copy of the input member")
        else:
            _expect(entry.hash == hash_bytes(read_content(wheel.archive, member)) == hash_bytes(item.data), f"{name} differs from what was planned")
    checks.append(f"{sum(isinstance(m, CopyMember) for m in plan.members)} members byte-identical to the input, "
                  f"{sum(isinstance(m, NewMember) for m in plan.members)} new members match RECORD")
    _expect(wheel.provenance is not None, f"{PROVENANCE_FILE} is missing")

    elf_names = {e.path for e in elves}
    _expect(elf_names <= set(names), "an analysed ELF file is missing from the archive")
    target = _audit_runtime(elves, runtime, recipe, checks)
    _audit_bootstrap(wheel, plan, checks)
    _audit_elves(elves, plan, recipe, target, checks)
    _audit_sbom(wheel, plan, checks)
    return AuditReport(tuple(checks))


def _audit_sbom(wheel, plan: BuildPlan, checks: list[str]) -> None:
    """The SBOM lists exactly the vendored distributions shipped, and the hashes of the libraries shipped."""
    member = wheel.archive.member(f"{plan.dist_info}/{SBOM_NAME}")
    _expect(member is not None, f"{plan.dist_info}/{SBOM_NAME} is missing")
    try:
        components = read_sbom(read_content(wheel.archive, member))
    except (ValueError, KeyError) as exc:
        raise AuditError(f"{SBOM_NAME} does not read back: {exc}") from exc
    shipped = {name: read_content(wheel.archive, m) for name in (f"{RUNTIME_DIR}/libstdc++.so.6", OPS_LIBRARY)
               if (m := wheel.archive.member(name)) is not None}
    vendored = set()
    private = PRIVATE_PARENT.replace(".", "/") + "/"
    for name in (m.name for m in wheel.archive.members):
        top, _, rest = name.partition("/")
        if name.startswith(private):  # the private_names distributions: tensorflow/_vendor/<name>-<v>.dist-info.vendored
            rest = name[len(private):]
        folder = rest.split("/", 1)[0]
        if (top == DEPS_DIR or name.startswith(private)) and folder.endswith(PRIVATE_METADATA_SUFFIX) \
                and rest == f"{folder}/METADATA":
            dist, version = folder[: -len(PRIVATE_METADATA_SUFFIX)].rsplit("-", 1)
            vendored.add((str(canonicalize_name(dist)), version))
    problems = check_sbom(components, shipped, vendored)
    _expect(not problems, f"the SBOM does not match the wheel: {'; '.join(problems[:3])}")
    checks.append(f"SBOM lists the input, {len(vendored)} vendored distributions and the {len(shipped)} shipped "
                  "libraries with their hashes")


def refuse_newer_glibc(elves: tuple[ElfInfo, ...], target: Target) -> None:
    """Refuse, before anything is written, any shipped ELF file that needs a newer glibc than the target has."""
    glibc = tuple(target.glibc)
    for elf in elves:
        newest = elf.newest("GLIBC")
        if newest is not None and newest > glibc:
            raise AuditError(f"audit failed: {elf.path} needs GLIBC_{format_version(newest)}, the target has glibc "
                             f"{format_version(glibc)}")


def _audit_runtime(elves: tuple[ElfInfo, ...], runtime: ElfInfo | None, recipe: Recipe, checks: list[str]) -> Target:
    """The target as the shipped ELF files see it: with the vendored libstdc++ when there is one."""
    target = recipe.target
    if runtime is None:
        return target
    provided = {f: runtime.newest_provided(f) for f in ("GLIBCXX", "CXXABI")}
    for elf in elves:
        if elf.path == runtime.path:
            continue
        for family, offer in provided.items():
            need = elf.newest(family)
            _expect(need is None or (offer is not None and need <= offer),
                    f"{elf.path} needs {family}_{format_version(need or ())}, the vendored libstdc++ provides only "
                    f"{family}_{format_version(offer or ())}")
    glibc = runtime.newest("GLIBC")
    _expect(glibc is None or glibc <= tuple(target.glibc),
            f"the vendored libstdc++ needs GLIBC_{format_version(glibc or ())}, the target has {format_version(target.glibc)}")
    checks.append(f"vendored libstdc++ provides GLIBCXX_{format_version(provided['GLIBCXX'] or ())} / "
                  f"CXXABI_{format_version(provided['CXXABI'] or ())}, covering every ELF file, and needs only "
                  f"GLIBC_{format_version(glibc or ())} (target: {format_version(target.glibc)})")
    return dataclasses.replace(
        target,
        glibcxx=max(tuple(target.glibcxx), provided["GLIBCXX"] or ()),
        cxxabi=max(tuple(target.cxxabi), provided["CXXABI"] or ()),
    )


def _audit_bootstrap(wheel, plan: BuildPlan, checks: list[str]) -> None:
    init = wheel.archive.member(f"{PACKAGE}/__init__.py")
    if wheel.archive.member(BOOTSTRAP_FILE) is None:
        return
    folder = BOOTSTRAP_MODULE.replace(".", "/") + "/"
    modules = [m for m in wheel.archive.members if m.name.startswith(folder) and m.name.endswith(".py")]
    _expect(init is not None, f"{PACKAGE}/__init__.py is missing")
    text = read_content(wheel.archive, init).decode("utf-8")
    _expect(text.count(BEGIN) == 1 and text.count(END) == 1, f"{PACKAGE}/__init__.py lacks exactly one bootstrap block")
    try:
        tree = ast.parse(text)
        for module in modules:
            ast.parse(read_content(wheel.archive, module).decode("utf-8"), module.name)
    except SyntaxError as exc:
        raise AuditError(f"audit failed: bootstrap code does not parse ({exc.filename}, {exc.msg}, line {exc.lineno})") from exc
    calls = [index for index, n in enumerate(tree.body) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
             and getattr(n.value.func, "id", "") == "_retf_bootstrap"]
    imports = [index for index, n in enumerate(tree.body) if isinstance(n, ast.Import)
               or (isinstance(n, ast.ImportFrom) and n.module != "__future__")]
    _expect(len(calls) == 1 and not any(index < calls[0] for index in imports),
            "the bootstrap does not run before the package's first import")
    after = tree.body[calls[0] + 1:]  # `del _retf_bootstrap`, the `try`, then the finishing blocks alone
    guard = after[1] if len(after) > 1 and isinstance(after[1], ast.Try) else None
    resumes = guard is not None and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == RESUME
                                        for n in ast.walk(ast.Module(body=guard.finalbody, type_ignores=[])))
    _expect(resumes and all(_is_finishing_block(n) for n in after[:1] + after[2:]),
            f"{PACKAGE}/__init__.py runs code outside the `try` that ends what the bootstrap began (the garbage "
            "collector's pause)")
    checks.append(f"bootstrap block runs before any other import in {PACKAGE}/__init__.py, which runs the rest in its `try`")


def _is_finishing_block(statement: ast.stmt) -> bool:
    """A statement of the injected blocks around the package's `try`: a _retf_ function's definition, call or del."""
    if isinstance(statement, ast.FunctionDef):
        return statement.name.startswith("_retf_")
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return getattr(statement.value.func, "id", "").startswith("_retf_")
    return isinstance(statement, ast.Delete) and all(getattr(t, "id", "").startswith("_retf_") for t in statement.targets)


def _audit_elves(elves: tuple[ElfInfo, ...], plan: BuildPlan, recipe: Recipe, target: Target, checks: list[str]) -> None:
    bundled = bundled_libraries(elves)
    for elf in elves:
        verdict = judge_elf(elf, target, bundled)
        _expect(verdict.fit is Fit.OK, f"{elf.path} {verdict.fit.value}: {'; '.join(verdict.reasons)}")
    arch = recipe.target.arch
    for policy in load_policies(arch):
        if set(policy.tags(arch)) & set(plan.platforms):
            problems = violations(policy, elves, bundled)
            _expect(not problems, f"platform tag {policy.name} is dishonest: {problems[0] if problems else ''}")
    checks.append(f"{len(elves)} ELF files load on {recipe.name} and fit the wheel's platform tag")


def _expect(condition: bool, failure: str) -> None:
    if not condition:
        raise AuditError(f"audit failed: {failure}")
