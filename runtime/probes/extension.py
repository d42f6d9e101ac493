"""Load a C++ extension without TensorFlow: exit 0 if it loads, 1 (with the loader's message) if not."""
import ctypes
import sys

try:
    ctypes.CDLL(sys.argv[1])
except OSError as error:
    print(error)
    sys.exit(1)
print("loaded")
