"""tf.contrib.opt: LazyAdamOptimizer (on retf's fused lazy Adam kernel), AdamWOptimizer, MomentumWOptimizer,
DecoupledWeightDecayExtension, extend_with_decoupled_weight_decay and MovingAverageOptimizer, with TF 1.15's
names, slots and results. The other contrib optimizers are not provided; using one says what replaced it.
"""
from tensorflow.contrib import part
from tensorflow.contrib.opt.python.training.lazy_adam_optimizer import LazyAdamOptimizer  # noqa: F401
from tensorflow.contrib.opt.python.training.moving_average_optimizer import MovingAverageOptimizer  # noqa: F401
from tensorflow.contrib.opt.python.training.weight_decay_optimizers import (  # noqa: F401
    AdamWOptimizer,
    DecoupledWeightDecayExtension,
    MomentumWOptimizer,
    extend_with_decoupled_weight_decay,
)

part(__name__, "tf.train's optimizers and retf.train (fused sparse Adam) replace the rest")
__all__ = ["AdamWOptimizer", "DecoupledWeightDecayExtension", "LazyAdamOptimizer", "MomentumWOptimizer",
           "MovingAverageOptimizer", "extend_with_decoupled_weight_decay"]
