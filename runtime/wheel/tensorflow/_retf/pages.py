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
    page, from /proc/self/smaps (nothing where it cannot be read). Only the mappings that name ``prefix`` are parsed:
    the file has some 20 lines for each of the process's hundreds of mappings."""
    try:
        with open(smaps) as handle:
            text = handle.read()
    except OSError:
        return []
    found, at = [], text.find(" " + prefix)
    while at >= 0:
        line_start = text.rfind("\n", 0, at) + 1
        line_end = text.find("\n", at)
        line_end = len(text) if line_end < 0 else line_end
        fields = text[line_start:line_end].split(None, 5)
        anonymous = text.find("\nAnonymous:", line_end)
        following = text.find(" " + prefix, line_end)
        if len(fields) == 6 and ".so" in fields[5] and fields[1][1] == "-" and fields[1][3] == "p" \
                and anonymous >= 0 and (following < 0 or anonymous < following):
            if text[anonymous + 11:text.find("\n", anonymous + 1)].split()[0] == "0":
                start, end = fields[0].split("-")
                found.append((int(start, 16), int(end, 16)))
        at = following
    return found
