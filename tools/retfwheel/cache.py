"""The cache's one owner: where each kind of entry lives, how it is made, published, checked and removed.

An entry is one file or one folder under ``<cache>/<kind>/`` (KINDS). Every entry is

- **made by one process at a time**: builds sharing a cache (CI jobs on one machine) take the entry's lock
  (flock on ``.<name>.lock`` beside it); the second waits, then uses what the first made. The lock nests
  within a process.
- **published whole**: a file or an unpacked folder is made under a temporary name (``.<name>.<pid>.tmp``)
  and renamed into place; a venv, an environment or a build root, which cannot move once made (their paths
  are written into them), is made in place under the lock. Either way the entry counts only once its
  manifest ``.<name>.retfwheel-entry.json`` (beside it) is written, last and itself atomically: an entry
  without one (cut short by a kill, or made by a retfwheel before manifests) is made again.
- **recorded**: the manifest holds the cache SCHEMA and the retfwheel version that made the entry, its kind,
  and for every file its size and sha256 (a symlink: its target). Files under ``__pycache__`` and ``*.pyc``
  are left out (Python writes them when the entry is used), and so are a build root's scratch folders
  (``build``, ``tmp``, ``proc``, ``dev``, ``sys``, ``run``).
- **checked when used** (``check``): the manifest's schema and kind must match; the entry's files must be
  exactly the recorded ones with the recorded sizes and link targets; and the sha256 is recomputed of
  - every file, for a file entry and for ``inputs``, ``built`` and ``sdk`` (the SDK only when the op library
    is compiled);
  - for ``venvs`` and ``environments`` (~1 GB, used on every verify): ``pyvenv.cfg``, the interpreters in
    ``bin/`` (a venv's are symlinks: their targets are compared), every ``*.dist-info/RECORD``, any
    ``libstdc++*`` and retfwheel's own markers;
  - for ``roots``: the compilers (``*gcc*``, ``*g++*``, ``cc1plus``), ``libstdc++``, ``libc`` and the
    dynamic loader.
  A byte changed elsewhere in those three kinds, without a change of size, is not seen on use;
  ``retfwheel cache prune`` recomputes every recorded sha256 and removes what no longer matches.
- **made again when it fails the check**: its maker says so through the progress hook (which file changed,
  or that it has no manifest or an older schema's), removes it and makes or fetches it again. A damaged
  entry is never used.

Scratch folders for making things (``work_folder``: downloads, sdist builds, apt, op compiles) are
``.build-``/``.dl-``/``.apt-``/``.ops-``/``.inputs-`` folders; one a killed run leaves is removed by
``retfwheel cache prune`` once a day old, like a killed maker's ``.<name>.<pid>.tmp`` (which the entry's
next maker also removes at once).

The retfwheel version is recorded, not required: entries made by another version with the same SCHEMA are
used (what makes their content differ is in their keys). SCHEMA is raised whenever the layout or the
manifest changes, and every entry of an older schema is then made again.
"""


from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from retfwheel import __version__
from retfwheel.errors import InputFileError, OutputError

Progress = Callable[[str], None]

MARKER = ".retfwheel-cache"  # in every folder the tool has used as its cache: prune and clear need it


def ensure_writable(root: Path) -> Path:
    """``root``, made if missing and marked as a retfwheel cache; OutputError, with what to do, if this user
    cannot write there."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        if not (root / MARKER).exists():
            (root / MARKER).write_text("retfwheel's download and build cache (`retfwheel cache` shows it)\n")
    except OSError as exc:
        raise OutputError(f"{root}: the cache folder cannot be written ({exc.strerror or exc})",
                          hint="pass --cache-dir DIR or set RETFWHEEL_CACHE_DIR to a folder you can write") from exc
    return root


_HELD: dict[tuple[Path, int], int] = {}  # locks held, by lock file and thread: taking one again nests, never waits


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold the lock of the cache entry ``entry`` (a file or folder, which need not exist yet).

    Re-entrant within a thread (code holding an entry's lock may call code that takes it again): flock
    would make a second open of the lock file wait for the first forever. Another thread, like another process,
    opens the file again and waits.
    """
    entry.parent.mkdir(parents=True, exist_ok=True)
    lock = (entry.parent / f".{entry.name}.lock").resolve()
    held = (lock, threading.get_ident())
    if held in _HELD:
        _HELD[held] += 1
        try:
            yield
        finally:
            _HELD[held] -= 1
        return
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _HELD[held] = 1
        yield
    finally:
        _HELD.pop(held, None)
        os.close(fd)


