"""Pointing Python sources at privately named copies of modules (``wrapt`` -> ``tensorflow._vendor.wrapt``).

A wheel that ships its own copy of a module the environment also has cannot use the module's name without taking it
from the user. Each renamed module is found with the AST and edited as text, so formatting, comments and
docstrings stay as they are:

- ``import X`` -> ``from P import X``; ``import X as Y`` -> ``from P import X as Y``;
  ``import X.sub as Y`` -> ``import P.X.sub as Y``; ``from X[.sub] import ...`` -> ``from P.X[.sub] import ...``.
- a string naming the module where code imports by name: the module argument of ``LazyLoader``/``_LazyLoader``
  (third), ``importlib.import_module`` and ``lazy_load`` (first), the value of a ``_*_module`` or
  ``_*_package`` assignment, and a class's ``'__module__'`` in a dict (protoc's generated messages).

Everything else that names a renamed module fails (RenameError, with file and line) unless it is one of the kinds
that must keep the public name (``KEEP_CALLS``: API export names, deprecation wrappers' names, autograph's rules about
the user's own modules, attribute, logger and summary names, gRPC service names; an ``api_name=`` argument; a
``*_NAME`` constant; a string compared with ``==``/``in``: a value, never an import) or listed in ``keep`` by the
caller. ``import X.sub`` (which binds ``X``) and
``import a, X`` cannot be rewritten one for one and fail too. Relative imports never name a top-level module and are
left alone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Mapping

# Calls whose string arguments are public names, not imports: they keep the module's own name (API export names,
# attribute names, summary and logger names, patterns, gRPC service names).
KEEP_CALLS = frozenset({"keras_export", "tf_export", "estimator_export", "TFModuleWrapper", "DoNotConvert",
                        "_is_known_loaded_type", "getLogger", "find", "join", "setattr", "getattr", "hasattr",
                        "delattr", "keras_model_summary", "compile", "method_handlers_generic_handler"})
# Keyword arguments whose value is a public name: an API's (get_canonical_name_for_symbol(..., api_name='keras')),
# a program's (argparse's prog=, IPython's magic_name=).
KEEP_KEYWORDS = frozenset({"api_name", "prog", "magic_name"})
# Constants naming an API or a key (tf_export's KERAS_API_NAME = 'keras', tensorboard's _WSGI_KEY).
_KEPT_ASSIGNMENT = re.compile(r"^_?[A-Z][A-Z_]*_(NAME|KEY)$")
# Strings that stay in one file ({its path inside its distribution: (strings, why)}), where no rule above tells.
KEPT_STRINGS = {
    "tensorboard/manager.py": (("tensorboard",), "the command the notebook extension starts"),
    "tensorboard/uploader/auth.py": (("tensorboard",), "a folder name of the uploader's stored credentials"),
    "tensorflow/tools/common/public_api.py": (("tensorboard",), "a module the API documentation generator skips"),
}
# Calls whose argument at the given position is a module to import.
IMPORT_CALLS = {"LazyLoader": 2, "_LazyLoader": 2, "import_module": 0, "lazy_load": 0}
_ASSIGNED_MODULE = re.compile(r"^_\w*_(module|package)$")


class RenameError(ValueError):
    pass


# Strings that change in one file ({its path inside its distribution: ({string: replacement}, why)}): names a private
# copy must not share with the environment's copy, beyond its modules. The build fails if one is not found.
PRIVATE_STRINGS = {
    "tensorboard/default.py": ({'"tensorboard_plugins"': '"tensorflow._vendor.tensorboard_plugins"'},
                               "the entry-point group TensorBoard loads plugins from: the environment's (TensorBoard "
                               "1.15's projector) are not plugins of the private copy"),
}


def replace_private_strings(source: str, path: str, replacements: Mapping[str, str]) -> str:
    """``source`` with each string literal of ``replacements`` (as written, quotes included) replaced, each exactly
    once (RenameError otherwise: the file changed)."""
    for old, new in replacements.items():
        if source.count(old) != 1:
            raise RenameError(f"{path}: expected {old} once, found it {source.count(old)} times")
        source = source.replace(old, new)
    return source


def rename_imports(source: str, path: str, renames: Mapping[str, str], keep: Collection[str] = ()) -> str:
    """``source`` (the file ``path``) with every use of a module in ``renames`` ({name: private parent}) pointed at
    its private name; ``keep``: strings that stay as they are wherever no rule places them."""
    try:
        tree = ast.parse(source, path)
    except SyntaxError as error:
        raise RenameError(f"{path}:{error.lineno}: cannot parse: {error.msg}") from None
    edits: list[tuple[int, int, str]] = []  # (start offset, end offset, replacement)
    offsets = _line_offsets(source)
    handled: set[int] = set()  # ids of string nodes rewritten or kept on purpose
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            edits.extend(_import(node, source, offsets, path, renames))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            edits.extend(_import_from(node, source, offsets, renames))
        elif isinstance(node, ast.Call):
            edits.extend(_call(node, source, offsets, renames, handled))
        elif isinstance(node, ast.Assign) and _assigns_module_name(node):
            edits.extend(_string(node.value, source, offsets, renames, handled))
        elif isinstance(node, ast.Assign) and _assigns(node, _KEPT_ASSIGNMENT):
            handled.add(id(node.value))
        elif isinstance(node, ast.Compare):
            handled.update(id(s) for part in (node.left, *node.comparators) for s in ast.walk(part))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "__module__":
                    edits.extend(_string(value, source, offsets, renames, handled))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in handled
                and node.value not in keep and _renamed(node.value, renames)):
            raise RenameError(f"{path}:{node.lineno}: the string {node.value!r} names a renamed module in a place "
                              "that is neither an import by name nor a public name; rewrite or keep it explicitly")
    text = source
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _line_offsets(source: str) -> list[int]:
    offsets, total = [0], 0
    for line in source.splitlines(keepends=True):
        total += len(line.encode("utf-8"))
        offsets.append(total)
    return offsets


def _span(node: ast.AST, source: str, offsets: list[int]) -> tuple[int, int]:
    """Character offsets of ``node`` in ``source`` (the AST counts UTF-8 bytes within a line)."""
    encoded = source.encode("utf-8")
    start = offsets[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
    end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
    return len(encoded[:start].decode("utf-8")), len(encoded[:end].decode("utf-8"))


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _renamed(value: str, renames: Mapping[str, str]) -> bool:
    return _top(value) in renames and (value == _top(value) or value[len(_top(value))] == ".") \
        and all(part.isidentifier() for part in value.split("."))


def _import(node: ast.Import, source: str, offsets: list[int], path: str, renames: Mapping[str, str]):
    ours = [alias for alias in node.names if _top(alias.name) in renames]
    if not ours:
        return []
    if len(node.names) > 1:
        raise RenameError(f"{path}:{node.lineno}: 'import' of several modules with a renamed one among them; "
                          "split the statement")
    alias = ours[0]
    parent = renames[_top(alias.name)]
    if "." not in alias.name:
        text = f"from {parent} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
    elif alias.asname:
        text = f"import {parent}.{alias.name} as {alias.asname}"
    else:
        raise RenameError(f"{path}:{node.lineno}: 'import {alias.name}' binds '{_top(alias.name)}' itself; "
                          f"write 'import {alias.name} as ...' or 'from ... import ...'")
    start, end = _span(node, source, offsets)
    return [(start, end, text)]


def _import_from(node: ast.ImportFrom, source: str, offsets: list[int], renames: Mapping[str, str]):
    assert node.module is not None
    if _top(node.module) not in renames:
        return []
    start, end = _span(node, source, offsets)
    statement = source[start:end]
    found = re.match(r"from(\s+)" + re.escape(node.module) + r"\b", statement)
    assert found is not None, statement
    replacement = f"from{found.group(1)}{renames[_top(node.module)]}.{node.module}"
    return [(start, start + found.end(), replacement)]


def called_name(node: ast.Call) -> str:
    """The name a call calls: ``f`` of ``f(...)`` and of ``m.f(...)``."""
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def _call(node: ast.Call, source: str, offsets: list[int], renames: Mapping[str, str], handled: set[int]):
    name = called_name(node)
    arguments = [*node.args, *(k.value for k in node.keywords)]
    strings = [a for a in arguments if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if name in KEEP_CALLS:  # its strings, in lists too (keras_export(v1=["keras.layers.Dense"])), are public names
        handled.update(id(s) for a in arguments for s in ast.walk(a) if isinstance(s, ast.Constant))
        return []
    handled.update(id(k.value) for k in node.keywords if k.arg in KEEP_KEYWORDS)
    position = IMPORT_CALLS.get(name)
    if position is None or len(node.args) <= position:
        return []
    handled.update(id(s) for s in strings if s is not node.args[position])  # LazyLoader's local name, ...
    return _string(node.args[position], source, offsets, renames, handled)


def _assigns_module_name(node: ast.Assign) -> bool:
    return _assigns(node, _ASSIGNED_MODULE)


def _assigns(node: ast.Assign, pattern: re.Pattern) -> bool:
    return len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and bool(pattern.match(node.targets[0].id))


def _string(node: ast.expr, source: str, offsets: list[int], renames: Mapping[str, str], handled: set[int]):
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and _renamed(node.value, renames)):
        return []
    start, end = _span(node, source, offsets)
    literal = source[start:end]
    quote = re.match(r"[rRuU]?('''|\"\"\"|'|\")", literal)
    if quote is None or not literal[quote.end():].startswith(node.value + literal[quote.start(1):quote.end()]):
        return []  # an implicitly joined or escaped literal: the final check reports it
    handled.add(id(node))
    return [(start + quote.end(), start + quote.end(), renames[_top(node.value)] + ".")]
