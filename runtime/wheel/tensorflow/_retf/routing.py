"""The vendored Python dependencies.

The wheel carries TensorFlow's Python dependencies in a private folder that is never put on
sys.path. Each distribution comes with the range of versions the build works with; one that the
environment has in that range is the environment's (for TensorFlow and the user alike), and only
the modules of distributions the environment lacks, or has outside the range, are served from the
private folder, by a finder first on sys.meta_path.
"""

import os
import re
import sys

from .imports import Then, run_on_first_use
from .versions import satisfies


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def environment_distributions(paths, private_folder):
    """{canonical name: (version, metadata folder)} installed on ``paths``, first on the path wins."""
    found = {}
    for entry in paths:
        folder = os.path.abspath(entry or ".")
        if folder == private_folder or folder.startswith(private_folder + os.sep):
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info"):
                project, _, version = name[:-len(".dist-info")].partition("-")
            elif name.endswith(".egg-info"):
                project, _, rest = name[:-len(".egg-info")].partition("-")
                version = rest.split("-py", 1)[0]
            else:
                continue
            if project and version:
                found.setdefault(_canonical(project), (version, os.path.join(folder, name)))
    return found


class _Route(object):
    __slots__ = ("name", "version", "range", "modules", "metadata", "theirs", "private")

    def __init__(self, spec, theirs):
        self.name, self.version, self.range = spec["name"], spec["version"], spec["range"]
        self.modules = spec["modules"]
        self.metadata = spec["metadata"]  # its .dist-info folder in the private folder, under a name pip never takes for the wheel's own
        self.theirs = theirs  # the environment's (version, metadata folder), or None
        self.private = theirs is None or not satisfies(theirs[0], self.range)


def route_dependencies(folder, distributions, paths):
    """One route per vendored distribution: the environment's copy where it fits, else the private one."""
    installed = environment_distributions(paths, folder)
    return [_Route(spec, installed.get(_canonical(spec["name"]))) for spec in distributions]


class PrivateFinder(object):
    """Finds the modules of the privately served distributions in the private folder, and their
    metadata for importlib.metadata (and its backport); shows them to pkg_resources when it loads."""

    def __init__(self, folder, routes, lazy=()):
        self.folder = folder
        self.lazy = frozenset(lazy)  # modules whose code runs on first use of an attribute, not on import
        self.routes = dict((_canonical(r.name), r) for r in routes if r.private)
        self.modules = {}
        for route in self.routes.values():
            for module in route.modules:
                parent, _, _ = module.rpartition(".")
                self.modules[module] = os.path.join(folder, *parent.split(".")) if parent else folder
        # Namespace packages holding served modules (google of google.protobuf): found in the private
        # folder only where the environment has none of its own, so the environment's stay as they are.
        self.namespaces = set()
        for module in self.modules:
            parts = module.split(".")[:-1]
            self.namespaces.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        self.namespaces.difference_update(self.modules)

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.namespaces:
            return self._namespace_spec(fullname, path)
        where = self.modules.get(fullname)
        if where is not None:
            import importlib.machinery
            spec = importlib.machinery.PathFinder.find_spec(fullname, [where])
            return run_on_first_use(spec) if fullname in self.lazy else spec
        if fullname == "pkg_resources" and "pkg_resources" not in sys.modules:
            return self._pkg_resources_spec(path)
        return None

    def _namespace_spec(self, fullname, path):
        import importlib.machinery
        if importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return None  # the environment's own: the import system finds it next
        parent, _, _ = fullname.rpartition(".")
        return importlib.machinery.PathFinder.find_spec(fullname, [os.path.join(self.folder, *parent.split("."))]
                                                        if parent else [self.folder])

    def find_distributions(self, context=None):
        name = getattr(context, "name", None)
        wanted = [self.routes[_canonical(name)]] if name and _canonical(name) in self.routes else (
            [] if name else list(self.routes.values()))
        if not wanted:
            return iter(())
        metadata = sys.modules.get(type(context).__module__)  # importlib.metadata or its backport
        make = getattr(metadata, "PathDistribution", None)
        if make is None:
            return iter(())
        return iter([make(_Path(self._dist_info(route))) for route in wanted if self._dist_info(route)])

    def _dist_info(self, route):
        path = os.path.join(self.folder, route.metadata)
        return path if os.path.isdir(path) else None

    def _pkg_resources_spec(self, path):
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec("pkg_resources", path)
        if spec is not None and spec.loader is not None:
            spec.loader = Then(spec.loader, self.publish)  # then the private distributions join its working set
        return spec

    def publish(self, pkg_resources):
        """Make pkg_resources report the private distributions this process imports.

        Written into the working set's tables directly: WorkingSet.add would also "activate" each
        one, which puts the private folder on sys.path, in front of the environment.
        """
        working_set = pkg_resources.working_set
        keys = working_set.entry_keys.setdefault(self.folder, [])
        for route in sorted(self.routes.values(), key=lambda r: r.name):
            path = self._dist_info(route)
            if path is None:
                continue
            # The folder's own name hides it from pip's installer; pkg_resources is shown it as a .dist-info.
            dist = pkg_resources.DistInfoDistribution.from_location(
                self.folder, "%s-%s.dist-info" % (route.name.replace("-", "_"), route.version),
                metadata=pkg_resources.PathMetadata(self.folder, path))
            working_set.by_key[dist.key] = dist
            if dist.key not in keys:
                keys.append(dist.key)
        if self.folder not in working_set.entries:
            working_set.entries.append(self.folder)


