"""Import one module, then TensorFlow, and train a step: a program that opens with `import pandas as pd`.

Usage: python import_first.py MODULE -> JSON on stdout. Python 3.6+, TensorFlow 2.x in either API mode.
"""
import importlib
import json
import sys


def mapped_runtimes():
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "/libstdc++" in line})


importlib.import_module(sys.argv[1])
report = {"mapped_before": mapped_runtimes()}
import tensorflow as tf  # noqa: E402

report["ops_left_out"] = getattr(sys.modules.get("tensorflow._retf.switches"), "OPS_LEFT_OUT", None)
v1 = tf.compat.v1
with tf.Graph().as_default() as graph:
    v1.set_random_seed(1)
    table = v1.get_variable("table", [10, 4], initializer=v1.ones_initializer())
    rows = v1.nn.embedding_lookup(table, [1, 5, 1])  # a sparse gradient: the op library's optimizers where it loads
    loss = v1.reduce_sum(rows * rows)
    train = v1.train.AdamOptimizer(0.1).minimize(loss)
    with v1.Session(graph=graph) as session:
        session.run(v1.global_variables_initializer())
        before = session.run(loss)
        for _ in range(3):
            session.run(train)
        report["loss"] = [float(before), float(session.run(loss))]
print(json.dumps(report))
