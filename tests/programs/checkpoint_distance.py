"""How far apart two checkpoints of one model are, variable by variable.

    python checkpoint_distance.py WORK FIRST_FOLDER SECOND_FOLDER

Reads the latest checkpoint in each folder (tf.train.load_checkpoint) and prints one JSON line: the variables
only one of them holds, and for every variable both hold its relative distance, |first - second| / |second|
over all its values (Frobenius norms; 0 where both are all zeros, infinite where the shapes or dtypes differ).
"""
import json
import sys

import numpy as np
import tensorflow as tf


def main(first_folder, second_folder):
    first = tf.train.load_checkpoint(tf.train.latest_checkpoint(first_folder))
    second = tf.train.load_checkpoint(tf.train.latest_checkpoint(second_folder))
    first_names = set(first.get_variable_to_shape_map())
    second_names = set(second.get_variable_to_shape_map())
    distances = {}
    for name in sorted(first_names & second_names):
        a, b = first.get_tensor(name), second.get_tensor(name)
        if a.dtype != b.dtype or a.shape != b.shape:
            distances[name] = float("inf")
            continue
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = np.linalg.norm(b)
        apart = np.linalg.norm(a - b)
        distances[name] = 0.0 if apart == 0.0 else float(apart / scale) if scale > 0.0 else float("inf")
    print(json.dumps({"only_first": sorted(first_names - second_names),
                      "only_second": sorted(second_names - first_names), "distances": distances}))


if __name__ == "__main__":
    main(sys.argv[2], sys.argv[3])
