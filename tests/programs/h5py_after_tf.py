"""Code written for h5py 2, run after `import tensorflow`: string attributes read back as bytes and
.decode()d, and a Keras model saved to and loaded from HDF5. Prints one JSON line.

    python h5py_after_tf.py WORK_DIR
"""
import json
import os
import sys

import h5py
import numpy as np
import tensorflow as tf

work = sys.argv[1]
path = os.path.join(work, "data.h5")
with h5py.File(path, "w") as handle:
    handle.create_dataset("weights", data=np.arange(6, dtype=np.float32).reshape(2, 3))
    handle.attrs["names"] = [b"first", b"second"]
with h5py.File(path, "r") as handle:
    names = [n.decode("utf8") for n in handle.attrs["names"]]  # h5py 2 returns bytes
    total = float(handle["weights"][()].sum())

keras = tf.compat.v2.keras
model = keras.Sequential([keras.layers.Dense(3, input_shape=(4,), kernel_initializer=keras.initializers.Constant(0.5))])
model.save(os.path.join(work, "model.h5"))
loaded = keras.models.load_model(os.path.join(work, "model.h5"))
same = bool(np.allclose(loaded.get_weights()[0], model.get_weights()[0]))
print(json.dumps({"h5py": h5py.__version__, "file": h5py.__file__, "names": names, "total": total,
                  "model_round_trip": same}))
