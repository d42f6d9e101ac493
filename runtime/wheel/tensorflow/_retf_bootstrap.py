"""Runs first in a retfwheel-built TensorFlow, before any TensorFlow native code loads.

It makes the wheel's vendored C++ runtime and Python dependencies the ones this process uses, or
explains exactly why it cannot. Python 3.6 syntax, standard library only: this file ships inside
the produced wheel as tensorflow/_retf_bootstrap.py and is called from tensorflow/__init__.py with
the build's settings.

Environment variables: RETF_BOOTSTRAP=0 does nothing; RETF_BOOTSTRAP_DEBUG=1 logs each decision and
its time to stderr; RETF_RUNTIME_DEFAULTS=0 keeps the build's runtime defaults out of the environment;
RETF_API=2 keeps the 2.x API in a 1.x API build; RETF_OPS=0 leaves the retf op library unregistered.
The switches (sparse Adam, the fused paths, ...) and the variables that override them are not named
here: the build declares them in its settings (retfwheel's features table, docs/reference.md), and
switch() reads them by key.
"""

import os
import re
import struct
import sys
import time

_GLIBCXX = re.compile(rb"GLIBCXX_3\.4\.(\d+)\x00")
_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                 "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
SONAME = "libstdc++.so.6"
SCHEMA = 4  # the settings this bootstrap reads (retfwheel's stages/bootstrap_config.py writes them)


class _Log(object):
    def __init__(self, enabled):
        self.enabled = enabled
        self.start = time.perf_counter()

    def __call__(self, message):
        if self.enabled:
            sys.stderr.write("retf-bootstrap [%6.2f ms] %s\n" % ((time.perf_counter() - self.start) * 1e3, message))


def check_schema(config):
    """ImportError unless ``config`` (the settings of one injected call) is of the schema this bootstrap reads."""
    if config.get("schema") != SCHEMA:
        raise ImportError("%s: its bootstrap settings are of schema %s, but its bootstrap reads schema %s; the "
                          "wheel was patched by hand or half-rebuilt. Fix: rebuild it with retfwheel."
                          % (config.get("label", "this TensorFlow"), config.get("schema"), SCHEMA))


