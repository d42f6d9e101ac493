"""`retfwheel inspect`: what a TensorFlow wheel needs from the machine it will run on."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from retfwheel.errors import TargetMismatchError
from retfwheel.manylinux import Policy
from retfwheel.native.elf import ElfInfo, majority_abi
from retfwheel.native.policy import lowest_policy
from retfwheel.native.scan import is_framework_library, scan_wheel
from retfwheel.native.verdict import Verdict, bundled_libraries, judge_elf
from retfwheel.targets.corrections import CORRECTIONS
from retfwheel.targets.recipe import Recipe
from retfwheel.wheelfile.archive import read_content
from retfwheel.wheelfile.injection import injected_config
from retfwheel.wheelfile.wheel import WheelInfo, read_wheel

JSON_VERSION = 1
_VERSION_H = "tensorflow/include/tensorflow/core/public/version.h"


@dataclass(frozen=True)
class Inspection:
    wheel: WheelInfo
    elves: tuple[ElfInfo, ...]
    tensorflow_version: str | None
    # (cxx11, old): the framework library's own tensorflow:: symbols naming each std::string ABI
    string_abi_symbols: tuple[int, int] | None
    policy: Policy | None  # most compatible manylinux policy the ELF files satisfy
    verdicts: tuple[Verdict, ...] | None  # per ELF, against the recipe's target
    processed: dict | None  # provenance of an earlier retfwheel run, if any
    sbom: tuple[dict, ...] = ()  # a produced wheel's SBOM components: role, name, version, sha256
    package_init: bytes | None = None  # tensorflow/__init__.py, which a build patches

    @property
    def cxx11_abi(self) -> int | None:
        """The _GLIBCXX_USE_CXX11_ABI the framework library was built with (its symbols' majority); None on a tie."""
        decided = majority_abi(*self.string_abi_symbols) if self.string_abi_symbols else None
        return None if decided is None else int(decided)

    @property
    def private_dependencies(self) -> tuple[dict, ...]:
        """A produced wheel's vendored distributions as its bootstrap routes them (name, version, range, modules)."""
        config = injected_config(self.package_init) if self.package_init else None
        return tuple((config or {}).get("distributions", ()))


def inspect_wheel(path: Path, recipe: Recipe | None = None, *, verify: bool = False) -> Inspection:
    """Analyse a wheel (reading only what ELF analysis needs unless ``verify``)."""
    wheel = read_wheel(path)
    scan = scan_wheel(wheel, verify=verify)
    return analyse(wheel, scan.elves, recipe)


def analyse(wheel: WheelInfo, elves: tuple[ElfInfo, ...], recipe: Recipe | None) -> Inspection:
    """Combine a wheel's metadata and ELF analyses into an Inspection (pure)."""
    bundled = bundled_libraries(elves)
    arch = recipe.target.arch if recipe else "x86_64"
    verdicts = tuple(judge_elf(e, recipe.target, bundled) for e in elves) if recipe else None
    return Inspection(
        wheel=wheel,
        elves=elves,
        tensorflow_version=tensorflow_version(wheel),
        string_abi_symbols=_string_abi_symbols(elves),
        policy=lowest_policy(elves, bundled, arch),
        verdicts=verdicts,
        processed=_provenance(wheel),
        sbom=_sbom(wheel),
        package_init=read_content(wheel.archive, init) if (init := wheel.archive.member("tensorflow/__init__.py")) else None,
    )


def tensorflow_version(wheel: WheelInfo) -> str | None:
    """The TensorFlow version compiled into the wheel's headers, or None if it is not TensorFlow."""
    if wheel.archive.member("tensorflow/__init__.py") is None:
        return None
    member = wheel.archive.member(_VERSION_H)
    if member is None:
        return str(wheel.version)
    text = read_content(wheel.archive, member).decode("utf-8", "replace")
    parts = [re.search(rf"#define TF_{p}_VERSION (\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        return str(wheel.version)
    suffix = re.search(r'#define TF_VERSION_SUFFIX "([^"]*)"', text)
    return ".".join(m.group(1) for m in parts if m) + (suffix.group(1) if suffix else "")


def require_tensorflow(inspection: Inspection) -> str:
    if inspection.tensorflow_version is None:
        raise TargetMismatchError(
            f"{inspection.wheel.path}: not a TensorFlow wheel (no tensorflow/__init__.py)",
            hint="retfwheel rebuilds TensorFlow 2.x wheels such as tensorflow-cpu==2.6.2",
        )
    return inspection.tensorflow_version


def _string_abi_symbols(elves: tuple[ElfInfo, ...]) -> tuple[int, int] | None:
    for elf in elves:
        if is_framework_library(elf.path) and elf.string_abi_symbols is not None:
            return elf.string_abi_symbols
    return None


def _sbom(wheel: WheelInfo) -> tuple[dict, ...]:
    """The components of the SBOM retfwheel put in ``wheel`` (.dist-info/sboms/retfwheel.cdx.json), if any."""
    member = wheel.archive.member(f"{wheel.dist_info}/sboms/retfwheel.cdx.json")
    if member is None:
        return ()
    try:
        components = json.loads(read_content(wheel.archive, member))["components"]
        return tuple({"role": next((p["value"] for p in c.get("properties", []) if p["name"] == "retfwheel:role"), ""),
                      "name": c["name"], "version": c["version"], "sha256": c["hashes"][0]["content"]}
                     for c in components)
    except (ValueError, KeyError, IndexError, TypeError):
        return ({"role": "unreadable", "name": "", "version": "", "sha256": ""},)


def _provenance(wheel: WheelInfo) -> dict | None:
    if wheel.provenance is None:
        return None
    try:
        value = json.loads(wheel.provenance)
    except ValueError:
        return {"unreadable": True}
    return value if isinstance(value, dict) else {"unreadable": True}


def correction_reason(name: str, range_: str) -> str | None:
    """Why retfwheel's sharing table set this range, if it did."""
    wanted = SpecifierSet(range_)
    for correction in CORRECTIONS:
        if canonicalize_name(name) == correction.name and SpecifierSet(correction.range) & wanted == wanted:
            return f"the input's {correction.pinned} taken as {correction.range}: {correction.reason}"
    return None


def environment_sharing(inspection: Inspection, environment: dict[str, str]) -> list[dict]:
    """Per private dependency: the environment's version (or None) and whether it serves (is in range)."""
    result = []
    for dep in inspection.private_dependencies:
        theirs = environment.get(str(canonicalize_name(dep["name"])))
        serves = theirs is not None and SpecifierSet(dep["range"]).contains(theirs, installed=True)
        result.append({"name": dep["name"], "environment": theirs, "serves": serves})
    return result


def inspection_json(inspection: Inspection, environment: dict[str, str] | None = None,
                    tf1_libraries: dict[str, tuple[str, ...]] | None = None) -> dict:
    """The machine-readable form of an Inspection (``--json``); ``environment``: a recipe's installed versions;
    ``tf1_libraries``: its distributions' libraries built for TF 1.x."""
    wheel = inspection.wheel
    verdicts = {v.path: v for v in inspection.verdicts or ()}
    return {
        "version": JSON_VERSION,
        "wheel": {
            "path": str(wheel.path),
            "name": str(wheel.name),
            "version": str(wheel.version),
            "tags": sorted(str(t) for t in wheel.tags),
            "python": sorted({t.interpreter for t in wheel.tags}),
            "abi": sorted({t.abi for t in wheel.tags}),
            "requires_dist": list(wheel.requires_dist),
            "members": len(wheel.archive.members),
        },
        "tensorflow_version": inspection.tensorflow_version,
        "cxx11_abi": inspection.cxx11_abi,
        "cxx11_abi_symbols": dict(zip(("cxx11", "old"), inspection.string_abi_symbols))
        if inspection.string_abi_symbols else None,
        "manylinux": [inspection.policy.name, *inspection.policy.aliases] if inspection.policy else None,
        "processed_by_retfwheel": inspection.processed,
        "sbom": list(inspection.sbom),
        "environment_tf1_libraries": None if tf1_libraries is None else {k: list(v) for k, v in tf1_libraries.items()},
        "private_dependencies": [
            dict(d, correction=correction_reason(d["name"], d["range"]), **({"environment": s["environment"], "serves": s["serves"]}
                                                                            if environment is not None else {}))
            for d, s in zip(inspection.private_dependencies,
                            environment_sharing(inspection, environment or {}))],
        "elf": [
            {
                "path": e.path,
                "needed": list(e.needed),
                "rpath": list(e.rpath),
                "runpath": list(e.runpath),
                "newest": e.newest_by_family(),
                **(
                    {"verdict": verdicts[e.path].fit.name.lower(), "reasons": list(verdicts[e.path].reasons)}
                    if e.path in verdicts
                    else {}
                ),
            }
            for e in inspection.elves
        ],
    }
