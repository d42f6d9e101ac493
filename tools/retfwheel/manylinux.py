"""manylinux platform policies, read from auditwheel's own policy data and checked on load, and the platform tags a
target's pip accepts."""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass


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


def installable_platforms(glibc: tuple[int, ...], arch: str) -> tuple[str, ...]:
    """Platform tags a pip on a machine with ``glibc`` accepts, best first."""
    tags: list[str] = []
    for policy in reversed(load_policies(arch)):
        if policy.glibc <= tuple(glibc[:2]):
            tags.extend(policy.tags(arch))
    tags.append(f"linux_{arch}")
    return tuple(tags)