def run(package_dir, config):
    """Prepare this process for TensorFlow; raise ImportError when that cannot work."""
    if os.environ.get("RETF_BOOTSTRAP", "1") == "0":
        return
    check_schema(config)
    log = _Log(os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"))
    site = os.path.dirname(os.path.abspath(package_dir))
    log("%s: bootstrap starts" % config["label"])
    if config.get("dist_info"):
        _refuse_an_interrupted_install(site, config)
    _apply_runtime_defaults(config.get("env", {}), log)
    if config.get("libstdcxx"):
        _prepare_runtime(os.path.join(site, config["libstdcxx"]), tuple(config["glibcxx_needed"]),
                         tuple(config.get("glibcxx_wanted") or config["glibcxx_needed"]), config, log)
    if config.get("deps"):
        _prepare_dependencies(os.path.realpath(os.path.join(site, config["deps"])), config, log)
    _after_import("tensorflow.python.framework.load_library", lambda module: _explain_tf1_libraries(module, config))
    log("bootstrap done")


def _refuse_an_interrupted_install(site, config):
    """ImportError when an install of this wheel was killed part-way: pip writes INSTALLER last, and until then the
    metadata it has copied makes pip take the half-written package for installed ("Requirement already satisfied")."""
    info = os.path.join(site, config["dist_info"])
    if os.path.isfile(os.path.join(info, "INSTALLER")) or not os.path.isdir(info):
        return
    import csv
    try:
        with open(os.path.join(info, "RECORD"), newline="") as handle:
            paths = [row[0] for row in csv.reader(handle) if row]
    except OSError:
        return
    missing = [path for path in paths if not os.path.exists(os.path.join(site, path))]
    if missing:  # an installer that writes no INSTALLER, and wrote every file, is fine
        raise ImportError(
            "%s is half-installed: %d of its %d files are missing (%s, ...), as when a pip install is stopped "
            "part-way, and pip takes it for installed.\nFix: pip install --force-reinstall --no-deps <its .whl file>, "
            "or pip uninstall -y %s and install the TensorFlow you want."
            % (config["label"], len(missing), len(paths), missing[0], config["label"].split()[0]))


def _apply_runtime_defaults(defaults, log):
    if not defaults or os.environ.get("RETF_RUNTIME_DEFAULTS", "1") == "0":
        return
    for name, value in sorted(defaults.items()):
        if name in os.environ:
            log("runtime default %s: kept the user's %s" % (name, os.environ[name]))
        else:
            os.environ[name] = value
            log("runtime default %s=%s" % (name, value))


# --- the C++ runtime ---------------------------------------------------------------------------

def glibcxx_version(path):
    """Newest GLIBCXX_3.4.N the library at ``path`` mentions, as a tuple, or None."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    found = [int(m.group(1)) for m in _GLIBCXX.finditer(data)]
    return (3, 4, max(found)) if found else None


def mapped_runtimes():
    """Paths of every libstdc++ already mapped into this process."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if "/libstdc++.so" in path and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


def system_runtime():
    """The libstdc++.so.6 the dynamic loader would pick: LD_LIBRARY_PATH, ld.so.cache, default dirs."""
    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if folder and os.path.isfile(os.path.join(folder, SONAME)):
            return os.path.join(folder, SONAME)
    for path in _cache_entries(SONAME):
        if _is_native_elf(path):
            return path
    for folder in _DEFAULT_DIRS:
        path = os.path.join(folder, SONAME)
        if _is_native_elf(path):
            return path
    return None


def _cache_entries(soname):
    try:
        with open("/etc/ld.so.cache", "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    base = data.find(_CACHE_MAGIC)
    if base < 0:
        return []
    count = struct.unpack_from("<I", data, base + 20)[0]
    entries = []
    key = soname.encode()
    for index in range(count):
        _flags, name_at, path_at = struct.unpack_from("<iII", data, base + 48 + 24 * index)
        if data[base + name_at:base + name_at + len(key) + 1] == key + b"\x00":
            end = data.index(b"\x00", base + path_at)
            entries.append(data[base + path_at:end].decode("utf-8", "replace"))
    return entries


def _is_native_elf(path):
    try:
        with open(path, "rb") as handle:
            head = handle.read(5)
    except OSError:
        return False
    return head[:4] == b"\x7fELF" and head[4] == (2 if sys.maxsize > 2 ** 32 else 1)


def _text(version):
    return "GLIBCXX_" + ".".join(str(p) for p in version) if version else "unknown version"


def _prepare_runtime(vendored, needed, wanted, config, log):
    """Make a libstdc++ that TensorFlow's own native code can run on this process's, or raise ImportError.

    ``needed`` is what TensorFlow itself needs: below it nothing can run. ``wanted`` is what the wheel
    would like (the vendored runtime's own version, or what optional parts such as the op library
    need): preloaded only while no libstdc++ is mapped yet, never forced on a process that already
    holds an older one that ``needed`` fits.
    """
    vendored_real = os.path.realpath(vendored)
    mapped = mapped_runtimes()
    log("mapped libstdc++: %s" % (", ".join(mapped) or "none"))
    for path in mapped:
        if os.path.realpath(path) == vendored_real:
            log("the vendored libstdc++ is already loaded")
            return
    if mapped:
        version = glibcxx_version(mapped[0])
        if version is None or version >= needed:
            log("loaded %s (%s) runs TensorFlow (needs %s); nothing to preload" % (mapped[0], _text(version), _text(needed)))
            return
        raise ImportError(
            "%s needs a libstdc++ with %s (for %s), but %s (%s) was already loaded by an earlier import, and a "
            "process can hold only one libstdc++.\n"
            "Fix: import tensorflow before modules that load C++ extensions, or start Python with the "
            "vendored runtime preloaded:\n    LD_PRELOAD=%s python ...\n"
            "(RETF_BOOTSTRAP_DEBUG=1 shows what was found.)"
            % (config["label"], _text(needed), config.get("glibcxx_needed_by", "its native code"), mapped[0],
               _text(version), vendored))
    system = system_runtime()
    version = glibcxx_version(system) if system else None
    log("system libstdc++: %s (%s)" % (system or "not found", _text(version)))
    if version is not None and version >= max(needed, wanted):
        log("system runtime suffices; the vendored one stays unused")
        return
    import ctypes
    ctypes.CDLL(vendored, mode=ctypes.RTLD_GLOBAL)
    log("preloaded %s (system has %s, needed %s, wanted %s)" % (vendored, _text(version), _text(needed), _text(wanted)))


# --- the vendored Python dependencies ----------------------------------------------------------
#
# The wheel carries TensorFlow's Python dependencies in a private folder that is never put on
# sys.path. Each distribution comes with the range of versions the build works with; one that the
# environment has in that range is the environment's (for TensorFlow and the user alike), and only
# the modules of distributions the environment lacks, or has outside the range, are served from the
# private folder, by a finder first on sys.meta_path.

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
            if spec is not None and fullname in self.lazy and spec.loader is not None:
                import importlib.util
                spec.loader = importlib.util.LazyLoader(spec.loader)
            return spec
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
            spec.loader = _Then(spec.loader, self.publish)  # then the private distributions join its working set
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


def _prepare_dependencies(folder, config, log):
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


class _AfterImport(object):
    """Runs ``then(module)`` right after the module ``name`` is first imported, then leaves sys.meta_path."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        import importlib.util
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Then(spec.loader, self.then)
        return spec


class _Then(object):
    """A module's own loader, then ``then(module)``; the module keeps its own loader for reloads."""

    def __init__(self, loader, then):
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.then(module)


def _after_import(name, then):
    if name in sys.modules:
        then(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))


# --- libraries built for TensorFlow 1.x -------------------------------------------------------------

TF1_FRAMEWORK = "libtensorflow_framework.so.1"


class _ExplainingLoads(object):
    """load_library's pywrap module, but a library built for TensorFlow 1.x that fails to load says so."""

    def __init__(self, pywrap, label):
        self._pywrap, self._label = pywrap, label

    def __getattr__(self, name):
        return getattr(self._pywrap, name)

    def TF_LoadLibrary(self, filename):  # noqa: N802 (TensorFlow's name)
        try:
            return self._pywrap.TF_LoadLibrary(filename)
        except Exception as error:  # TensorFlow's NotFoundError: dlopen's message
            message = getattr(error, "message", str(error))
            hint = tf1_library_hint(filename, message, self._label)
            if hint is None or not hasattr(error, "node_def"):
                raise
            raise type(error)(error.node_def, error.op, message + _HINT_MARK + hint) from None


def _explain_tf1_libraries(load_library, config):
    if not isinstance(load_library.py_tf, _ExplainingLoads):
        load_library.py_tf = _ExplainingLoads(load_library.py_tf, config["label"])


def tf1_library_hint(filename, message, label):
    """What to do about ``filename`` when it failed to load because it was built for TensorFlow 1.x (it links TF
    1.x's framework library), or None when that is not why."""
    path = os.path.realpath(filename)
    if TF1_FRAMEWORK not in message and not _file_mentions(path, TF1_FRAMEWORK.encode()):
        return None
    owner = _owning_distribution(path)
    return ("%s%s was built for TensorFlow 1.x: it links %s, TF 1.x's framework library, and cannot load into %s "
            "(TensorFlow 2.x). Fix: install a release of %s built for this TensorFlow version; for a custom-op "
            "library you have the sources of, rebuild it here with the flags of tf.sysconfig.get_compile_flags() "
            "and tf.sysconfig.get_link_flags(); or keep running it on TF 1.15."
            % (path, " (%s)" % owner if owner else "", TF1_FRAMEWORK, label,
               owner.split(" ")[0] if owner else "it"))


def _file_mentions(path, needle):
    try:
        with open(path, "rb") as stream:
            tail = b""
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                if needle in tail + chunk:
                    return True
                tail = chunk[-len(needle):]
    except OSError:
        pass
    return False


def _owning_distribution(path):
    """"name version" of the installed distribution whose RECORD lists ``path``, or None."""
    import glob
    for folder in sys.path:
        folder = os.path.realpath(folder or ".")
        if not path.startswith(folder + os.sep):
            continue
        for info in glob.glob(os.path.join(folder, "*.dist-info")):
            try:
                with open(os.path.join(info, "RECORD")) as record:
                    listed = [line.rsplit(",", 2)[0].strip('"') for line in record]
            except OSError:
                continue
            base = os.path.basename(path)
            if any(os.path.realpath(os.path.join(folder, entry)) == path for entry in listed if entry.endswith(base)):
                name, _, version = os.path.basename(info)[:-len(".dist-info")].partition("-")
                return "%s %s" % (name.replace("_", "-"), version)
    return None


_VERSION = re.compile(
    r"^\s*v?(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?"
    r"(?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$", re.IGNORECASE)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


class Version(object):
    """A PEP 440 version, compared as `packaging.version.Version` compares (no third-party code here)."""

    def __init__(self, text):
        match = _VERSION.match(text)
        if not match:
            raise ValueError("not a PEP 440 version: %r" % text)
        self.text = text.strip()
        self.epoch = int(match.group("epoch") or 0)
        self.release = tuple(int(p) for p in match.group("release").split("."))
        pre_l = match.group("pre_l")
        self.pre = (_PRE_RANK[pre_l.lower()], int(match.group("pre_n") or 0)) if pre_l else None
        post = match.group("post_n1") or match.group("post_n2")
        self.post = int(post or 0) if (match.group("post_n1") or match.group("post_l")) else None
        self.dev = int(match.group("dev_n") or 0) if match.group("dev_l") else None
        local = match.group("local")
        self.local = tuple((int(p), "") if p.isdigit() else (-1, p.lower()) for p in re.split(r"[-_.]", local)) if local else None
        release = self.release
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]
        pre = self.pre if self.pre is not None else ((-1, 0) if self.post is None and self.dev is not None else (3, 0))
        self.public_key = (self.epoch, release, pre, -1 if self.post is None else self.post,
                           float("inf") if self.dev is None else self.dev)
        self.key = self.public_key + (((-2, ""),) if self.local is None else self.local,)

    @property
    def is_prerelease(self):
        return self.pre is not None or self.dev is not None


