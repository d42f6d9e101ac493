"""Which manylinux policy an input's ELF files satisfy (the policies themselves: retfwheel.manylinux)."""

from __future__ import annotations

from retfwheel.manylinux import Policy, load_policies
from retfwheel.native.elf import ElfInfo, parse_symbol_version

# The dynamic loader itself is on every glibc system, though the policies do not list it.
_LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2"})


def violations(policy: Policy, elves: tuple[ElfInfo, ...], bundled: frozenset[str]) -> list[str]:
    """Why ``elves`` do not fit ``policy``; libraries in ``bundled`` ship inside the wheel."""
    problems = []
    for elf in elves:
        for lib in elf.needed:
            if lib not in bundled and lib not in policy.libraries and lib not in _LOADERS:
                problems.append(f"{elf.path} needs {lib}, which {policy.name} does not guarantee")
        for lib, versions in elf.version_needs.items():
            if lib in bundled:
                continue
            for text in versions:
                parsed = parse_symbol_version(text)
                if not parsed or parsed[0] not in policy.symbol_versions:
                    continue
                if text.split("_", 1)[1] not in policy.symbol_versions[parsed[0]]:
                    problems.append(f"{elf.path} needs {text} from {lib}, newer than {policy.name} allows")
    return problems


def lowest_policy(elves: tuple[ElfInfo, ...], bundled: frozenset[str], arch: str) -> Policy | None:
    """The most compatible manylinux policy all ``elves`` satisfy, or None (plain linux tag)."""
    for policy in load_policies(arch):
        if not violations(policy, elves, bundled):
            return policy
    return None
