"""retf's kernel for TensorFlow's own DecodeCSV op."""

from retf.ops._common import _loaded_library

# The kernel label under which retf's DecodeCSV kernel is always registered: a graph built under
# `graph._kernel_label_map({"DecodeCSV": DECODE_CSV_LABEL})` runs it whatever use_fast_decode_csv says.
DECODE_CSV_LABEL = "retf"


def use_fast_decode_csv():
    """Make every DecodeCSV kernel this process creates from now on retf's (tf.io.decode_csv, the 1.x
    tf.decode_csv, in tf.data functions too): TensorFlow's outputs and errors, several times faster on wide
    records. Graphs keep TensorFlow's op. Idempotent; kernels already made stay TensorFlow's."""
    return _loaded_library().RetfUseDecodeCSV() == 1
