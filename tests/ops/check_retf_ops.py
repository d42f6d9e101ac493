"""Checks of the retf op package against NumPy and stock TensorFlow (run by the target interpreter).

    python check_retf_ops.py [--report FILE] [-v] [TestClass[.test_name] ...]

The checks live in checks/, one module per op family (checks/common.py holds what they share); this runs
every check class found there, or the named ones, as one unittest program. Needs TensorFlow, NumPy and an
importable, built ``retf`` package. Python 3.6 syntax. Exits non-zero on failure. --report writes each check's
outcome as JSON ({"Class.test_name": "ok" | "skipped" | "FAIL: traceback" | "ERROR: traceback"}) to FILE.
tests/ops/test_retf_ops.py runs it under $RETF_OPS_PYTHON.
"""

import importlib
import json
import pkgutil
import sys
import types
import unittest

import checks  # noqa: I001  (first: it sets up the process before TensorFlow and NumPy load)
import numpy as np
from checks import batch_matmul, transposed_matmul
from checks.large_block_allocator import allocator_outputs
from checks.threads import threaded_outputs


def check_classes():
    """Every TestCase class the family modules define, by name."""
    found = {}
    for family in pkgutil.iter_modules(checks.__path__, checks.__name__ + "."):
        module = importlib.import_module(family.name)
        for name, value in vars(module).items():
            if not (isinstance(value, type) and issubclass(value, unittest.TestCase)
                    and value.__module__ == module.__name__):
                continue
            if name in found:
                raise RuntimeError("{} is defined in both {} and {}: check class names must be unique".format(
                    name, found[name].__module__, module.__name__))
            found[name] = value
    return found


class RecordingResult(unittest.TextTestResult):
    """The text runner's result, keeping each check's outcome by "Class.test_name" (class-level errors by class)."""
    outcomes = {}

    @staticmethod
    def _name(test):
        if isinstance(test, unittest.TestCase):
            return "{}.{}".format(type(test).__name__, test._testMethodName)
        return str(test).split(".")[-1].rstrip(")")  # "setUpClass (retf_op_checks.Class)" -> "Class"

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[self._name(test)] = "ok"

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[self._name(test)] = "skipped"

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[self._name(test)] = "FAIL: " + self._exc_info_to_string(err, test)

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[self._name(test)] = "ERROR: " + self._exc_info_to_string(err, test)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:  # the test itself is then reported neither passed nor failed
            kind = "FAIL" if issubclass(err[0], test.failureException) else "ERROR"
            said = "{}: {} {}".format(kind, subtest._subDescription(), self._exc_info_to_string(err, test))
            self.outcomes[self._name(test)] = self.outcomes.get(self._name(test), "") + said


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--threaded-outputs":
        np.savez(sys.argv[3], **threaded_outputs(int(sys.argv[2])))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--allocator-outputs":
        with open(sys.argv[2], "w") as stream:
            json.dump(allocator_outputs(), stream)
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--isa-outputs":  # a family's outputs on the path its variable allows
        family = {"transposed_matmul": transposed_matmul, "batch_matmul": batch_matmul}[sys.argv[2]]
        np.savez(sys.argv[3], **family.isa_outputs())
        return
    # One namespace holding every family's classes: unittest finds them all, or the named ones, in it.
    every_check = types.ModuleType("retf_op_checks")
    every_check.__dict__.update(check_classes())
    if len(sys.argv) > 2 and sys.argv[1] == "--report":
        report = sys.argv[2]
        del sys.argv[1:3]
        program = unittest.main(module=every_check, exit=False,
                                testRunner=unittest.TextTestRunner(resultclass=RecordingResult))
        with open(report, "w") as stream:
            json.dump(RecordingResult.outcomes, stream, indent=1, sort_keys=True)
        sys.exit(0 if program.result.wasSuccessful() else 1)
    unittest.main(module=every_check)


if __name__ == "__main__":
    main()