def _Path(folder):
    import pathlib
    return pathlib.Path(folder)


def prepare(folder, config, log):
    routes = route_dependencies(folder, config.get("distributions", ()), sys.path)
    for route in routes:
        log("%s: %s" % (route.name, _describe(route)))
    finder = PrivateFinder(folder, routes, config.get("lazy", ()))
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, type(finder)) and
                        type(f).__name__ != "PrivateFinder"]
    sys.meta_path.insert(0, finder)
    if "pkg_resources" in sys.modules:
        finder.publish(sys.modules["pkg_resources"])
    conflicts = [_conflict(route, module) for route in routes if route.private
                 for module in route.modules if _imported_elsewhere(module, folder)]
    if not conflicts:
        return
    names = ", ".join(sorted(set(c[0] for c in conflicts)))
    if config.get("conflicts", "error") == "warn":
        import warnings
        warnings.warn(" ".join(c[1] for c in conflicts) + " Mixing them may crash.", RuntimeWarning, stacklevel=4)
        log("conflicts (warned): %s" % names)
        return
    raise ImportError("\n".join(c[1] for c in conflicts) + "\nFix: import tensorflow before %s, or install a version "
                      "in the range into the environment (pip install %s)."
                      % (names, " ".join("'%s%s'" % (c[2].name, c[2].range) for c in conflicts)))


def _describe(route):
    theirs = "%s %s" % (route.name, route.theirs[0]) if route.theirs else "none installed"
    if not route.private:
        return "the environment's %s serves (needs %s)" % (route.theirs[0], route.range)
    return "private %s (needs %s; environment: %s)" % (route.version, route.range, theirs)


def _imported_elsewhere(module, folder):
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None) if loaded is not None else None
    if loaded is None:
        return False
    if origin is None:  # a namespace package: judged by its portions
        return False
    return not os.path.abspath(origin).startswith(folder + os.sep)


def _conflict(route, module):
    loaded = sys.modules[module]
    theirs = route.theirs[0] if route.theirs else getattr(loaded, "__version__", "an unknown version")
    message = ("%s %s was already imported from %s, but this TensorFlow needs %s %s (it ships %s %s)."
               % (module, theirs, os.path.dirname(loaded.__file__), route.name, route.range, route.name, route.version))
    return module, message, route
