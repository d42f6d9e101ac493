"""The cyclic garbage collector, paused while `import tensorflow` runs.

An import allocates without freeing: TensorFlow 2.6.2's creates about 150,000 objects, and Python's
collector walks them as they pile up (about 400 young, 40 middle and 3 full collections), which found
a few hundred objects to free and took 0.18 s of a 1.1 s import (TF 1.15.5's the same). Paused for the
import and run once at its end, the collector walks every object once and leaves them where those full
collections would have: in the oldest generation, which the next full collection waits to grow by a
quarter.

tensorflow/__init__.py runs its own code in a `try` whose `finally` calls what run() returned, so the
collector is back on however the import ends (an ImportError, KeyboardInterrupt). A process that had
turned the collector off keeps it off and is not collected. RETF_DEFER_GC=0 keeps it running.
"""

import gc
import os


def pause():
    """Turn the collector off; the call that turns it back on and collects once, or None where nothing was done."""
    if os.environ.get("RETF_DEFER_GC", "1") == "0" or not gc.isenabled():
        return None
    gc.disable()
    return _resume


def _resume():
    gc.enable()
    gc.collect()
