"""Patching a package's __init__.py with the bootstrap call (pure: bytes in, bytes out).

The block goes after the module docstring and the last `from __future__` import, found with ast,
between marker comments, as a function that runs once and is deleted. The package's own code then
runs in a `try` whose `finally` calls what the bootstrap returned (it pauses the garbage collector
for the import: see runtime/wheel/tensorflow/_retf/collector.py), so that call is made however the
import ends; the code is indented only where that leaves its syntax tree unchanged, which is checked.
The file's line endings are kept and the result is parsed again before it is used.
"""

from __future__ import annotations

import ast
import io
import json
import tokenize

BEGIN = "# --- retfwheel bootstrap: begin (generated; do not edit) ---"
END = "# --- retfwheel bootstrap: end ---"
OPS_BEGIN = "# --- retfwheel op library: begin (generated; do not edit) ---"
OPS_END = "# --- retfwheel op library: end ---"
API_BEGIN = "# --- retfwheel 1.x API: begin (generated; do not edit) ---"
API_END = "# --- retfwheel 1.x API: end ---"
AFTER = "# --- retfwheel bootstrap: after the import (generated; do not edit) ---"
RESUME = "_retf_resume"  # what the bootstrap returned: None, or the call the finally makes


class InjectionError(ValueError):
    pass


def bootstrap_block(module: str, config: dict) -> str:
    """The injected lines (without line endings normalised): call ``module``.run with ``config``."""
    literal = json.dumps(config, sort_keys=True)
    return "\n".join(
        [
            BEGIN,
            "def _retf_bootstrap():",
            "    import os as _os",
            "    if _os.environ.get('RETF_BOOTSTRAP', '1') == '0':",
            "        return None",
            f"    from {module} import run as _run",
            f"    return _run(_os.path.dirname(_os.path.abspath(__file__)), {literal})",
            "",
            "",
            f"{RESUME} = _retf_bootstrap()",
            "del _retf_bootstrap",
            END,
        ]
    )


def _guard_lines() -> list[str]:
    """The `finally` that ends what the bootstrap began, however the package's code ends."""
    return ["finally:", "    " + AFTER, f"    if {RESUME} is not None:", f"        {RESUME}()", f"    del {RESUME}"]


def api_block(module: str, config: dict) -> str:
    """The lines appended to tensorflow/__init__.py that make the package expose the 1.x API."""
    return _finishing_block(API_BEGIN, API_END, "_retf_v1_api", module, "expose_v1_api", config)


def ops_block(module: str, config: dict) -> str:
    """The lines appended to tensorflow/__init__.py that register the retf op library's kernels."""
    return _finishing_block(OPS_BEGIN, OPS_END, "_retf_ops", module, "register_ops", config)


def _finishing_block(begin: str, end: str, function: str, module: str, call: str, config: dict) -> str:
    """A block run at the end of the package's __init__: ``module``.``call``(globals(), config).

    config holds strings, numbers and lists only: its JSON text is the Python literal (JSON's true,
    false and null are not Python).
    """
    if any(isinstance(value, bool) or value is None for value in config.values()):
        raise ValueError(f"{call}: the block's settings must be strings, numbers or lists, got {config!r}")
    literal = json.dumps(config, sort_keys=True)
    return "\n".join(
        [
            begin,
            f"def {function}():",
            f"    from {module} import {call} as _call",
            f"    _call(globals(), {literal})",
            "",
            "",
            f"{function}()",
            f"del {function}",
            end,
        ]
    )


def append(source: bytes, block: str, where: str) -> bytes:
    """``source`` with ``block`` added after its last line (line endings kept), re-parsed."""
    text = source.decode("utf-8")
    marker = block.split("\n", 1)[0]
    if marker in text:
        raise InjectionError(f"{where}: already carries the block {marker!r}")
    newline = "\r\n" if "\r\n" in text else "\n"
    if text and not text.endswith(("\n", "\r")):
        text += newline
    result = text + newline + "".join(line + newline for line in block.split("\n"))
    try:
        ast.parse(result, where)
    except SyntaxError as exc:  # pragma: no cover - would be a bug in the block
        raise InjectionError(f"{where}: patched file does not parse ({exc.msg}, line {exc.lineno})") from exc
    return result.encode("utf-8")


