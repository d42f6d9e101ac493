"""The C++ runtime: a libstdc++ that TensorFlow's native code can run on, in this process."""

import os
import re
import struct
import sys

_GLIBCXX = re.compile(rb"GLIBCXX_3\.4\.(\d+)\x00")
_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                 "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
SONAME = "libstdc++.so.6"
# A GLIBCXX version this process's libstdc++ provides, once prepare() has made sure of it (at least ``needed``; the
# version of the one found mapped): () before, and without the bootstrap.
PROVIDED = ()

_VERDEF = 0x6ffffffd  # SHT_GNU_verdef: the section of the symbol versions a library defines


def defined_versions(path):
    """The symbol versions the ELF library at ``path`` defines, from its version definitions (a few hundred bytes
    and their names: GLIBCXX_3.4.N of a libstdc++), or None where it has none to read that way (not a 64-bit
    little-endian ELF file, no such section, unreadable)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4:6] != b"\x02\x01":
                return None
            section_table = struct.unpack_from("<Q", head, 0x28)[0]
            entry_size, count = struct.unpack_from("<HH", head, 0x3A)
            if entry_size != 64 or not count:
                return None
            handle.seek(section_table)
            table = handle.read(64 * count)
            sections = [struct.unpack_from("<IIQQQQII", table, 64 * i) for i in range(count)]
            found = [s for s in sections if s[1] == _VERDEF]
            if not found:
                return None
            _, _, _, _, offset, size, strings, entries = found[0]
            strings_at = sections[strings][4]
            handle.seek(offset)
            data = handle.read(size)
            names, at = [], 0
            for _ in range(entries):
                aux, following = struct.unpack_from("<II", data, at + 12)
                handle.seek(strings_at + struct.unpack_from("<I", data, at + aux)[0])
                names.append(handle.read(64).split(b"\x00", 1)[0].decode("ascii", "replace"))
                if not following:
                    break
                at += following
            return names
    except (OSError, struct.error, IndexError):
        return None


def _scan(path):
    """The whole file's bytes, for a library without version definitions to read; None if unreadable."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def glibcxx_version(path):
    """Newest GLIBCXX_3.4.N the library at ``path`` defines, as a tuple, or None."""
    names = defined_versions(path)
    if names is not None:
        found = [int(n[12:]) for n in names if n.startswith("GLIBCXX_3.4.") and n[12:].isdigit()]
    else:
        data = _scan(path)
        found = [int(m.group(1)) for m in _GLIBCXX.finditer(data)] if data else []
    return (3, 4, max(found)) if found else None


def provides(path, version):
    """Whether the library at ``path`` defines GLIBCXX_``version`` (so every older one too); False if unreadable."""
    name = "GLIBCXX_%d.%d.%d" % tuple(version)
    names = defined_versions(path)
    if names is not None:
        return name in names
    data = _scan(path)
    return data is not None and (name.encode() + b"\x00") in data


def mapped_runtimes():
    """Paths of every libstdc++ already mapped into this process."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return paths
    for line in lines:  # after TensorFlow loads, about a thousand: only libstdc++'s are split
        if "/libstdc++.so" in line:
            path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
            if "/libstdc++.so" in path and path not in paths:
                paths.append(path)
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


def text(version):
    return "GLIBCXX_" + ".".join(str(p) for p in version) if version else "unknown version"


def prepare(vendored, needed, wanted, config, log):
    """Make a libstdc++ that TensorFlow's own native code can run on this process's, or raise ImportError.

    ``needed`` is what TensorFlow itself needs: below it nothing can run. ``wanted`` is what the wheel
    would like (the vendored runtime's own version, or what optional parts such as the op library
    need): preloaded only while no libstdc++ is mapped yet, never forced on a process that already
    holds an older one that ``needed`` fits.
    """
    global PROVIDED
    vendored_real = os.path.realpath(vendored)
    mapped = mapped_runtimes()
    log("mapped libstdc++: %s" % (", ".join(mapped) or "none"))
    for path in mapped:
        if os.path.realpath(path) == vendored_real:
            log("the vendored libstdc++ is already loaded")
            PROVIDED = needed
            return
    if mapped:
        version = glibcxx_version(mapped[0])
        if version is None or version >= needed:
            log("loaded %s (%s) runs TensorFlow (needs %s); nothing to preload" % (mapped[0], text(version), text(needed)))
            PROVIDED = version or ()
            return
        raise ImportError(
            "%s needs a libstdc++ with %s (for %s), but %s (%s) was already loaded by an earlier import, and a "
            "process can hold only one libstdc++.\n"
            "Fix: import tensorflow before modules that load C++ extensions, or start Python with the "
            "vendored runtime preloaded:\n    LD_PRELOAD=%s python ...\n"
            "(RETF_BOOTSTRAP_DEBUG=1 shows what was found.)"
            % (config["label"], text(needed), config.get("glibcxx_needed_by", "its native code"), mapped[0],
               text(version), vendored))
    system = system_runtime()
    version = glibcxx_version(system) if system else None
    log("system libstdc++: %s (%s)" % (system or "not found", text(version)))
    if version is not None and version >= max(needed, wanted):
        log("system runtime suffices; the vendored one stays unused")
        PROVIDED = needed
        return
    import ctypes
    ctypes.CDLL(vendored, mode=ctypes.RTLD_GLOBAL)
    PROVIDED = needed
    log("preloaded %s (system has %s, needed %s, wanted %s)" % (vendored, text(version), text(needed), text(wanted)))