_CLAUSE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s]+)\s*$")


def satisfies(version, specifier):
    """Whether the installed ``version`` lies in the comma-separated PEP 440 ``specifier``, as
    packaging decides for an installed version (pre-releases included); False when it is not PEP 440."""
    try:
        have = Version(version)
    except ValueError:
        return False
    for clause in specifier.split(","):
        if not clause.strip():
            continue
        match = _CLAUSE.match(clause)
        if not match or not _holds(have, *match.groups()):
            return False
    return True


def _holds(have, operator, text):
    if operator == "===":
        return text.lower() == have.text.lower()
    if operator in ("==", "!=") and text.endswith(".*"):
        want = Version(text[:-2])
        prefix = have.release[:len(want.release)] + (0,) * max(0, len(want.release) - len(have.release))
        equal = have.epoch == want.epoch and prefix == want.release
        return equal if operator == "==" else not equal
    want = Version(text)
    mine = have.key if want.local is not None else have.public_key
    theirs = want.key if want.local is not None else want.public_key
    if operator == "==":
        return mine == theirs
    if operator == "!=":
        return mine != theirs
    if operator == ">=":
        return have.public_key >= want.public_key
    if operator == "<=":
        return have.public_key <= want.public_key
    if operator == "~=":
        prefix = ".".join(str(p) for p in want.release[:-1]) + ".*"
        return _holds(have, ">=", text) and _holds(have, "==", prefix)
    if operator == "<":  # not a pre-release of the bound itself, unless the bound is one
        if not have.key < want.key:
            return False
        return want.is_prerelease or not have.is_prerelease or _base(have) != _base(want)
    if operator == ">":  # not a post-release or local version of the bound itself, unless the bound is one
        if not have.key > want.key:
            return False
        if want.post is None and have.post is not None and have.public_key[:3] == want.public_key[:3]:
            return False
        return have.local is None or have.public_key != want.public_key
    return False


