"""Recipes: one TOML file in recipes/ per target environment, read then validated.

Validation collects every problem before failing, each naming the file, the key and, for a
misspelt key, the likely intended one.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from retfwheel.errors import RecipeError
from retfwheel.features import BY_KEY, DEFAULTS, FEATURES, Feature

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_VERSION_TEXT = re.compile(r"^\d+(\.\d+)*$")
_LOCAL_LABEL = re.compile(r"^[a-z0-9]+([._][a-z0-9]+)*$", re.IGNORECASE)
_DIST_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_PLATFORM_TAG = re.compile(r"^[a-z0-9_]+$")
ARCHES = ("x86_64", "aarch64")


@dataclass(frozen=True)
class Target:
    """The machine a produced wheel must run on."""

    python: tuple[int, int]
    implementation: str
    abi: str
    arch: str
    glibc: tuple[int, ...]
    glibcxx: tuple[int, ...]  # newest GLIBCXX_ the target's own libstdc++.so.6 defines
    cxxabi: tuple[int, ...]
    gcc: tuple[int, ...]  # newest GCC_ the target's libgcc_s.so.1 defines

    @property
    def python_tag(self) -> str:
        return f"{self.implementation}{self.python[0]}{self.python[1]}"


@dataclass(frozen=True)
class OutputSpec:
    name: str
    local_version: str
    platform: str  # "auto": lowest manylinux tag the audit allows; else an explicit tag
    extra_platform_tags: tuple[str, ...]


@dataclass(frozen=True)
class RuntimeSpec:
    """Where the vendored libstdc++.so.6 comes from ([libstdcxx])."""

    source: str  # "none", "toolchain", "file" or "debian"
    vendor: str  # "auto": only when an ELF needs more than the target has; "always"
    compiler: str = "g++"
    path: Path | None = None
    package: str = "libstdc++6"
    version: str = ""
    suite: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class DepsSpec:
    """Vendoring of the input's Python requirements ([deps])."""

    vendor: bool
    lock: Path | None  # a fixed lock file ([deps] lock); None: one per input (retfwheel.targets.lock.lock_candidates)
    leave: tuple[str, ...] = ()  # requirement names left to the target environment
    scripts: dict[str, str] | None = None  # vendored console script -> name it is published under
    environment_scripts: tuple[str, ...] = ()  # scripts owned by the target environment's packages
    # distributions whose modules ship under private names (tensorflow._vendor.<module>), imports of them
    # rewritten, so the environment's own copies keep the public names in the same process
    private_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpsSpec:
    """The retf op library ([ops])."""

    build: bool
    builder: str  # "host": this machine's compiler; "debian-root": g++ in a debootstrapped Debian root
    compiler: str = "g++"
    suite: str = "bullseye"


DEFAULT_ENVIRONMENT_PIP = "19.0.3"  # the oldest pip that installs TF 1.15.5 (manylinux2010) from PyPI


@dataclass(frozen=True)
class EnvironmentSpec:
    """The old user environment a produced wheel is verified in ([environment])."""

    packages: tuple[str, ...]  # pip requirements of the environment, e.g. ("tensorflow==1.15.5",)
    system_libstdcxx: RuntimeSpec | None  # the target system's own (old) libstdc++, a pinned Debian package
    docker: str | None  # docker/<name>/ image that reproduces the environment
    # Installed after `packages`, over their pins: what users of the produced wheel had to change (the fix a
    # refusal of the wheel names, e.g. a newer numpy), so the environment is theirs after that change.
    upgrades: tuple[str, ...] = ()
    # The user's pip: the environment ends with it, and the wheel is installed with it. TF 1.15.5's wheels are
    # manylinux2010, so whoever installed it from PyPI has pip 19.0 or newer.
    pip: str = DEFAULT_ENVIRONMENT_PIP


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    sha256: str
    description: str
    target: Target
    input_requirement: Requirement | None
    output: OutputSpec
    runtime: RuntimeSpec = RuntimeSpec("none", "auto")
    deps: DepsSpec | None = None
    conflicts: str = "error"  # [bootstrap] conflicts: a vendored module already imported elsewhere
    environment: EnvironmentSpec | None = None
    ops: OpsSpec = OpsSpec(False, "host")
    api: str = "v2"  # "v1": `import tensorflow` gives the TF 1.x API with 1.x behaviour
    # the switches ([features]), every row of retfwheel.features.FEATURES with its value as the settings spell it
    features: tuple[tuple[str, str], ...] = DEFAULTS
    deprecations: tuple[str, ...] = ()  # one line per deprecated spelling the file uses, for the CLI to show
    runtime_env: dict[str, str] | None = None  # environment defaults the bootstrap sets before TF loads

    @property
    def api_requirements(self) -> tuple[str, ...]:
        """What the produced wheel's API mode needs beyond the input's own requirements."""
        return API_REQUIREMENTS.get(self.api, ())

    def feature(self, key: str) -> str:
        """The value of switch ``key`` (a row of retfwheel.features.FEATURES)."""
        return dict(self.features)[key]


