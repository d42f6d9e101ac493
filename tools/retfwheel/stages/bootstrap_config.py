"""The settings the tool hands the bootstrap: one typed, versioned schema that both sides check.

The bootstrap (runtime/wheel/tensorflow/_retf/, shipped at that path in the wheel) declares the schema it reads as
`SCHEMA = N`; a build refuses to ship a bootstrap whose schema differs from SCHEMA here, and the
bootstrap refuses settings of another schema with an ImportError that says to rebuild. Each injected
call has its settings here: BootstrapConfig for `run`, OpsSettings for `register_ops`, ApiSettings for
`expose_v1_api`; the switches they read come from retfwheel.features, with their variables.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from retfwheel.errors import AuditError
from retfwheel.features import DEFAULTS, block_settings

# 6: `run` returns the call tensorflow/__init__.py's `finally` makes (the garbage collector's resumption);
# 5: each switch says whether a value other than its default needs the op library ("needs_ops"); 4: the op library's and the 1.x API's settings are schema-checked too, their switches under "features" (each with
# its variable); 3: "dist_info", "glibcxx_wanted", "glibcxx_needed_by" and each distribution's "metadata" folder;
# 2: per-distribution routing ("distributions", "lazy"); 1 had "modules" and "namespaces"
SCHEMA = 6


@dataclass(frozen=True)
class Distribution:
    """A vendored distribution as the bootstrap routes it."""

    name: str
    version: str
    range: str  # PEP 440 specifiers the environment's copy must meet to serve
    modules: tuple[str, ...]
    metadata: str  # its metadata folder in the private folder


@dataclass(frozen=True)
class BootstrapConfig:
    label: str  # "<name> <version>" of the produced wheel, for messages
    dist_info: str = ""  # its .dist-info folder, relative to site-packages: a half-installed wheel is refused
    conflicts: str = "error"  # or "warn"
    env: tuple[tuple[str, str], ...] = ()  # runtime defaults
    libstdcxx: str | None = None  # the vendored runtime, relative to site-packages
    glibcxx_needed: tuple[int, ...] = ()  # what TensorFlow's own native code needs: below it, ImportError
    glibcxx_needed_by: str = ""  # the shipped file that needs it, for the message
    glibcxx_wanted: tuple[int, ...] = ()  # preloaded while no libstdc++ is mapped: the op library's or the runtime's
    deps: str | None = None  # the private folder, relative to site-packages
    distributions: tuple[Distribution, ...] = ()
    lazy: tuple[str, ...] = ()
    schema: int = field(default=SCHEMA)

    def to_json(self) -> dict:
        """The literal injected into tensorflow/__init__.py (keys only where set, as the bootstrap reads them)."""
        document: dict = {"schema": self.schema, "label": self.label, "conflicts": self.conflicts}
        if self.dist_info:
            document["dist_info"] = self.dist_info
        if self.env:
            document["env"] = dict(self.env)
        if self.libstdcxx:
            document["libstdcxx"] = self.libstdcxx
            document["glibcxx_needed"] = list(self.glibcxx_needed)
            document["glibcxx_needed_by"] = self.glibcxx_needed_by
            document["glibcxx_wanted"] = list(self.glibcxx_wanted or self.glibcxx_needed)
        if self.deps:
            document["deps"] = self.deps
            document["distributions"] = [{"name": d.name, "version": d.version, "range": d.range,
                                          "modules": list(d.modules), "metadata": d.metadata}
                                         for d in self.distributions]
            document["lazy"] = list(self.lazy)
        return document


@dataclass(frozen=True)
class OpsSettings:
    """What `register_ops` reads: the op library, what it needs, and the switches acted on as it registers."""

    label: str
    library: str  # relative to site-packages
    glibcxx: tuple[int, ...]  # what it needs: registered only where the process's libstdc++ provides it
    libstdcxx: str | None = None  # the vendored runtime, for the message that names LD_PRELOAD
    features: tuple[tuple[str, str], ...] = DEFAULTS
    schema: int = field(default=SCHEMA)

    def to_json(self) -> dict:
        document: dict = {"schema": self.schema, "label": self.label, "library": self.library,
                          "glibcxx": list(self.glibcxx), "features": block_settings(self.features, "ops")}
        if self.libstdcxx:
            document["libstdcxx"] = self.libstdcxx
        return document


@dataclass(frozen=True)
class ApiSettings:
    """What `expose_v1_api` reads: the switches of the 1.x API."""

    label: str
    features: tuple[tuple[str, str], ...] = DEFAULTS
    schema: int = field(default=SCHEMA)

    def to_json(self) -> dict:
        return {"schema": self.schema, "label": self.label, "features": block_settings(self.features, "api")}


def check_bootstrap_schema(source: bytes, where: str) -> None:
    """Refuse a bootstrap source that reads another schema than the one this tool writes."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SCHEMA" for t in node.targets):
            value = ast.literal_eval(node.value)
            if value != SCHEMA:
                raise AuditError(f"{where} reads bootstrap settings of schema {value}, but this retfwheel writes "
                                 f"schema {SCHEMA}")
            return
    raise AuditError(f"{where} declares no SCHEMA: it is not a retfwheel bootstrap")