def inject(source: bytes, block: str, where: str) -> bytes:
    """``source`` with ``block`` inserted before its first statement that is not docstring/__future__."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InjectionError(f"{where}: not UTF-8") from exc
    if BEGIN in text:
        raise InjectionError(f"{where}: already carries a retfwheel bootstrap")
    try:
        tree = ast.parse(text, where)
    except SyntaxError as exc:
        raise InjectionError(f"{where}: does not parse ({exc.msg}, line {exc.lineno})") from exc
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    index = _insertion_line(tree, lines)
    injected = "".join(line + newline for line in block.split("\n"))
    before = "".join(lines[:index])
    if before and not before.endswith(("\n", "\r")):
        before += newline
    rest = "".join(lines[index:])
    if rest and not rest.endswith(("\n", "\r")):
        rest += newline
    try:
        statements = ast.parse(rest).body  # whole statements: the text parsed, and rest starts at one
    except SyntaxError as exc:  # pragma: no cover - would be a bug in the placement
        raise InjectionError(f"{where}: its code after line {index} does not parse on its own ({exc.msg})") from exc
    guarded = "try:" + newline + _indented(rest) + ("" if statements else "    pass" + newline)
    guarded += "".join(line + newline for line in _guard_lines())
    result = before + injected + guarded
    try:
        patched = ast.parse(result, where)
    except SyntaxError as exc:  # pragma: no cover - would be a bug in the placement
        raise InjectionError(f"{where}: patched file does not parse ({exc.msg}, line {exc.lineno})") from exc
    last = patched.body[-1]
    kept = last.body if statements and isinstance(last, ast.Try) else []
    if _tree(kept) != _tree(statements):
        raise InjectionError(f"{where}: its code could not be placed under the bootstrap's `try` unchanged")
    return result.encode("utf-8")


def _tree(statements: list) -> str:
    return ast.dump(ast.Module(body=statements, type_ignores=[]), include_attributes=False)


def _indented(text: str) -> str:
    """``text`` (whole statements) one level deeper: every line but those that start inside a token (a multi-line
    string's), which are kept byte for byte; a tab where the code indents with tabs, else four spaces."""
    inside: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        inside.update(range(token.start[0] + 1, token.end[0] + 1))
    lines = io.StringIO(text).readlines()  # numbered as tokenize numbers them
    code = [line for number, line in enumerate(lines, 1) if number not in inside and line.strip()]
    prefix = "\t" if any("\t" in line[:len(line) - len(line.lstrip())] for line in code) else "    "
    return "".join(line if number in inside or not line.strip() else prefix + line
                   for number, line in enumerate(lines, 1))


def _is_future_import(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.ImportFrom) and statement.module == "__future__"


def _insertion_line(tree: ast.Module, lines: list[str]) -> int:
    """0-based line index where the block goes."""
    body = tree.body
    position = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        position = 1
    while position < len(body) and _is_future_import(body[position]):
        position += 1
    if position:
        return body[position - 1].end_lineno or body[position - 1].lineno
    if not body:
        return len(lines)
    first = body[0]
    decorators = getattr(first, "decorator_list", [])
    return min([first.lineno] + [d.lineno for d in decorators]) - 1


def injected_config(source: bytes, begin: str = BEGIN, call: str = "_run") -> dict | None:
    """The settings literal a block passes to the bootstrap (the bootstrap block's by default), or None."""
    text = source.decode("utf-8", "replace")
    if begin not in text:
        return None
    block = text[text.index(begin):]
    end = block.find("# --- retfwheel", len(begin))
    try:
        tree = ast.parse(block[:end] if end > 0 else block)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == call and len(node.args) == 2:
            value = ast.literal_eval(node.args[1])
            return value if isinstance(value, dict) else None
    return None
