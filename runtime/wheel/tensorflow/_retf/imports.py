"""Running code right after a module loads, with the module's own loader."""

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
