"""tf.contrib.distribute: TF 1.15's names for TensorFlow 2.x's tf.compat.v1.distribute strategies."""
from tensorflow.compat import v1 as _v1
from tensorflow.contrib import part
from tensorflow.python.distribute.distribution_strategy_context import (  # noqa: F401
    get_cross_replica_context,
    get_distribution_strategy,
    get_replica_context,
    get_strategy,
    has_distribution_strategy,
    has_strategy,
    in_cross_replica_context,
)

_distribute = _v1.distribute

CollectiveAllReduceStrategy = _distribute.experimental.MultiWorkerMirroredStrategy
CrossDeviceOps = _distribute.CrossDeviceOps
DistributionStrategy = _distribute.Strategy
MirroredStrategy = _distribute.MirroredStrategy
OneDeviceStrategy = _distribute.OneDeviceStrategy
ParameterServerStrategy = _distribute.experimental.ParameterServerStrategy
ReplicaContext = _distribute.ReplicaContext
TPUStrategy = _distribute.experimental.TPUStrategy
get_loss_reduction = _distribute.get_loss_reduction

part(__name__, "see tf.distribute and tf.compat.v1.distribute.experimental; an Estimator takes a strategy "
               "as tf.estimator.RunConfig(train_distribute=...)")
