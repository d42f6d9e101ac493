"""Write the op registry of the TensorFlow this interpreter imports, as JSON: every op, its attributes, their defaults.

    python op_registry.py OUT.json

Run under TensorFlow 1.15.5 it makes runtime/wheel/tensorflow/_retf/tf115_ops.json, which the 1.x API wheel ships to write and check
exports TF 1.15 can read. A default is the AttrValue's one-line text form; null: the attribute has none.
Python 3.6+.
"""
import json
import sys

import tensorflow as tf
from google.protobuf import text_format


def registered_ops():
    from tensorflow.python.framework import op_def_registry
    if hasattr(op_def_registry, "get_registered_ops"):  # TF 1.x
        return op_def_registry.get_registered_ops()
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session
    buffer = pywrap_tf_session.TF_GetAllOpList()
    ops = op_def_pb2.OpList()
    ops.ParseFromString(pywrap_tf_session.TF_GetBuffer(buffer))
    return {op.name: op for op in ops.op}


def main(path):
    ops = {}
    for name, op in sorted(registered_ops().items()):
        ops[name] = {attr.name: (text_format.MessageToString(attr.default_value, as_one_line=True)
                                 if attr.HasField("default_value") else None) for attr in op.attr}
    from tensorflow.python.framework import versions
    with open(path, "w") as out:
        json.dump({"tensorflow": versions.__version__, "ops": ops}, out, sort_keys=True, indent=1)
        out.write("\n")
    print(len(ops), tf.__version__)


if __name__ == "__main__":
    main(sys.argv[1])
