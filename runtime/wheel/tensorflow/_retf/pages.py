"""Giving back the pages of TensorFlow's native libraries that only their loading read.

Loading TensorFlow 2.x's native library (2.6.2's `_pywrap_tensorflow_internal.so`, 296 MiB of code and constants)
leaves 90 MiB of it resident, where TF 1.15.5's leaves 58: the dynamic loader's tables (the relocations, 11.6 MiB,
and the symbol names and hashes it looked up, 32 MiB), and the code and constants of the static initializers that
register its ops and kernels, with the neighbouring pages the kernel maps at every fault. A program reads few of
them again. Right after the library loads, every mapping of a library inside the tensorflow package that is
read-only and holds no page of its own (its pages are the file's, unchanged: not the relocated data, nor a page a
debugger patched) is handed back with ``madvise(MADV_DONTNEED)``: after `import tensorflow` and a first session, 19
MiB of the library are resident. What the process reads again comes back on first touch from the page cache, as
after the kernel reclaims such pages under pressure; the loaded code is not changed. RETF_PAGE_TRIM=0 leaves the
pages resident.
"""

import os

MADV_DONTNEED = 4


def release_loaded_libraries(package_dir):
    """madvise(MADV_DONTNEED) each read-only mapping, without private pages, of a native library in ``package_dir``."""
    if os.environ.get("RETF_PAGE_TRIM", "1") == "0":
        return
    import ctypes  # TensorFlow's pywrap_tensorflow.py has imported it by now
    madvise = getattr(ctypes.CDLL(None), "madvise", None)
    if madvise is None:
        return
    madvise.argtypes, madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    for start, end in clean_library_mappings(os.path.realpath(package_dir) + os.sep):
        madvise(start, end - start, MADV_DONTNEED)


def clean_library_mappings(prefix, smaps="/proc/self/smaps"):
    """[(start, end)] of the private, read-only mappings of a shared library under ``prefix`` that hold no anonymous
    page, from /proc/self/smaps (nothing where it cannot be read)."""
    try:
        with open(smaps) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    found, current = [], None
    for line in lines:
        fields = line.split(None, 5)
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            current = None
            if len(fields) == 6 and fields[5].startswith(prefix) and ".so" in fields[5] \
                    and fields[1][1] == "-" and fields[1][3] == "p":
                start, end = fields[0].split("-")
                current = (int(start, 16), int(end, 16))
        elif current is not None and fields[0] == "Anonymous:":
            if fields[1] == "0":
                found.append(current)
            current = None
    return found