def _base(version):
    return version.public_key[:2]


# --- the retf op library ----------------------------------------------------------------------

_UNREGISTERED = re.compile(r"Op type not registered '(Retf>[^']+)'")
_OLDER_REMOTE = re.compile(r"from remote target (/job:\S+?):?\s")
_HINT_MARK = "\nretf: "


# Why this process runs without the retf op library although RETF_OPS allows it (None: it does not).
OPS_LEFT_OUT = None


def ops_enabled():
    """Whether this process registers the retf op library (RETF_OPS=0 keeps it out, and so does a libstdc++
    older than it needs, loaded before tensorflow)."""
    return os.environ.get("RETF_OPS", "1") != "0" and OPS_LEFT_OUT is None


def _runtime_too_old_for(library, needed, config):
    """Why the libstdc++ this process holds cannot load ``library`` (which needs ``needed``), or None."""
    mapped = mapped_runtimes()
    version = glibcxx_version(mapped[0]) if mapped else None
    if not needed or version is None or version >= tuple(needed):
        return None
    fix = ("; to keep it, start Python with LD_PRELOAD=%s" % os.path.join(os.path.dirname(os.path.dirname(library)),
                                                                        config["libstdcxx"])
           if config.get("libstdcxx") else "")
    return ("%s: left out its retf op library %s, which needs %s: %s (%s) was loaded before tensorflow, and a process "
            "can hold only one libstdc++. tf.train's optimizers use TensorFlow's own ops%s."
            % (config["label"], library, _text(tuple(needed)), mapped[0], _text(version), fix))


