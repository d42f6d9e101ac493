"""What the produced wheel may share with the target environment (pure): one range per vendored
distribution, the versions the input works with.

A range starts as the specifiers that the input's Requires-Dist and every other vendored
distribution put on that distribution (markers judged for the target). TensorFlow 2.4-2.6 pin
with `~=`, tighter than they need; TensorFlow 2.7 relaxed those pins to lower bounds
(tensorflow/tensorflow#44654), and Spack and nixpkgs package TensorFlow with the same relaxations.
retfwheel.targets.corrections replaces an input's exact pin by a wider range (or, where the pin admits
versions that break the input, a narrower one), each with its reason; each is proven by running the input against
the environment's version (tests/test_sharing.py, and `verify`'s import checks). The bootstrap then
lets the environment's copy serve wherever it lies in the range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from retfwheel.targets.corrections import Correction, correction_for
from retfwheel.targets.recipe import Target

# Vendored distributions never served privately: the input does not need them at run time, and
# every environment has its own.
NOT_SERVED: dict[str, str] = {
    "setuptools": "packaging tooling; pkg_resources is only read by tensorboard's plugin loader, and the "
                  "environment's own serves it",
    "wheel": "packaging tooling, not imported at run time",
}


# Privately served modules whose code runs on first use of one of their attributes, not on import:
# TensorFlow imports them while `import tensorflow` runs but a training script rarely touches them.
LAZY: dict[str, str] = {
    "requests": "TensorFlow's Keras callbacks import it at start-up for RemoteMonitor alone; with urllib3, "
                "idna, charset-normalizer and certifi it is about 110 modules every script would load",
}


# pip before 20.0 takes any folder of the wheel, at any depth, named *.dist-info whose name starts with the
# project's own (tensorflow_estimator-2.6.0.dist-info for tensorflow) for the wheel's metadata and stops
# with "Multiple .dist-info directories"; the vendored distributions' metadata folders end otherwise.
PRIVATE_METADATA_SUFFIX = ".dist-info.vendored"


def metadata_folder(name: str, version: str) -> str:
    """The folder a vendored distribution's .dist-info is shipped as, in the private folder."""
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}{PRIVATE_METADATA_SUFFIX}"


API_REQUIRER = "tensorflow.contrib"  # the 1.x API mode's parts built on other distributions (tf_slim)


@dataclass(frozen=True)
class Dependency:
    """A vendored distribution as the build read it."""

    name: str
    version: str
    requires_dist: tuple[str, ...]
    modules: tuple[str, ...]  # top-level modules, and portions of namespace packages ("google.protobuf")


@dataclass(frozen=True)
class Share:
    """How one vendored distribution is served: the environment's copy within ``range``, else the private one."""

    name: str
    version: str  # the private copy's
    range: str  # PEP 440 specifiers, "" for any version
    modules: tuple[str, ...]
    requested_by: tuple[str, ...]
    correction: Correction | None = None
    not_served: str = ""  # why it is never served privately, if so
    private_name: bool = False  # shipped under a private name ([deps] private_names): TensorFlow's own, never routed

    def config(self) -> dict:
        """The bootstrap's view of it."""
        return {"name": self.name, "version": self.version, "range": self.range, "modules": list(self.modules),
                "metadata": metadata_folder(self.name, self.version)}


def sharing_table(input_name: str, input_requires: tuple[str, ...], dependencies: list[Dependency],
                  target: Target, api_requires: tuple[str, ...] = ()) -> tuple[Share, ...]:
    """One Share per vendored distribution, sorted by name (``api_requires``: what the API mode adds)."""
    environment = _marker_environment(target)
    wanted: dict[str, list[tuple[str, SpecifierSet]]] = {}
    corrected: dict[str, Correction] = {}
    requirers = [(input_name, input_requires), (API_REQUIRER, api_requires)]
    for requirer, requires in requirers + [(d.name, d.requires_dist) for d in dependencies]:
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({**environment, "extra": ""}):
                continue
            name = str(canonicalize_name(requirement.name))
            specifier = requirement.specifier
            correction = correction_for(name, specifier) if requirer == input_name else None
            if correction is not None:
                corrected[name] = correction
                specifier = SpecifierSet(correction.range)
            wanted.setdefault(name, []).append((requirer, specifier))
    shares = []
    for dependency in sorted(dependencies, key=lambda d: canonicalize_name(d.name)):
        name = str(canonicalize_name(dependency.name))
        asks = wanted.get(name, [])
        combined = SpecifierSet()
        for _requirer, specifier in asks:
            combined &= specifier
        shares.append(Share(dependency.name, dependency.version, _simplified(combined),
                            dependency.modules, tuple(sorted({r for r, _ in asks})), corrected.get(name),
                            NOT_SERVED.get(name, "")))
    return tuple(shares)


def _simplified(specifiers: SpecifierSet) -> str:
    """The same set, written with the tightest bound of each kind (">=1.16" rather than ">=1.7,>=1.16")."""
    tightest: dict[str, Specifier] = {}
    rest: set[str] = set()
    for specifier in specifiers:
        pick = {">=": max, ">": max, "<=": min, "<": min}.get(specifier.operator)
        if pick is None:
            rest.add(str(specifier))
            continue
        held = tightest.get(specifier.operator)
        tightest[specifier.operator] = specifier if held is None else pick(held, specifier, key=lambda s: Version(s.version))
    return ",".join(sorted(rest | {str(s) for s in tightest.values()}))


def _marker_environment(target: Target) -> dict[str, str]:
    major, minor = target.python[:2]
    environment: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    environment.update(python_version=f"{major}.{minor}", python_full_version=f"{major}.{minor}.0",
                       implementation_name="cpython", platform_python_implementation="CPython",
                       sys_platform="linux", os_name="posix", platform_system="Linux", platform_machine=target.arch)
    return environment


_MODULE_FILE = re.compile(r"(\.cpython-[^./]+)?\.(py|so)$")


def importable_names(files: list[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """Top-level modules (and portions of namespace packages) among vendored ``(path, version)`` files.

    A folder without __init__.py is a namespace (like google/): its sub-packages are named instead.
    """
    packages = {path.split("/", 1)[0] for path, _ in files if path.count("/") == 1 and path.endswith("/__init__.py")}
    modules: dict[str, str] = {}
    namespaces: set[str] = set()
    for path, version in files:
        top, _, rest = path.partition("/")
        if not rest:
            module = _MODULE_FILE.sub("", top)
            if module != top and module.isidentifier():
                modules.setdefault(module, version)
        elif top in packages:
            modules.setdefault(top, version)
        elif top.isidentifier() and not top.endswith(("dist-info", "data")):
            namespaces.add(top)
            second = _MODULE_FILE.sub("", rest.partition("/")[0])
            if second.isidentifier():
                modules.setdefault(f"{top}.{second}", version)
    return modules, sorted(namespaces)
