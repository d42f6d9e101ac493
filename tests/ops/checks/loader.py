"""How retf loads: Keras on first use, and the errors of a library built for another TensorFlow."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tensorflow.python.framework import versions

import retf


class LoaderTest(unittest.TestCase):
    def run_with_package_copy(self, prepare):
        """Run retf from a copy of the package, after prepare(copy_dir); returns (code, output)."""
        with tempfile.TemporaryDirectory() as scratch:
            package = os.path.join(scratch, "retf")
            shutil.copytree(os.path.dirname(retf.__file__), package,
                            ignore=shutil.ignore_patterns("__pycache__"))
            prepare(package)
            script = ("import retf, tensorflow as tf\n"
                      "assert retf._library._module is None, 'loaded on import'\n"
                      "retf.ops.embedding_lookup_sparse(tf.ones([2, 2]), tf.constant([0]), tf.constant([0], tf.int64))\n")
            env = dict(os.environ, PYTHONPATH=scratch)
            result = subprocess.run([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, universal_newlines=True)
            return result.returncode, result.stdout

    def test_keras_loads_on_first_use(self):
        """import retf (what the 1.x API mode does inside import tensorflow) leaves Keras unloaded."""
        script = ("import sys, tensorflow, retf\n"
                  "assert 'retf.keras' not in sys.modules, 'retf.keras imported eagerly'\n"
                  "assert retf.keras.optimizers.LazyAdam.__name__ == 'LazyAdam'\n"
                  "assert 'retf.keras' in sys.modules\n"
                  "try:\n"
                  "    retf.absent\n"
                  "except AttributeError as error:\n"
                  "    assert 'absent' in str(error)\n"
                  "else:\n"
                  "    raise AssertionError('retf.absent did not raise')\n")
        subprocess.check_call([sys.executable, "-c", script])

    def test_version_mismatch_names_both_versions(self):
        def write_info(package):
            with open(os.path.join(package, "_build_info.json"), "w") as stream:
                json.dump({"tensorflow_version": "2.99.0"}, stream)

        code, output = self.run_with_package_copy(write_info)
        self.assertNotEqual(code, 0)
        self.assertIn("OpLibraryError", output)
        self.assertIn("2.99.0", output)
        running = versions.__version__  # the build's own version, whatever API it serves
        self.assertIn("TensorFlow {} is running".format(running), output)
        self.assertIn("rebuild the wheel with retfwheel against TensorFlow {}".format(running), output)

    def test_undefined_symbol_says_rebuild(self):
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            self.skipTest("no C compiler to make a library with an undefined symbol")

        def plant_broken_library(package):
            source = os.path.join(package, "broken.c")
            with open(source, "w") as stream:
                stream.write("extern void retf_symbol_from_another_tensorflow(void);\n"
                             "void retf_probe(void) { retf_symbol_from_another_tensorflow(); }\n")
            subprocess.check_call([compiler, "-shared", "-fPIC", source, "-o", os.path.join(package, "_retf_ops.so")])

        code, output = self.run_with_package_copy(plant_broken_library)
        self.assertNotEqual(code, 0)
        self.assertIn("OpLibraryError", output)
        self.assertIn("undefined symbol", output)
        self.assertIn("rebuild the wheel with retfwheel", output)