def register_ops(namespace, config):
    """Register the retf ops and kernels while `import tensorflow` runs (``namespace``: its globals).

    Every process that imports this TensorFlow can then run the ops its optimizers emit, even one
    that builds no graph itself: a parameter server runs the update ops of the variables it holds.
    Only the kernels load here; retf's Python wrappers are made on first use.
    """
    global OPS_LEFT_OUT
    check_schema(config)
    from tensorflow.python.framework import errors_impl, load_library
    _explain_cluster_errors(errors_impl, config["label"])
    if not ops_enabled():
        return
    start = time.perf_counter()
    site = os.path.dirname(os.path.dirname(os.path.abspath(namespace["__file__"])))
    path = os.path.realpath(os.path.join(site, config["library"]))  # the spelling retf loads it by, too
    reason = _runtime_too_old_for(path, config.get("glibcxx"), config)
    if reason is not None:
        OPS_LEFT_OUT = reason
        import warnings
        warnings.warn(reason, RuntimeWarning, stacklevel=3)
        return
    try:
        load_library.load_library(path)
    except (errors_impl.OpError, OSError) as error:
        raise ImportError(
            "%s: cannot register its retf op library %s: %s\nFix: reinstall this wheel; or set RETF_OPS=0 to run "
            "without it (tf.train.AdamOptimizer then uses TensorFlow's own ops)."
            % (config["label"], path, getattr(error, "message", error))) from error
    if os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"):
        sys.stderr.write("retf-bootstrap [ops] registered %s in %.2f ms\n" % (path, (time.perf_counter() - start) * 1e3))
    if switch(config, "large_block_allocator") == "1":
        _use_large_block_allocator(path)


def _use_large_block_allocator(path):
    """TensorFlow's CPU allocator becomes retf's large-block one, if TensorFlow has not chosen it yet."""
    import ctypes
    try:
        library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # the copy TensorFlow just loaded
        outcome = library.RetfInstallLargeBlockAllocator()
    except (OSError, AttributeError) as error:  # a library without it
        raise ImportError("the CPU allocator: cannot install retf's large-block allocator from %s: %s\nFix: reinstall "
                          "this wheel; or set RETF_LARGE_BLOCK_ALLOCATOR=0 to keep TensorFlow's allocator"
                          % (path, error)) from error
    if os.environ.get("RETF_BOOTSTRAP_DEBUG", "0") not in ("", "0"):
        sys.stderr.write("retf-bootstrap [ops] CPU allocator: %s\n" % {
            1: "retf's large-block allocator", 0: "TensorFlow's (it had already chosen one)",
            -1: "this TensorFlow build's own"}.get(outcome, outcome))