# The 1.x API's tf.contrib.layers, .framework and .slim are tf_slim, the maintained port of TF 1.15's
# contrib layers (same variable names, collections and semantics); 1.1 is its release for TF 2.x.
API_REQUIREMENTS: dict[str, tuple[str, ...]] = {"v1": ("tf-slim~=1.1.0",)}


BUILTIN_RECIPES = "retfwheel.recipes"  # recipes/ of this repository, shipped inside the tool with their locks


def builtin_recipes() -> list[Path]:
    """The recipes that ship with the tool, by name."""
    import importlib.resources

    folder = Path(str(importlib.resources.files(BUILTIN_RECIPES)))
    return sorted(folder.glob("*.toml"), key=lambda path: path.stem)


def is_builtin(recipe: Recipe) -> bool:
    """Whether ``recipe`` is one that ships with the tool (its folder is the installed package, not the user's)."""
    return any(recipe.path.resolve() == path.resolve() for path in builtin_recipes())


def find_recipe(value: str | Path) -> Path:
    """The recipe file ``value`` names: a path, or the name of a built-in recipe (``emulated-py36``)."""
    path = Path(value)
    if path.is_file() or path.suffix == ".toml" or len(path.parts) > 1:
        return path  # a path: load_recipe says if it is missing
    builtin = {recipe.stem: recipe for recipe in builtin_recipes()}
    if str(value) in builtin:
        return builtin[str(value)]
    close = difflib.get_close_matches(str(value), builtin, n=1)
    raise RecipeError([f"{value}: no such recipe file, and no built-in recipe of that name"],
                      hint=(f"did you mean {close[0]}? " if close else "")
                      + f"built-in recipes: {', '.join(builtin) or 'none'} (`retfwheel recipes`); or give a path to a .toml file")


def load_recipe(path: Path) -> Recipe:
    """Read and validate ``path``; raises RecipeError listing every problem."""
    data, raw = read_recipe_file(Path(path))
    return validate_recipe(data, Path(path), hashlib.sha256(raw).hexdigest())


