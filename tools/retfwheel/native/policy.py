"""manylinux platform policies, read from auditwheel's own policy data and checked on load."""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass

from retfwheel.native.elf import ElfInfo, parse_symbol_version

# The dynamic loader itself is on every glibc system, though the policies do not list it.
_LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2"})


@dataclass(frozen=True)
class Policy:
    name: str  # "manylinux_2_12"
    aliases: tuple[str, ...]  # ("manylinux2010",)
    priority: int
    glibc: tuple[int, int]
    symbol_versions: dict[str, frozenset[str]]  # family -> allowed version numbers
    libraries: frozenset[str]  # sonames the platform guarantees

    def tags(self, arch: str) -> tuple[str, ...]:
        """Platform tags, PEP 600 name first, then the legacy alias old pips understand."""
        return tuple(f"{n}_{arch}" for n in (self.name, *self.aliases))


@functools.lru_cache(maxsize=None)
def load_policies(arch: str) -> tuple[Policy, ...]:
    """manylinux policies for ``arch``, most compatible (oldest glibc) first."""
    text = (importlib.resources.files("auditwheel") / "policy" / "manylinux-policy.json").read_text()
    policies = []
    for raw in json.loads(text):
        if raw["name"] == "linux" or arch not in raw["symbol_versions"]:
            continue
        major, minor = raw["name"].split("_")[1:3]
        policies.append(
            Policy(
                name=raw["name"],
                aliases=tuple(raw.get("aliases", ())),
                priority=int(raw["priority"]),
                glibc=(int(major), int(minor)),
                symbol_versions={k: frozenset(v) for k, v in raw["symbol_versions"][arch].items()},
                libraries=frozenset(raw["lib_whitelist"]),
            )
        )
    if not policies:
        raise RuntimeError(f"auditwheel's policy data has no manylinux policy for {arch}")
    return tuple(sorted(policies, key=lambda p: -p.priority))


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


def installable_platforms(glibc: tuple[int, ...], arch: str) -> tuple[str, ...]:
    """Platform tags a pip on a machine with ``glibc`` accepts, best first."""
    tags: list[str] = []
    for policy in reversed(load_policies(arch)):
        if policy.glibc <= tuple(glibc[:2]):
            tags.extend(policy.tags(arch))
    tags.append(f"linux_{arch}")
    return tuple(tags)