SCHEMA = 1  # the manifest's and layout's version: entries recorded by another are made again
MANIFEST = ".retfwheel-entry.json"  # suffix of the manifest beside each entry: .<name>.retfwheel-entry.json
MISSING = "is missing"  # check()'s answer for an entry that was never made: nothing to report


def entry_path(root: Path, kind: str, *parts: str) -> Path:
    """Where the entry ``parts`` of ``kind`` lives in the cache at ``root``."""
    assert kind in KINDS, f"not a kind of cache entry: {kind}"
    return root.joinpath(kind, *parts)


def work_folder(root: Path, prefix: str, kind: str | None = None) -> Path:
    """A new scratch folder in the cache (or in its ``kind`` folder) for making something: one a killed run leaves
    is removed by `cache prune` a day later (STAGING_PREFIXES)."""
    assert prefix in STAGING_PREFIXES, f"not a scratch prefix: {prefix}"
    folder = root / kind if kind else root
    folder.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=folder))


def manifest_of(entry: Path) -> Path:
    return entry.parent / f".{entry.name}{MANIFEST}"


def scratch_path(entry: Path) -> Path:
    """A temporary name beside ``entry`` to make it under (this process's own); publish it with
    ``publish_file`` or ``publish_folder``."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    return entry.parent / f".{entry.name}.{os.getpid()}.tmp"


def _ignored(kind: str, parts: tuple[str, ...]) -> bool:
    if "__pycache__" in parts or parts[-1].endswith(".pyc"):
        return True
    return kind == "roots" and parts[0] in ("build", "tmp", "proc", "dev", "sys", "run")


def _hashed_on_use(kind: str, parts: tuple[str, ...]) -> bool:
    name = parts[-1]
    if kind in ("venvs", "environments"):
        return (parts == ("pyvenv.cfg",) or (parts[0] == "bin" and name.startswith("python"))
                or (name == "RECORD" and len(parts) > 1 and parts[-2].endswith(".dist-info"))
                or name.startswith(("libstdc++", ".retfwheel-")))
    if kind == "roots":
        return "gcc" in name or "g++" in name or name == "cc1plus" or name.startswith(("libstdc++.so", "libc.so", "ld-linux"))
    return True


def _listing(entry: Path, kind: str) -> dict[str, dict]:
    """{relative path: {"size": n} or {"link": target}} of the entry's files ("" for a file entry)."""
    if not entry.is_dir() or entry.is_symlink():
        return {"": {"size": entry.stat().st_size}}
    found: dict[str, dict] = {}
    for folder, dirs, files in os.walk(entry):
        base = Path(folder).relative_to(entry).parts
        for name in list(dirs):
            parts = (*base, name)
            if _ignored(kind, parts):
                dirs.remove(name)
            elif os.path.islink(os.path.join(folder, name)):
                found["/".join(parts)] = {"link": os.readlink(os.path.join(folder, name))}
        for name in files:
            parts = (*base, name)
            path = os.path.join(folder, name)
            if _ignored(kind, parts):
                continue
            if os.path.islink(path):
                found["/".join(parts)] = {"link": os.readlink(path)}
            elif os.path.isfile(path):
                found["/".join(parts)] = {"size": os.lstat(path).st_size}
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def seal(entry: Path, kind: str) -> None:
    """Record the entry made at ``entry`` (its manifest, written last): from now on it is used, and checked."""
    files = _listing(entry, kind)
    for rel, item in files.items():
        if "size" in item:
            item["sha256"] = _sha256(entry / rel if rel else entry)
    document = {"schema": SCHEMA, "tool": __version__, "kind": kind, "files": files}
    manifest = manifest_of(entry)
    temporary = manifest.with_name(f"{manifest.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, sort_keys=True) + "\n")
    os.replace(temporary, manifest)


def check(entry: Path, kind: str, deep: bool = False) -> str | None:
    """None if ``entry`` is whole and recorded by this SCHEMA, else why not (MISSING if it was never made).

    What is hashed: see the module's docstring; ``deep`` hashes every recorded file.
    """
    manifest = manifest_of(entry)
    if not manifest.exists():
        return "has no manifest (made by an older retfwheel, or cut short)" if os.path.lexists(entry) else MISSING
    try:
        document = json.loads(manifest.read_text())
        schema, recorded_kind, files = document["schema"], document["kind"], document["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return "has an unreadable manifest"
    if schema != SCHEMA:
        return f"was recorded by cache schema {schema} (this retfwheel's is {SCHEMA})"
    if recorded_kind != kind:
        return f"is recorded as a {recorded_kind} entry, not {kind}"
    if not os.path.lexists(entry):
        return "has lost its content"
    try:
        present = _listing(entry, kind)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    for rel in sorted(set(files) | set(present)):
        shown = rel or entry.name
        if rel not in present:
            return f"is damaged: {shown} is gone"
        if rel not in files:
            return f"is damaged: it holds {shown}, which it did not when made"
        want, have = files[rel], present[rel]
        if want.get("link") != have.get("link") or want.get("size") != have.get("size"):
            return f"is damaged: {shown} changed"
    for rel, want in sorted(files.items()):
        if "sha256" in want and (deep or not rel or _hashed_on_use(kind, tuple(rel.split("/")))):
            try:
                if _sha256(entry / rel if rel else entry) != want["sha256"]:
                    return f"is damaged: {rel or entry.name} changed (its sha256 is not the recorded one)"
            except OSError as exc:
                return f"cannot be read ({exc.strerror or exc})"
    return None


def discard(entry: Path) -> None:
    """Remove ``entry``, its manifest (first: a removal cut short leaves an entry that is made again) and what
    killed makers of it left under temporary names. Call with the entry's lock held."""
    manifest_of(entry).unlink(missing_ok=True)
    _remove(entry)
    if entry.parent.is_dir():
        for left in entry.parent.glob(f".{glob_escape(entry.name)}.*.tmp"):
            _remove(left)


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def usable(entry: Path, kind: str, progress: Progress, what: str, redo: str) -> bool:
    """Whether ``entry`` can be used as it is; if not, it is removed (the caller then makes it again) and, unless it
    simply was never made, ``progress`` says why: "the cached <what> <entry> <reason>; <redo>". Hold its lock."""
    reason = check(entry, kind)
    if reason is None:
        return True
    if reason != MISSING:
        progress(f"the cached {what} {entry} {reason}; {redo}")
    discard(entry)
    return False


def publish_file(entry: Path, kind: str, content: bytes | Path) -> Path:
    """Publish ``content`` (bytes, or a file to move) as the file entry ``entry``: whole, then recorded."""
    manifest_of(entry).unlink(missing_ok=True)
    temporary = scratch_path(entry)
    if isinstance(content, Path):
        shutil.move(str(content), str(temporary))
    else:
        temporary.write_bytes(content)
    os.chmod(temporary, 0o644)
    os.replace(temporary, entry)
    seal(entry, kind)
    return entry


def publish_folder(entry: Path, kind: str, made: Path) -> Path:
    """Publish the folder ``made`` (normally ``scratch_path(entry)``) as the entry ``entry``: renamed, then recorded."""
    manifest_of(entry).unlink(missing_ok=True)
    _remove(entry)
    os.rename(made, entry)
    seal(entry, kind)
    return entry


def read_verified(entry: Path, kind: str) -> bytes | None:
    """The content of the file entry ``entry`` if it checks whole (see ``check``), else None."""
    return entry.read_bytes() if check(entry, kind) is None else None

# What each top folder of the cache holds (`retfwheel cache`). Only these are ever pruned or cleared:
# a cache folder pointed at something else by mistake keeps everything that is not one of them.
KINDS: dict[str, str] = {
    "inputs": "input wheels downloaded for recipes' [input]",
    "files": "locked files (wheels, sdists), by sha256",
    "built": "locked sdists built into wheels for a target",
    "sdk": "input wheels' headers and framework libraries",
    "ops": "compiled op libraries",
    "venvs": "target interpreters' venvs that build sdists and resolve locks",
    "environments": "the emulated old environments `verify` and `run` use, and their old libstdc++",
    "roots": "Debian build roots (debootstrap) for the op library",
    "debian": "Debian packages (the system libstdc++ of environments, a vendored libstdc++)",
    "scans": "ELF analyses of input wheels",
    "renamed": "Python modules rewritten for [deps] private_names, by the wheels they come from",
    "probes": "the GLIBCXX_3.4.29 probe extension `verify` loads",
    "locks": "locks made by `retfwheel lock` for built-in recipes",
}
STAGING_PREFIXES = (".build-", ".ops-", ".inputs-", ".dl-", ".apt-")  # scratch folders; left behind only by killed runs
STAGING_AGE = 86400.0  # seconds: a scratch folder this old belongs to no running build


@dataclass(frozen=True)
class Usage:
    kind: str
    entries: int
    bytes: int
    description: str


def usage(root: Path) -> list[Usage]:
    """Entries and size of each kind in the cache at ``root``."""
    found = []
    for kind, description in KINDS.items():
        folder = root / kind
        if folder.is_dir():
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
            found.append(Usage(kind, len(entries(root, kind)), size, description))
    return found


def _require_cache(root: Path) -> None:
    if not (root / MARKER).is_file():
        raise InputFileError(f"{root}: not a folder retfwheel has used as its cache (no {MARKER}); nothing removed",
                             hint="pass the cache folder with --cache-dir, or set RETFWHEEL_CACHE_DIR")


NESTED = ("files", "debian", "ops")  # kinds whose entries are <kind>/<key>/<file>; the others' are <kind>/<name>


def entries(root: Path, kind: str) -> list[Path]:
    """The entries of ``kind`` in the cache at ``root`` (made or half-made), not their locks or manifests."""
    folder = root / kind
    if not folder.is_dir():
        return []
    tops = [p for p in sorted(folder.iterdir()) if not p.name.startswith(".")]
    if kind not in NESTED:
        return tops
    return [p for top in tops if top.is_dir() for p in sorted(top.iterdir()) if not p.name.startswith(".")]


def prune(root: Path, older_than_days: float | None = None) -> list[Path]:
    """Remove what killed runs left half-made, every entry that fails a full check (each recorded sha256
    recomputed; entries without a manifest included), and (with ``older_than_days``) entries not made or
    remade for that long; each under its lock, so a running build's entries are never touched."""
    _require_cache(root)
    removed: list[Path] = []
    now = time.time()
    cutoff = None if older_than_days is None else now - older_than_days * 86400
    for folder in [root] + [root / kind for kind in KINDS] + [top for kind in NESTED for top in _tops(root / kind)]:
        if not folder.is_dir():
            continue
        for left in sorted(folder.iterdir()):
            if (left.name.startswith(STAGING_PREFIXES) or left.name.endswith(".tmp")) \
                    and now - left.lstat().st_mtime > STAGING_AGE:
                _remove(left)
                removed.append(left)
    for kind in KINDS:
        for entry in entries(root, kind):
            with entry_lock(entry):
                reason = check(entry, kind, deep=True)
                made = manifest_of(entry).stat().st_mtime if reason is None else now
                if reason is not None or (cutoff is not None and made < cutoff):
                    discard(entry)
                    removed.append(entry)
    return removed


def _tops(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")] if folder.is_dir() else []

def clear(root: Path) -> list[Path]:
    """Remove every kind of entry from the cache at ``root`` (nothing else there)."""
    _require_cache(root)
    removed = []
    for kind in KINDS:
        folder = root / kind
        if folder.is_dir():
            _remove(folder)
            removed.append(folder)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
