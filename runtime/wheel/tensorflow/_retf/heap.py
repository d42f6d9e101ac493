"""Returning the heap TensorFlow 2.x's checkpoint writer leaves behind.

TensorFlow 2.x's SaveV2 kernel writes a checkpoint through a fresh 8 MiB buffer for every 8 MiB it writes, and
frees each one after taking the next. glibc cannot give one of those freed blocks to the next aligned request
(it is a few bytes too small), so a save of N bytes leaves up to N bytes of free blocks in the saving thread's
arena, resident for the rest of the process: a save of one 293 MiB variable kept 105 to 161 MiB (TF 1.15.5 reuses
one buffer and keeps 9 MiB). After each ``tf.compat.v1.train.Saver.save`` (so MonitoredTrainingSession's and
Estimator's checkpoints, and SavedModel exports) the process gives the free pages of its heap back to the kernel
with glibc's ``malloc_trim(0)``: free memory only, with no allocator setting changed. RETF_HEAP_TRIM=0 leaves the
heap as the save left it.
"""

import functools
import os


def trim_after_saves(saver_module):
    """Make ``saver_module.Saver.save`` (tensorflow.python.training.saver's) return the heap's free pages after it
    saves, unless RETF_HEAP_TRIM=0 or this C library has no malloc_trim."""
    if os.environ.get("RETF_HEAP_TRIM", "1") == "0":
        return
    import ctypes  # here, not at the bootstrap's start: TensorFlow imports it before it imports the saver
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; other C libraries go without
    if trim is None:
        return
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    save = saver_module.Saver.save

    @functools.wraps(save)
    def save_then_trim(self, *args, **kwargs):
        try:
            return save(self, *args, **kwargs)
        finally:
            trim(0)

    saver_module.Saver.save = save_then_trim