def _explain_cluster_errors(errors_impl, label):
    """Add what to do to the errors a cluster of mixed TensorFlows gives, where they are made.

    TensorFlow raises them in the process that sent the graph, with the message of the task that
    could not run it: "Op type not registered 'Retf>...'" (a task without the library) or "NodeDef
    missing attrs" from a remote target (a task on an older TensorFlow, e.g. a stock 1.15 ps).
    """
    def unregistered(message):
        found = _UNREGISTERED.search(message)
        if found:
            return ("%s is an op of the retf library that %s ships and registers in every process that imports it. "
                    "The task that reported this error runs without it: on another TensorFlow (e.g. a stock 1.15 ps) "
                    "or with RETF_OPS=0. Fix: run every task of the cluster (ps, chief, workers, evaluator) on this "
                    "same wheel with RETF_OPS unset; or build the graph without retf ops (RETF_SPARSE_ADAM=dense, "
                    "RETF_FUSED_SPARSE=0, RETF_FUSED_EMBEDDING=0, RETF_FUSED_MATMUL_GRAD=0 and "
                    "RETF_FUSED_CONCAT_GRAD=0 on the workers, and no retf optimizers)."
                    % (found.group(1), label))
        return None

    def older_remote(message):
        remote = _OLDER_REMOTE.search(message)
        if remote and "NodeDef missing attrs" in message:
            return ("%s runs another TensorFlow than this process (%s), one that cannot read the graphs this "
                    "TensorFlow sends. Fix: run every task of the cluster (ps, chief, workers, evaluator) on this "
                    "same wheel." % (remote.group(1), label))
        return None

    _add_hint(errors_impl.NotFoundError, unregistered)
    _add_hint(errors_impl.InvalidArgumentError, older_remote)


def _add_hint(error_class, explain):
    if "_retf_explain" in vars(error_class):
        return
    original = error_class.__init__

    def __init__(self, node_def, op, message, *args, **kwargs):
        if isinstance(message, str) and _HINT_MARK not in message:
            hint = explain(message)
            if hint:
                message += _HINT_MARK + hint
        original(self, node_def, op, message, *args, **kwargs)

    error_class.__init__ = __init__
    error_class._retf_explain = explain


# --- the TensorFlow 1.x API -------------------------------------------------------------------

CONTRIB_MESSAGE = (
    "tf.contrib is not part of TensorFlow 2.x, which this build is; it provides the parts TF 1.x code uses most: "
    "tf.contrib.layers, .framework, .slim and .metrics (tf_slim), .rnn, .opt's LazyAdam, AdamW, MomentumW and "
    "MovingAverage optimizers, .data, .distribute, .estimator's heads, .summary, .feature_column's sequence columns, "
    ".tpu (TPUEstimator, with use_tpu=False too), .cluster_resolver, .lookup, .training (HParams), .crf, "
    ".seq2seq (attention and beam search), .legacy_seq2seq, .learn's ModeKeys. Replacements for the rest: "
    "tf.contrib.image -> tf.image; tf.contrib.cudnn_rnn -> tf.keras.layers' LSTM and GRU; tf.contrib.learn -> "
    "tf.estimator; tf.contrib.gan -> TF-GAN (tensorflow_gan); tf.contrib.signal -> tf.signal. See TensorFlow's "
    "guide on migrating from 1.x.")


class RemovedContrib(object):
    """Stands in for tf.contrib: any use says what replaced it."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError("tf.contrib.%s: %s" % (name, CONTRIB_MESSAGE))

    def __repr__(self):
        return "<tf.contrib: removed in TensorFlow 2.x>"


def _contrib():
    """tensorflow.contrib as the wheel ships it (the parts TF 1.x CTR code uses), or the stand-in."""
    try:
        import importlib
        return importlib.import_module("tensorflow.contrib")
    except ImportError:  # a wheel without the package: every use says what replaced it
        return RemovedContrib()


def switch(config, key):
    """The value of switch ``key`` in this process: its environment variable if set, else the build's choice.

    ``config["features"]`` holds each switch the injected call reads, as the build declares it (value,
    default, variable, values, what it does). A value other than the default runs retf kernels: with
    RETF_OPS=0 the build's choice falls back to the default (TensorFlow's own ops), so no process
    emits retf ops that it, or a parameter server started the same way, could not run.
    """
    row = config["features"][key]
    chosen = os.environ.get(row["env"], "") if row["env"] else ""
    if chosen and chosen not in row["choices"]:
        allowed = " or ".join(row["choices"]) if len(row["choices"]) == 2 else "one of " + ", ".join(row["choices"])
        raise ImportError("%s=%s is not %s (%s); unset it to use the build's choice, %s"
                          % (row["env"], chosen, allowed, row["what"], row["value"]))
    value = chosen or row["value"]
    if value != row["default"] and not ops_enabled():
        if chosen and OPS_LEFT_OUT is None:
            raise ImportError("%s=%s needs the retf op library, which RETF_OPS=0 leaves unregistered; "
                              "unset one of them" % (row["env"], value))
        return row["default"]
    return value


def _route_embedding_lookups(v1):
    """tf.nn.embedding_lookup_sparse, and the module function that safe_embedding_lookup_sparse (feature
    columns, linear_model, tf.contrib.layers) calls, become retf's: the fused op for one 2-D table,
    TensorFlow's own function for everything else."""
    from tensorflow.python.ops import embedding_ops

    from retf import nn
    embedding_ops.embedding_lookup_sparse = nn.embedding_lookup_sparse
    for api in (v1, v1.compat.v1):
        api.nn.embedding_lookup_sparse = nn.embedding_lookup_sparse


