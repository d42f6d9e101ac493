"""tf.contrib.tpu: TPUEstimator and its configs, as TF 1.15 code runs them with use_tpu=False on CPU and GPU
(TensorFlow Estimator's tf.compat.v1.estimator.tpu), and TensorFlow's own tf.compat.v1.tpu functions."""
from tensorflow.compat import v1 as _v1
from tensorflow.contrib import part

for _module in (_v1.tpu, _v1.estimator.tpu):
    for _name in dir(_module):
        if not _name.startswith("_") and _name not in ("core", "experimental"):
            globals()[_name] = getattr(_module, _name)
del _module, _name

part(__name__, "see tf.compat.v1.estimator.tpu, tf.compat.v1.tpu and tf.distribute.TPUStrategy")
