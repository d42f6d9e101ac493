"""Checks of the retf op package against NumPy and stock TensorFlow, one module per op family.

Run by the target interpreter through ../check_retf_ops.py. Python 3.6 syntax. Importing any family
module runs this first, so the process is set up here, before anything imports TensorFlow.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# DecodeCSVTest compares retf's DecodeCSV kernel with TensorFlow's, which must stay the default here (a
# wheel with fast_decode_csv = true would otherwise make retf's every node's kernel at import).
os.environ["RETF_FAST_DECODE_CSV"] = "0"
# The checks use TensorFlow 2.x's API (eager tensors, tf.keras): a wheel built with the 1.x API keeps it
# for this process.
os.environ["RETF_API"] = "2"

# tensorflow first: a build whose numpy the environment's cannot serve (TF 2.11 in a numpy 1.18
# environment) refuses a numpy imported before it, and these checks are about the ops, not that.
import tensorflow  # noqa: E402, F401, I001