# DeepRec's optimizer names, provided in tf.train when the recipe sets [features] deeprec_optimizers = true.
DEEPREC_OPTIMIZERS = ("AdamAsyncOptimizer", "AdagradDecayOptimizer")
DEEPREC_MESSAGE = ("tf.train.%s is one of DeepRec's optimizers, which this TensorFlow (%s) provides only when built "
                   "with deeprec_optimizers = true in its retfwheel recipe's [features]. Fix: rebuild the wheel with that "
                   "switch, or use tf.train.AdamOptimizer / tf.train.AdagradOptimizer.")


def _deeprec_optimizers(train_module, provided, label):
    """Put DeepRec's optimizers into tf.train, or make asking for them say which switch provides them."""
    if provided:
        from retf import train
        for name in DEEPREC_OPTIMIZERS:
            setattr(train_module, name, getattr(train, name))
        return
    import types

    class TrainModule(types.ModuleType):
        def __getattr__(self, name):
            if name in DEEPREC_OPTIMIZERS:
                raise AttributeError(DEEPREC_MESSAGE % (name, label))
            raise AttributeError("module '%s' has no attribute '%s'" % (self.__name__, name))

    if type(train_module) is types.ModuleType:  # a plain module: Python 3.6 has no module __getattr__
        train_module.__class__ = TrainModule


# Keras (private, 2.x) warns on every call of the TF 1.x layer API that TF 1.15 offered without a
# word: tf.layers.*, layer.apply, layer.add_variable, and tf.layers.batch_normalization's advice
# against tf.control_dependencies(UPDATE_OPS), which is the TF 1.x idiom and works. Both Keras copies
# warn: the private keras package and TensorFlow's own tensorflow.python.keras, whose layers the
# v1 feature columns (linear_model) are. A filter's module pattern must match from the name's start.
_INTENDED_V1_WARNINGS = r"(tensorflow\.python\.)?keras\.(legacy_tf_layers|engine\.base_layer_v1)(\.|$)"
# tf.data warns that Dataset.options() in graph mode keeps "the legacy behavior", which is TF 1.15's
# (Estimator input functions call it on every dataset).
_INTENDED_V1_DATA_WARNING = "To make it possible to preserve tf.data options across serialization boundaries"


def _quiet_intended_v1_use():
    """In 1.x API mode, say no more than TF 1.15 said about using its API as intended."""
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning, module=_INTENDED_V1_WARNINGS)
    warnings.filterwarnings("ignore", message=_INTENDED_V1_DATA_WARNING, category=UserWarning)


# What 1.x API mode reports as tf.__version__, tf.VERSION and tf.version.VERSION: the API it serves.
# TF 1.x libraries branch on it (DeepCTR, DeepMatch, standalone Keras 2.3, tensorpack): reporting the
# build's 2.x version sent them down TF 2 paths, where their own TF 1.15 tests returned early or
# failed; with 1.15.5 their suites give TF 1.15.5's results test for test. No suffix: code parses it with
# StrictVersion and int(v.split(".")[2]). The build's own version stays in
# tensorflow.python.framework.versions (and tf.version.GIT_VERSION, pip, tf.sysconfig's flags).
V1_API_VERSION = "1.15.5"


