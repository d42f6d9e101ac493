"""tensorflow.contrib.tpu.python.tpu: the module paths TF 1.x code imports TPUEstimator and its parts from
(`from tensorflow.contrib.tpu.python.tpu import tpu_estimator`), each TensorFlow's or TensorFlow Estimator's
own module under TF 1.15's name."""
import importlib
import sys

_SOURCES = {
    "tpu_estimator": "tensorflow_estimator.python.estimator.tpu.tpu_estimator",
    "tpu_config": "tensorflow_estimator.python.estimator.tpu.tpu_config",
    "tpu_context": "tensorflow_estimator.python.estimator.tpu.tpu_context",
    "error_handling": "tensorflow_estimator.python.estimator.tpu.error_handling",
    "util": "tensorflow_estimator.python.estimator.tpu.util",
    "tpu": "tensorflow.python.tpu.tpu",
    "tpu_optimizer": "tensorflow.python.tpu.tpu_optimizer",
    "tpu_function": "tensorflow.python.tpu.tpu_function",
    "tpu_feed": "tensorflow.python.tpu.tpu_feed",
    "training_loop": "tensorflow.python.tpu.training_loop",
    "bfloat16": "tensorflow.python.tpu.bfloat16",
    "ops": "tensorflow.python.tpu.ops.tpu_ops",
    "session_support": "tensorflow.python.tpu.session_support",
    "device_assignment": "tensorflow.python.tpu.device_assignment",
    "topology": "tensorflow.python.tpu.topology",
}
for _name, _source in _SOURCES.items():
    try:
        _module = importlib.import_module(_source)
    except ImportError:  # a build without that part
        continue
    sys.modules[__name__ + "." + _name] = _module
    globals()[_name] = _module
del _name, _source
