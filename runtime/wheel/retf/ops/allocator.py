"""retf's large-block CPU allocator for TensorFlow."""

from retf.ops._common import _loaded_library


def use_large_block_allocator():
    """Make TensorFlow's CPU allocator, for this process, one that keeps freed blocks of 1 MiB or more
    (by size class, up to a quarter of the machine's memory or of the cgroup's limit) for the next
    tensors of their size, and serves smaller ones from malloc as TensorFlow's own does. A tensor past
    32 MiB otherwise costs fresh pages from the kernel at every allocation; kept blocks are given back
    when an allocation finds no memory. TensorFlow chooses its CPU allocator once, at the first
    CPU allocation of the process: returns False when that has happened already (TensorFlow's allocator
    then stays), or when the TensorFlow build registers an allocator of its own above its default
    (intel-tensorflow's), which stays; True when this allocator is, or will be, the one. Idempotent."""
    return _loaded_library().RetfInstallLargeBlockAllocator() == 1