def expose_v1_api(namespace, config):
    """Make the `tensorflow` module (its globals, ``namespace``) the TF 1.x API with 1.x behaviour."""
    if os.environ.get("RETF_API", "") == "2":
        return
    check_schema(config)
    from tensorflow._api.v2.compat import v1
    from tensorflow.python.util import deprecation
    with deprecation.silence():  # TF 1.15 printed no deprecation notices at import; neither do we
        v1.disable_v2_behavior()
    from tensorflow import _retf_keras_bridge
    _retf_keras_bridge.apply()  # tf.keras and tensorflow.python.keras act as TF 1.15's one Keras
    from tensorflow import _retf_tf115_export
    _retf_tf115_export.install(v1)  # SavedModels, meta graphs and frozen graphs in the form TF 1.15 reads
    for name in dir(v1):
        if not name.startswith("__"):
            namespace[name] = getattr(v1, name)
    namespace["contrib"] = _contrib()
    namespace["__version__"] = namespace["VERSION"] = V1_API_VERSION
    for api in (v1, v1.compat.v1):  # tf.version and tf.compat.v1 (a module of its own) say the same
        api.VERSION = api.version.VERSION = V1_API_VERSION
    _quiet_intended_v1_use()
    sparse_adam = switch(config, "sparse_adam")
    if sparse_adam != "dense":
        try:
            from retf import train
        except ImportError as error:
            raise ImportError("tf.train.AdamOptimizer: %s sparse Adam needs the retf op library, which this "
                              "build does not ship ([ops] build = false in its recipe): %s; unset "
                              "RETF_SPARSE_ADAM" % (sparse_adam, error)) from error
        v1.train.AdamOptimizer = train.AdamOptimizer if sparse_adam == "fused" else train.LazyAdamStandIn
    if switch(config, "fused_sparse") == "1":
        try:
            from retf import train
        except ImportError as error:
            raise ImportError("tf.train.AdagradOptimizer: fused sparse updates need the retf op library, which this "
                              "build does not ship ([ops] build = false in its recipe): %s; set RETF_FUSED_SPARSE=0"
                              % error) from error
        v1.train.AdagradOptimizer = train.AdagradOptimizer
        v1.train.FtrlOptimizer = train.FtrlOptimizer
    if switch(config, "fused_embedding") == "1":
        try:
            _route_embedding_lookups(v1)
        except ImportError as error:
            raise ImportError("tf.nn.embedding_lookup_sparse: the fused lookup needs the retf op library, which this "
                              "build does not ship ([ops] build = false in its recipe): %s; set RETF_FUSED_EMBEDDING=0"
                              % error) from error
    if switch(config, "fused_matmul_grad") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("MatMul gradients: the transposed product needs the retf op library, which this build "
                              "does not ship ([ops] build = false in its recipe): %s; set RETF_FUSED_MATMUL_GRAD=0"
                              % error) from error
        ops.route_weight_gradients()
    if switch(config, "fused_concat_grad") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("concat gradients: retf's kernel needs the retf op library, which this build does not "
                              "ship ([ops] build = false in its recipe): %s; set RETF_FUSED_CONCAT_GRAD=0"
                              % error) from error
        ops.route_pair_concat_gradients()
    if switch(config, "fast_decode_csv") == "1":
        try:
            from retf import ops
        except ImportError as error:
            raise ImportError("DecodeCSV: retf's kernel needs the retf op library, which this build does not ship "
                              "([ops] build = false in its recipe): %s; set RETF_FAST_DECODE_CSV=0" % error) from error
        try:
            ops.use_fast_decode_csv()
        except (OSError, AttributeError) as error:  # the library not loaded, or one without the kernel
            raise ImportError("DecodeCSV: cannot register retf's kernel from the retf op library: %s\nFix: reinstall "
                              "this wheel; or set RETF_FAST_DECODE_CSV=0 to keep TensorFlow's kernel" % error) from error
    # the build's choice even with RETF_OPS=0: then using one says the op library is off, not that it is missing
    _deeprec_optimizers(v1.train, config["features"]["deeprec_optimizers"]["value"] == "1", config["label"])
    namespace["__all__"] = [n for n in dir(v1) if not n.startswith("_")] + ["contrib"]
