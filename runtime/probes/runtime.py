"""Import TensorFlow in a target environment, report what was loaded, and run a training step.

Usage: python runtime.py EXTENSION.so  -> JSON on stdout. Python 3.6+, TensorFlow 2.x in compat.v1 mode.
"""
import ctypes
import json
import sys
import time

report = {}
start = time.time()
import tensorflow as tf  # noqa: E402

report["import_seconds"] = round(time.time() - start, 2)
from tensorflow.python.framework import versions  # noqa: E402

report["version"] = versions.__version__  # the build's own; tf.__version__ is the API's (1.15.5 in 1.x API mode)
report["api_version"] = tf.__version__
with open("/proc/self/maps") as maps:
    report["libstdcxx_mapped"] = sorted({line.split()[-1] for line in maps if "libstdc++" in line})

graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    x = tf.compat.v1.placeholder(tf.float32, [None, 4])
    y = tf.compat.v1.placeholder(tf.float32, [None, 1])
    w = tf.compat.v1.get_variable("w", [4, 1], initializer=tf.compat.v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    train = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        feed = {x: [[1.0, 2.0, 3.0, 4.0]] * 8, y: [[1.0]] * 8}
        before = session.run(loss, feed)
        for _ in range(20):
            session.run(train, feed)
        report["loss"] = [float(before), float(session.run(loss, feed))]

try:
    if len(sys.argv) < 2 or not sys.argv[1]:
        raise OSError("no probe extension given")
    library = ctypes.CDLL(sys.argv[1])
    buffer = ctypes.create_string_buffer(32)
    length = library.retf_probe_format(buffer, ctypes.c_double(0.25))
    report["extension"] = {"loaded": True, "output": buffer.raw[:length].decode()}
except OSError as error:
    report["extension"] = {"loaded": False, "error": str(error)}

try:
    import numpy as np

    import retf.ops
except ImportError as error:
    report["ops"] = {"present": False, "error": str(error)}
else:
    grad = np.full((3, 4), 0.5, np.float32)
    indices = np.array([1, 5, 1], np.int64)  # row 1 twice: the kernel sums duplicates
    with tf.Graph().as_default() as ops_graph:
        def table(name, value):
            return tf.compat.v1.get_variable(name, initializer=np.full((8, 4), value, np.float32), use_resource=True)
        var, m, v = table("var", 1.0), table("m", 0.0), table("v", 0.0)
        update = retf.ops.sparse_apply_adam(var, m, v, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8, grad, indices)
        with tf.compat.v1.Session(graph=ops_graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(update)
            got = session.run(var)
    dense = np.zeros((8, 4), np.float32)
    np.add.at(dense, indices, grad)
    m_ref, v_ref = 0.1 * dense, 0.001 * dense ** 2
    step = 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9)
    expected = np.ones((8, 4), np.float32)
    touched = sorted(set(indices.tolist()))
    expected[touched] -= step * m_ref[touched] / (np.sqrt(v_ref[touched]) + 1e-8)
    error = float(np.max(np.abs(got - expected)))
    report["ops"] = {"present": True, "max_error": error, "ok": error < 1e-5}
print(json.dumps(report))
