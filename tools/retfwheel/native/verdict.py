"""Whether each ELF file of a wheel can load on a recipe's target, and why not."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from retfwheel.native.elf import ElfInfo, format_version
from retfwheel.targets.recipe import Target


class Fit(enum.Enum):
    OK = "fine as is"
    NEEDS_LIBSTDCXX = "needs the vendored libstdc++"
    CANNOT_RUN = "cannot run there"


@dataclass(frozen=True)
class Verdict:
    path: str
    fit: Fit
    reasons: tuple[str, ...]


def judge_elf(elf: ElfInfo, target: Target, bundled: frozenset[str] = frozenset()) -> Verdict:
    """Compare what ``elf`` needs with what ``target`` provides (``bundled`` libraries ship in the wheel)."""
    blocking: list[str] = []
    runtime: list[str] = []
    from_system = {lib: v for lib, v in elf.version_needs.items() if lib not in bundled}
    view = ElfInfo(elf.path, elf.elf_class, elf.machine, elf.soname, elf.needed, elf.rpath, elf.runpath, from_system)
    limits = (
        ("GLIBC", target.glibc, blocking, "glibc"),
        ("GCC", target.gcc, blocking, "libgcc_s"),
        ("GLIBCXX", target.glibcxx, runtime, "libstdc++"),
        ("CXXABI", target.cxxabi, runtime, "libstdc++"),
    )
    for family, provided, sink, library in limits:
        needed = view.newest(family)
        if needed is not None and needed > tuple(provided):
            sink.append(f"needs {family}_{format_version(needed)}, the target's {library} has {family}_{format_version(provided)}")
    if _machine_mismatch(elf, target):
        blocking.append(f"built for {elf.machine}, the target is {target.arch}")
    if blocking:
        return Verdict(elf.path, Fit.CANNOT_RUN, tuple(blocking + runtime))
    if runtime:
        return Verdict(elf.path, Fit.NEEDS_LIBSTDCXX, tuple(runtime))
    return Verdict(elf.path, Fit.OK, ())


_MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}


def _machine_mismatch(elf: ElfInfo, target: Target) -> bool:
    return _MACHINES.get(target.arch) not in (None, elf.machine)


def bundled_libraries(elves: tuple[ElfInfo, ...]) -> frozenset[str]:
    """Names under which the wheel's own libraries satisfy DT_NEEDED entries."""
    names = {e.path.rsplit("/", 1)[-1] for e in elves}
    names.update(e.soname for e in elves if e.soname)
    return frozenset(names)