def read_recipe_file(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RecipeError([f"{path}: no such recipe"], hint=_available_hint(path)) from None
    except OSError as exc:
        raise RecipeError([f"{path}: cannot read ({exc.strerror or exc})"]) from exc
    try:
        return tomllib.loads(raw.decode("utf-8")), raw
    except UnicodeDecodeError as exc:
        raise RecipeError([f"{path}: not UTF-8 text"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError([f"{path}: not valid TOML ({exc})"]) from exc


def _available_hint(path: Path) -> str:
    folder = path.parent if str(path.parent) not in ("", ".") else Path("recipes")
    names = sorted(p.name for p in folder.glob("*.toml")) if folder.is_dir() else []
    return f"recipes in {folder}: {', '.join(names)}" if names else "pass a recipe file, e.g. recipes/emulated-py36.toml"


class _Checker:
    """Collects problems while reading typed values out of one recipe table."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{self.path}: {where} {message}")

    def table(self, data: dict, section: str, known: tuple[str, ...], required: bool = True) -> dict:
        value = data.get(section)
        if value is None:
            if required:
                self.problem(f"[{section}]", "section is missing")
            return {}
        if not isinstance(value, dict):
            self.problem(f"[{section}]", "must be a table")
            return {}
        self.unknown(value, known, f"[{section}]")
        return value

    def unknown(self, table: dict, known: tuple[str, ...], where: str) -> None:
        for key in table:
            if key in known:
                continue
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            suggestion = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(known)})"
            self.problem(where, f"unknown key '{key}'{suggestion}")

    def get(self, table: dict, section: str, key: str, check: Callable[[Any], Any], default: Any = ..., expect: str = "") -> Any:
        if key not in table:
            if default is ...:
                self.problem(f"[{section}]", f"missing key '{key}'{f' ({expect})' if expect else ''}")
                return None
            return default
        try:
            return check(table[key])
        except (TypeError, ValueError) as exc:
            self.problem(f"[{section}] {key} =", f"{table[key]!r}: {exc}")
            return None


def _version(value: Any) -> tuple[int, ...]:
    if not isinstance(value, str) or not _VERSION_TEXT.match(value):
        raise ValueError("expected a version string like \"2.27\"")
    return tuple(int(p) for p in value.split("."))


def _glibc(value: Any) -> tuple[int, ...]:
    if value == "host":
        return host_glibc()
    return _version(value)


def host_glibc() -> tuple[int, ...]:
    """This machine's glibc version (for recipes that target the machine itself)."""
    text = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    if not text or not text.startswith("glibc "):
        raise ValueError("'host' needs a glibc-based machine")
    return _version(text.split()[1])


def _python(value: Any) -> tuple[int, int]:
    parts = _version(value)
    if len(parts) != 2 or parts[0] != 3:
        raise ValueError("expected a Python 3 version like \"3.6\"")
    return parts[0], parts[1]


def _string(pattern: re.Pattern | None, expect: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or (pattern and not pattern.match(value)):
            raise ValueError(f"expected {expect}")
        return value

    return check


def _requirement(value: Any) -> Requirement:
    if not isinstance(value, str):
        raise ValueError("expected a requirement like \"tensorflow-cpu==2.6.2\"")
    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"not a valid requirement ({exc})") from None
    if len(req.specifier) != 1 or next(iter(req.specifier)).operator != "==":
        raise ValueError("pin one exact version with '==' so builds are reproducible")
    return req


def _tag_list(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and _PLATFORM_TAG.match(v) for v in value):
        raise ValueError("expected a list of platform tags like [\"linux_x86_64\"]")
    return tuple(value)


# Every key a recipe may hold, by table ("": the top level): the validator refuses any other, and
# tests/test_reference.py checks that docs/recipes.md shows each.
KEYS: dict[str, tuple[str, ...]] = {
    "": ("description", "api", "runtime_env", "target", "input", "output", "libstdcxx", "deps", "bootstrap", "ops",
         "features", "environment"),
    "target": ("python", "implementation", "abi", "arch", "glibc", "glibcxx", "cxxabi", "gcc"),
    "input": ("requirement",),
    "output": ("name", "local_version", "platform", "extra_platform_tags"),
    "libstdcxx": ("source", "vendor", "compiler", "path", "package", "version", "suite", "sha256"),
    "deps": ("vendor", "lock", "leave", "scripts", "environment_scripts", "private_names"),
    "bootstrap": ("conflicts",),
    "ops": ("build", "builder", "compiler", "suite"),
    "features": tuple(BY_KEY),
    "environment": ("packages", "upgrades", "system_libstdcxx", "docker", "pip"),
    "environment.system_libstdcxx": ("package", "version", "suite", "sha256"),
}


def validate_recipe(data: dict[str, Any], path: Path, sha256: str) -> Recipe:
    """Turn parsed TOML into a Recipe, or raise RecipeError with every problem found."""
    c = _Checker(path)
    c.unknown(data, KEYS[""] + tuple(f.old_key for f in FEATURES), "top level:")
    t = c.table(data, "target", KEYS["target"])
    python = c.get(t, "target", "python", _python, expect='e.g. "3.6"')
    implementation = c.get(t, "target", "implementation", _string(re.compile(r"^cp$"), '"cp" (CPython)'), "cp")
    default_abi = f"cp{python[0]}{python[1]}{'m' if python < (3, 8) else ''}" if python else None
    abi = c.get(t, "target", "abi", _string(re.compile(r"^[a-z0-9_]+$"), "an ABI tag like \"cp36m\""), default_abi)
    arch = c.get(t, "target", "arch", _string(re.compile("^(" + "|".join(ARCHES) + ")$"), f"one of {', '.join(ARCHES)}"), "x86_64")
    glibc = c.get(t, "target", "glibc", _glibc, expect='e.g. "2.27", or "host" for this machine')
    glibcxx = c.get(t, "target", "glibcxx", _version, expect="newest GLIBCXX_ version of the target's libstdc++, e.g. \"3.4.25\"")
    cxxabi = c.get(t, "target", "cxxabi", _version, expect="newest CXXABI_ version, e.g. \"1.3.11\"")
    gcc = c.get(t, "target", "gcc", _version, expect="newest GCC_ version of libgcc_s, e.g. \"7.0.0\"")

    i = c.table(data, "input", KEYS["input"], required=False)
    requirement = c.get(i, "input", "requirement", _requirement, None)

    o = c.table(data, "output", KEYS["output"])
    name = c.get(o, "output", "name", _string(_DIST_NAME, "a distribution name like \"tensorflow\""))
    local = c.get(o, "output", "local_version", _string(_LOCAL_LABEL, "a local version label like \"retf.py36\""))
    platform = c.get(o, "output", "platform", _string(_PLATFORM_TAG, "\"auto\" or a platform tag"), "auto")
    extra = c.get(o, "output", "extra_platform_tags", _tag_list, ())
    description = c.get(data, "top level", "description", _string(None, "a string"), "")
    runtime = _runtime_spec(c, data, path)
    deps = _deps_spec(c, data, path)
    b = c.table(data, "bootstrap", KEYS["bootstrap"], required=False)
    conflicts = c.get(b, "bootstrap", "conflicts", _choice("error", "warn"), "error")
    environment = _environment_spec(c, data)
    o2 = c.table(data, "ops", KEYS["ops"], required=False)
    ops = OpsSpec(
        bool(c.get(o2, "ops", "build", _boolean, True)) if o2 else False,
        c.get(o2, "ops", "builder", _choice("host", "debian-root"), "host") or "host",
        c.get(o2, "ops", "compiler", _string(None, "a compiler command"), "g++") or "g++",
        c.get(o2, "ops", "suite", _string(re.compile(r"^[a-z]+$"), "a Debian suite"), "bullseye") or "bullseye",
    )

    api = c.get(data, "top level", "api", _choice("v1", "v2"), "v2")
    features, deprecations = _features(c, data, api == "v1", ops.build)
    runtime_env = data.get("runtime_env", {})
    if not isinstance(runtime_env, dict) or not all(isinstance(k, str) and re.match(r"^[A-Z_][A-Z0-9_]*$", k) and isinstance(v, str)
                                                    for k, v in runtime_env.items()):
        c.problem("[runtime_env]", 'must map environment variable names to strings, e.g. TF_CPU_ALLOCATOR_USE_BFC = "true"')
        runtime_env = {}

    if c.problems:
        raise RecipeError(c.problems)
    return Recipe(
        name=path.stem,
        path=path,
        sha256=sha256,
        description=description,
        target=Target(python, implementation, abi, arch, glibc, glibcxx, cxxabi, gcc),
        input_requirement=requirement,
        output=OutputSpec(str(canonicalize_name(name)), local, platform, extra),
        runtime=runtime,
        deps=deps,
        conflicts=conflicts,
        environment=environment,
        ops=ops,
        api=api,
        features=features,
        deprecations=deprecations,
        runtime_env=dict(runtime_env),
    )


def _features(c: _Checker, data: dict, api_v1: bool,
              ops_build: bool) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The switches' values ([features], or a deprecated top-level v1_<key>), and a line per deprecated key."""
    table = c.table(data, "features", KEYS["features"], required=False)
    values: list[tuple[str, str]] = []
    deprecations: list[str] = []
    for feature in FEATURES:
        given = [(f"[features] {feature.key}", table[feature.key])] if feature.key in table else []
        if feature.old_key in data:
            given.append((f"top level: {feature.old_key}", data[feature.old_key]))
        if len(given) == 2:
            c.problem(f"top level: {feature.old_key}", f"and [features] {feature.key} both set it; keep [features] {feature.key}")
        values.append((feature.key, _feature_value(c, feature, given[-1] if given else None, api_v1, ops_build)))
        if feature.old_key in data and len(given) == 1:
            deprecations.append(f"{c.path}: top-level {feature.old_key} is deprecated; write it as {feature.key} = "
                                f"{feature.recipe_text(values[-1][1])} in [features] (the old key is read for one more "
                                "release)")
    return tuple(values), tuple(deprecations)


def _feature_value(c: _Checker, feature: Feature, given: tuple[str, Any] | None, api_v1: bool,
                   ops_build: bool) -> str:
    if given is None:
        return feature.default
    where, raw = given
    try:
        value = feature.from_recipe(raw)
    except ValueError as exc:
        c.problem(f"{where} =", f"{raw!r}: {exc}")
        return feature.default
    if value != feature.default and not (api_v1 and (ops_build or not feature.needs_ops)):
        c.problem(f"{where} = {feature.recipe_text(value)}",
                  f"needs {feature.needs} ({'retf kernels' if feature.needs_ops else 'the 1.x API'})")
    return value


def _choice(*choices: str) -> Callable[[Any], str]:
    return _string(re.compile("^(" + "|".join(map(re.escape, choices)) + ")$"), " or ".join(f'"{c}"' for c in choices))


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and _DIST_NAME.match(v) for v in value):
        raise ValueError("expected a list of names")
    return tuple(value)


def _script_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and _DIST_NAME.match(v) for k, v in value.items()):
        raise ValueError('expected a table of script names, e.g. { tensorboard = "retf-tensorboard" }')
    return dict(value)


_DEBIAN_KEYS = (
    ("package", r"^[a-z0-9][a-z0-9+.-]+$", "a Debian package name"),
    ("version", r"^[0-9][A-Za-z0-9.+~:-]*$", "an exact Debian version"),
    ("suite", r"^[a-z]+$", "a Debian suite such as \"bullseye\""),
    ("sha256", r"^[0-9a-f]{64}$", "the .deb's sha256 (64 hex digits)"),
)


def _runtime_spec(c: _Checker, data: dict, path: Path) -> RuntimeSpec:
    t = c.table(data, "libstdcxx", KEYS["libstdcxx"], required=False)
    source = c.get(t, "libstdcxx", "source", _choice("none", "toolchain", "file", "debian"), "none")
    vendor = c.get(t, "libstdcxx", "vendor", _choice("auto", "always"), "auto")
    compiler = c.get(t, "libstdcxx", "compiler", _string(None, "a compiler command"), "g++")
    file = None
    if source == "file":
        file = c.get(t, "libstdcxx", "path", _string(None, "a path to a libstdc++.so.6"), expect="for source = \"file\"")
        file = (path.parent / file) if file else None
    debian = {}
    if source == "debian":
        for key, pattern, expect in _DEBIAN_KEYS:
            default = "libstdc++6" if key == "package" else ...
            debian[key] = c.get(t, "libstdcxx", key, _string(re.compile(pattern), expect), default, expect=expect)
    return RuntimeSpec(source or "none", vendor or "auto", compiler or "g++", file, **{k: v or "" for k, v in debian.items()})


def _requirements(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError('expected a list of requirements like ["tensorflow==1.15.5"]')
    for item in value:
        try:
            Requirement(item)
        except (InvalidRequirement, TypeError):
            raise ValueError(f"{item!r} is not a valid requirement") from None
    return tuple(value)


def _environment_spec(c: _Checker, data: dict) -> EnvironmentSpec | None:
    t = c.table(data, "environment", KEYS["environment"], required=False)
    if not t:
        return None
    packages = c.get(t, "environment", "packages", _requirements, ())
    upgrades = c.get(t, "environment", "upgrades", _requirements, ())
    runtime = None
    raw = t.get("system_libstdcxx")
    if raw is not None:
        if not isinstance(raw, dict):
            c.problem("[environment] system_libstdcxx", "must be a table { package, version, suite, sha256 }")
        else:
            c.unknown(raw, KEYS["environment.system_libstdcxx"], "[environment.system_libstdcxx]")
            values = {}
            for key, pattern, expect in _DEBIAN_KEYS:
                default = "libstdc++6" if key == "package" else ...
                values[key] = c.get(raw, "environment.system_libstdcxx", key, _string(re.compile(pattern), expect), default, expect=expect)
            runtime = RuntimeSpec("debian", "always", package=values["package"] or "", version=values["version"] or "",
                                  suite=values["suite"] or "", sha256=values["sha256"] or "")
    docker = c.get(t, "environment", "docker", _string(re.compile(r"^[A-Za-z0-9_.-]+$"), "a folder name under docker/"), None)
    pip = c.get(t, "environment", "pip", _string(re.compile(r"^[0-9]+(\.[0-9]+)*$"), "a pip version such as \"19.0.3\""),
                DEFAULT_ENVIRONMENT_PIP)
    return EnvironmentSpec(tuple(packages or ()), runtime, docker, tuple(upgrades or ()), pip or DEFAULT_ENVIRONMENT_PIP)


def _deps_spec(c: _Checker, data: dict, path: Path) -> DepsSpec | None:
    t = c.table(data, "deps", KEYS["deps"], required=False)
    if not t:
        return None
    vendor = c.get(t, "deps", "vendor", _boolean, True)
    lock = c.get(t, "deps", "lock", _string(re.compile(r"^[^/].*$"), "a file name next to the recipe"), None)
    leave = c.get(t, "deps", "leave", _names, ())
    scripts = c.get(t, "deps", "scripts", _script_map, {})
    environment_scripts = c.get(t, "deps", "environment_scripts", _names, ())
    private_names = c.get(t, "deps", "private_names", _names, ())
    for name in set(private_names or ()) & set(leave or ()):
        c.problem("[deps] private_names =", f"'{name}' is also in leave: a distribution left to the environment is not shipped")
    return DepsSpec(bool(vendor), path.parent / lock if lock else None, tuple(leave or ()), scripts or {},
                    tuple(environment_scripts or ()), tuple(str(canonicalize_name(n)) for n in private_names or ()))

