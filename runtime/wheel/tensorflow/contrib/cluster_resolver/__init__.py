"""tf.contrib.cluster_resolver: TensorFlow's tf.distribute.cluster_resolver, under TF 1.15's names."""
from tensorflow.compat import v1 as _v1
from tensorflow.contrib import part

for _name in dir(_v1.distribute.cluster_resolver):
    if not _name.startswith("_"):
        globals()[_name] = getattr(_v1.distribute.cluster_resolver, _name)
del _name

part(__name__, "see tf.distribute.cluster_resolver")
