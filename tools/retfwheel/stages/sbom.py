"""The produced wheel's software bill of materials (pure): CycloneDX 1.5 JSON in .dist-info/sboms/ (PEP 770).

It names what the wheel is made of and where each part came from: the input wheel, the vendored
libstdc++ (a Debian package, or this machine's toolchain), every vendored Python distribution (its
locked file; sdists marked as built here) and the retf op library (its sources, compiler and flags).
Deterministic: the serial number is derived from the parts, and there is no timestamp. The audit
reads it back and checks it against the members the wheel ships (`check_sbom`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from urllib.parse import quote

from packaging.utils import canonicalize_name

SBOM_NAME = "sboms/retfwheel.cdx.json"  # under the output's .dist-info
ROLE = "retfwheel:role"


@dataclass(frozen=True)
class Part:
    """One component of the wheel: what it is, its hashes and where it came from."""

    role: str  # "input", "libstdc++", "vendored", "op-library"
    name: str
    version: str
    sha256: str  # of the file it came as: the input wheel, the locked file, the shipped library
    purl: str = ""
    shipped: str = ""  # the member it ships as, where one member is it ("" for the input and distributions)
    properties: tuple[tuple[str, str], ...] = ()


def pypi_purl(name: str, version: str) -> str:
    return f"pkg:pypi/{canonicalize_name(name)}@{quote(version, safe='')}"


def make_sbom(name: str, version: str, tool_version: str, parts: tuple[Part, ...]) -> bytes:
    """The SBOM document of the wheel ``name`` ``version``."""
    components = [_component(part) for part in parts]
    serial = uuid.uuid5(uuid.NAMESPACE_URL, "retfwheel:" + json.dumps([name, version, components], sort_keys=True))
    document = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "retfwheel", "version": tool_version}]},
            "component": {"type": "library", "bom-ref": "wheel", "name": name, "version": version,
                          "purl": pypi_purl(name, version)},
        },
        "components": components,
        "dependencies": [{"ref": "wheel", "dependsOn": [c["bom-ref"] for c in components]}],
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def _component(part: Part) -> dict:
    properties = [{"name": ROLE, "value": part.role}]
    if part.shipped:
        properties.append({"name": "retfwheel:shipped-as", "value": part.shipped})
    properties += [{"name": key, "value": value} for key, value in part.properties]
    component = {"type": "library", "bom-ref": f"{part.role}:{part.name}", "name": part.name, "version": part.version,
                 "hashes": [{"alg": "SHA-256", "content": part.sha256}], "properties": properties}
    if part.purl:
        component["purl"] = part.purl
    return component


def read_sbom(data: bytes) -> list[dict]:
    """The components of an SBOM this module wrote; ValueError if it is not one."""
    document = json.loads(data)
    if document.get("bomFormat") != "CycloneDX" or not isinstance(document.get("components"), list):
        raise ValueError("not a CycloneDX document")
    return document["components"]


def role(component: dict) -> str:
    return next((p["value"] for p in component.get("properties", []) if p.get("name") == ROLE), "")


def check_sbom(components: list[dict], shipped: dict[str, bytes], vendored: set[tuple[str, str]]) -> list[str]:
    """Differences between the SBOM's components and what the wheel ships (``shipped``: member -> bytes of each
    part shipped as one member; ``vendored``: (canonical name, version) of each vendored .dist-info)."""
    problems = []
    listed = set()
    for component in components:
        shipped_as = next((p["value"] for p in component.get("properties", []) if p["name"] == "retfwheel:shipped-as"), "")
        digest = component["hashes"][0]["content"]
        if shipped_as:
            if shipped_as not in shipped:
                problems.append(f"{component['name']}: listed as {shipped_as}, which the wheel does not ship")
            elif hashlib.sha256(shipped[shipped_as]).hexdigest() != digest:
                problems.append(f"{component['name']}: sha256 differs from the shipped {shipped_as}")
        if role(component) == "vendored":
            listed.add((str(canonicalize_name(component["name"])), component["version"]))
    missing = [m for m in shipped if not any(p["value"] == m for c in components for p in c.get("properties", []))]
    problems += [f"{member} is shipped but not in the SBOM" for member in missing]
    if listed != vendored:
        problems.append(f"vendored distributions differ: SBOM only {sorted(listed - vendored)}, "
                        f"wheel only {sorted(vendored - listed)}")
    return problems
