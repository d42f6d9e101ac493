"""Returning the heap TensorFlow 2.x's checkpoint writer leaves behind.

TensorFlow 2.x's SaveV2 kernel writes a checkpoint through a fresh 64-byte-aligned 8 MiB buffer for every 8 MiB it
writes, and frees each one after taking the next. glibc's aligned allocation (2.36 here) does not give such a freed
block to the next aligned request, so the blocks pile up in the saving thread's arena while the save runs and stay
resident after it: a save of one 293 MiB variable grew the process by 65 to 193 MiB while it ran and kept 57 to 169
MiB (TF 1.15.5 reuses one buffer: 9 and 1 MiB). While a ``tf.compat.v1.train.Saver.save`` runs (so
MonitoredTrainingSession's and Estimator's checkpoints, and SavedModel exports), a helper thread gives the free
pages of the process's heap back to the kernel every 50 ms with glibc's ``malloc_trim(0)``, and once more when the
save returns: free memory only, with no allocator setting changed. RETF_HEAP_TRIM=0 leaves the heap as the save
leaves it.
"""

import os

TRIM_EVERY = 0.05  # seconds between trims while a save runs


def trim_while_saving(saver_module):
    """Make ``saver_module.Saver.save`` (tensorflow.python.training.saver's) return the heap's free pages while and
    after it saves, unless RETF_HEAP_TRIM=0 or this C library has no malloc_trim."""
    if os.environ.get("RETF_HEAP_TRIM", "1") == "0":
        return
    # Here, not at the bootstrap's start (which every process pays): TensorFlow imports them before the saver.
    import ctypes
    import functools
    import threading
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; other C libraries go without
    if trim is None:
        return
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    save = saver_module.Saver.save

    @functools.wraps(save)
    def save_and_trim(self, *args, **kwargs):
        done = threading.Event()
        helper = threading.Thread(target=_trim_until, args=(trim, done), name="retf-heap-trim", daemon=True)
        helper.start()
        try:
            return save(self, *args, **kwargs)
        finally:
            done.set()
            helper.join()
            trim(0)

    saver_module.Saver.save = save_and_trim


def _trim_until(trim, done):
    while not done.wait(TRIM_EVERY):
        trim(0)
