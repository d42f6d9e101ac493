"""Running code right after a module loads, with the module's own loader; and modules whose code runs on first
use."""

import sys


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
            spec.loader = Then(spec.loader, self.then)
        return spec


class Then(object):
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


def after_import(name, then):
    """Run ``then(module)`` once the module ``name`` is imported (now, if it is)."""
    if name in sys.modules:
        then(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))


class _OnFirstUse(object):
    """Gives the modules ``names`` their own loader behind importlib's LazyLoader: importing one binds the module,
    and its code runs when one of its attributes is first read."""

    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        import importlib.machinery
        return run_on_first_use(importlib.machinery.PathFinder.find_spec(fullname, path))


def run_on_first_use(spec):
    """``spec`` (or None) with its loader behind importlib's LazyLoader: the module's code runs on first use of one
    of its attributes, not on import."""
    if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
        import importlib.util
        spec.loader = importlib.util.LazyLoader(spec.loader)
    return spec


def on_first_use(names, import_first=()):
    """Run the code of the modules ``names`` (not imported yet) on first use of one of their attributes. The
    packages ``import_first`` (those whose first import, from that code, would bind them as an attribute over one of
    these names) are imported now, where they exist."""
    names = [name for name in names if name not in sys.modules]
    if not names or any(isinstance(f, _OnFirstUse) for f in sys.meta_path):
        return
    import importlib
    for package in import_first:
        try:
            importlib.import_module(package)
        except ImportError:
            pass
    sys.meta_path.insert(0, _OnFirstUse(names))
