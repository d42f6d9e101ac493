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
# retf's kernels, not oneDNN's graph rewrite, which TensorFlow 2.9 and later turn on by default on CPUs with AVX-512
# VNNI or BF16: it replaces BatchMatMulV2 and stops the process at a node with retf's kernel label, which these checks
# give their products themselves. (The wheel's routing leaves the products to it where it runs: test_tf1_api.py.)
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

# tensorflow first: a build whose numpy the environment's cannot serve (TF 2.11 in a numpy 1.18
# environment) refuses a numpy imported before it, and these checks are about the ops, not that.
import tensorflow  # noqa: E402, F401, I001
