"""The resident memory a checkpoint save takes while it runs and leaves behind: tf.train.Saver saves one 293 MiB
variable.

    python checkpoint_heap.py WORK_DIR [--keep-heap] [--run N]

--keep-heap sets RETF_HEAP_TRIM=0 before TensorFlow is imported (the wheel then leaves the heap as the save leaves
it); --run N only names a run, where the same save is measured in several processes. Prints one JSON line: the
process's resident MiB before the save, its highest while the save runs (sampled every 5 ms), and after it; and
the bytes saved.
"""
import json
import os
import sys
import threading

if "--keep-heap" in sys.argv[2:]:
    os.environ["RETF_HEAP_TRIM"] = "0"

import tensorflow as tf  # noqa: E402

ROWS, WIDTH = 300000, 256


def resident_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/self/status")


def main():
    work = sys.argv[1]
    with tf.Graph().as_default():
        tf.get_variable("table", [ROWS, WIDTH], initializer=tf.random_uniform_initializer(seed=1))
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            before = resident_mib()
            highest, done = [before], threading.Event()

            def sample():
                while not done.wait(0.005):
                    highest[0] = max(highest[0], resident_mib())

            sampler = threading.Thread(target=sample)
            sampler.start()
            prefix = saver.save(sess, os.path.join(work, "ckpt", "model"))
            done.set()
            sampler.join()
            after = resident_mib()
    saved = sum(os.path.getsize(os.path.join(work, "ckpt", name)) for name in os.listdir(os.path.join(work, "ckpt"))
                if name.startswith("model.data"))
    print(json.dumps({"before_mib": before, "during_mib": max(highest[0], after), "after_mib": after,
                      "saved_bytes": saved, "prefix": prefix}))


if __name__ == "__main__":
    main()
