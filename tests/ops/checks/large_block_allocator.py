"""retf's large-block CPU allocator (ops/cc/kernels/large_block_allocator.cc), each switch in a process of its own."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import tensorflow as tf

import retf

from .common import RUNNER


def allocator_outputs():
    """In a fresh process: the names of the allocators TensorFlow's CPU tensors came from, over steps whose
    tensors go from under 1 MiB to past 32 MiB and back (blocks kept, handed out again, larger ones reused
    for smaller tensors), whether every step's values were right, and what use_large_block_allocator says
    afterwards (TensorFlow has chosen its allocator by then)."""
    tf.compat.v1.disable_eager_execution()  # the checks run the 2.x API
    rows = tf.compat.v1.placeholder(tf.int32, [])
    scale = tf.compat.v1.placeholder(tf.float32, [])
    x = tf.fill(tf.stack([rows, 2500]), scale)  # 10 KB a row: 100 rows 1 MB, 3,300 rows 33 MB
    y = tf.cumsum(x, axis=1) * 0.5
    z = tf.reduce_sum(y, axis=1)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    names, right = set(), True
    with tf.compat.v1.Session() as session:
        for step, count in enumerate([20, 150, 3300, 900, 3400, 120, 3300, 1000, 60, 4000, 3300]):
            metadata = tf.compat.v1.RunMetadata()
            got = session.run(z, {rows: count, scale: step + 1.0}, options=options, run_metadata=metadata)
            want = np.full(count, (step + 1.0) * 0.5 * 2500 * 2501 / 2)
            right = right and got.shape == (count,) and bool(np.allclose(got, want, rtol=1e-5))
            names.update(m.allocator_name for d in metadata.step_stats.dev_stats for n in d.node_stats
                         for m in n.memory)
    # 1 installed (already), 0 too late, -1 the build's own allocator ranks above TensorFlow's default
    code = retf.ops._loaded_library().RetfInstallLargeBlockAllocator()
    return {"allocators": sorted(names), "right": right, "code": code, "late": retf.ops.use_large_block_allocator()}


class LargeBlockAllocatorTest(unittest.TestCase):
    """retf's large-block CPU allocator, chosen per process while `import tensorflow` runs."""

    def run_probe(self, switch):
        with tempfile.TemporaryDirectory() as scratch:
            path = os.path.join(scratch, "allocator.json")
            env = dict(os.environ, RETF_LARGE_BLOCK_ALLOCATOR=switch)
            subprocess.check_call([sys.executable, RUNNER, "--allocator-outputs", path], env=env)
            with open(path) as stream:
                return json.load(stream)

    def test_tensorflow_allocates_from_it_and_reused_blocks_hold_the_right_values(self):
        probe = self.run_probe("1")
        self.assertTrue(probe["right"])
        if probe["code"] == -1:  # intel-tensorflow: its MKL allocator ranks above TensorFlow's, and stays
            self.assertNotIn("retf_large_block_cpu", probe["allocators"])
            self.assertFalse(probe["late"])
            return
        self.assertEqual(probe["allocators"], ["retf_large_block_cpu"])
        self.assertEqual(probe["code"], 1)
        self.assertTrue(probe["late"])  # already the one: idempotent

    def test_switched_off_tensorflow_keeps_its_own_and_cannot_be_switched_late(self):
        probe = self.run_probe("0")
        self.assertNotIn("retf_large_block_cpu", probe["allocators"])
        self.assertTrue(probe["allocators"])
        self.assertTrue(probe["right"])
        self.assertIn(probe["code"], (0, -1))  # TensorFlow chose at its first allocation
        self.assertFalse(probe["late"])
