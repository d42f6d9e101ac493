"""Rewriting the core metadata files of a wheel (METADATA, WHEEL), touching only what must change."""

from __future__ import annotations


def _split_headers(data: bytes) -> tuple[list[bytes], bytes]:
    """Header lines (with their line endings) and the rest (blank line + body)."""
    lines = data.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if not line.strip():
            return lines[:index], b"".join(lines[index:])
    return lines, b""


def _header_name(line: bytes) -> bytes | None:
    if line[:1] in (b" ", b"\t") or b":" not in line:
        return None  # continuation line
    return line.split(b":", 1)[0].strip().lower()


def rewrite_headers(data: bytes, replace: dict[str, str], drop: set[str] | frozenset[str] = frozenset(),
                    append: list[tuple[str, str]] | tuple[()] = ()) -> bytes:
    """Replace the first header of each name in ``replace``, remove headers named in ``drop``
    (with their continuation lines), append ``append``; the body and line endings stay as they are."""
    headers, rest = _split_headers(data)
    newline = b"\r\n" if headers and headers[0].endswith(b"\r\n") else b"\n"
    wanted = {k.lower().encode(): v for k, v in replace.items()}
    dropped = {d.lower().encode() for d in drop}
    out: list[bytes] = []
    skipping = False
    done: set[bytes] = set()
    for line in headers:
        name = _header_name(line)
        if name is None:
            if not skipping:
                out.append(line)
            continue
        skipping = name in dropped or name in done
        if name in wanted and name not in done:
            out.append(name_case(line) + b": " + wanted[name].encode("utf-8") + newline)
            done.add(name)
            skipping = True
            continue
        if not skipping:
            out.append(line)
    for key, value in append:
        out.append(f"{key}: {value}".encode("utf-8") + newline)
    missing = set(wanted) - done
    if missing:
        raise ValueError(f"no header {', '.join(sorted(m.decode() for m in missing))}")
    return b"".join(out) + rest


def name_case(line: bytes) -> bytes:
    return line.split(b":", 1)[0].strip()
