"""Decoupled weight decay (Loshchilov & Hutter, arXiv:1711.05101) as TF 1.15's tf.contrib.opt had it.

Before each update a decayed variable loses weight_decay * its value; for a sparse gradient only the
rows it names do, once per row. The update itself is the base optimizer's, TensorFlow's own ops.
One difference: TF 1.15 could decay a variable while the same step's forward pass still read it (the
decay waited for nothing), so its results varied from run to run; here the decay waits for the
gradient, the order of the paper and of TF 1.15's runs that read the variable first.
"""
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops, control_flow_ops, math_ops, resource_variable_ops, state_ops
from tensorflow.python.training import adam, momentum


class DecoupledWeightDecayExtension(object):
    """Mixed in before a tf.compat.v1.train.Optimizer: decays the variables, then applies its update."""

    def __init__(self, weight_decay, **kwargs):
        self._weight_decay = weight_decay  # a number, a tensor, or a callable returning one
        self._decay_var_list = None
        super(DecoupledWeightDecayExtension, self).__init__(**kwargs)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=1, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None, decay_var_list=None):
        """Optimizer.minimize; ``decay_var_list`` limits the decay to those variables (default: all)."""
        self._decay_var_list = set(decay_var_list) if decay_var_list else None
        return super(DecoupledWeightDecayExtension, self).minimize(
            loss, global_step=global_step, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method, colocate_gradients_with_ops=colocate_gradients_with_ops,
            name=name, grad_loss=grad_loss)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None, decay_var_list=None):
        """Optimizer.apply_gradients; ``decay_var_list`` as in minimize."""
        self._decay_var_list = set(decay_var_list) if decay_var_list else None
        return super(DecoupledWeightDecayExtension, self).apply_gradients(grads_and_vars, global_step=global_step,
                                                                           name=name)

    def _prepare(self):
        decay = self._weight_decay() if callable(self._weight_decay) else self._weight_decay
        self._weight_decay_tensor = ops.convert_to_tensor(decay, name="weight_decay")
        super(DecoupledWeightDecayExtension, self)._prepare()

    def _decays(self, var):
        return self._decay_var_list is None or var in self._decay_var_list

    def _decay(self, var):
        if callable(self._weight_decay):  # TF 1.15 multiplied the callable itself, a TypeError in graph mode
            return math_ops.cast(self._weight_decay_tensor, var.dtype.base_dtype)
        return self._weight_decay

    def _decay_dense(self, var, grad):
        if not self._decays(var):
            return control_flow_ops.no_op()
        with ops.control_dependencies([grad]):
            return var.assign_sub(self._decay(var) * var, self._use_locking)

    def _decay_rows(self, var, grad, indices, scatter_add):
        if not self._decays(var):
            return control_flow_ops.no_op()
        with ops.control_dependencies([grad]):
            return scatter_add(var, indices, -self._decay(var) * array_ops.gather(var, indices), self._use_locking)

    def _apply_dense(self, grad, var):
        with ops.control_dependencies([self._decay_dense(var, grad)]):
            return super(DecoupledWeightDecayExtension, self)._apply_dense(grad, var)

    def _resource_apply_dense(self, grad, var):
        with ops.control_dependencies([self._decay_dense(var, grad)]):
            return super(DecoupledWeightDecayExtension, self)._resource_apply_dense(grad, var)

    # Optimizer sums duplicate indices before calling these, so each named row decays once.
    def _apply_sparse(self, grad, var):
        with ops.control_dependencies([self._decay_rows(var, grad.values, grad.indices, state_ops.scatter_add)]):
            return super(DecoupledWeightDecayExtension, self)._apply_sparse(grad, var)

    def _resource_apply_sparse(self, grad, var, indices):
        with ops.control_dependencies([self._decay_rows(var, grad, indices, _resource_scatter_add)]):
            return super(DecoupledWeightDecayExtension, self)._resource_apply_sparse(grad, var, indices)


def _resource_scatter_add(var, indices, updates, use_locking=None):
    with ops.control_dependencies([resource_variable_ops.resource_scatter_add(var.handle, indices, updates)]):
        return var.value()


def extend_with_decoupled_weight_decay(base_optimizer):
    """A subclass of ``base_optimizer`` whose first constructor argument is the weight decay."""

    class OptimizerWithDecoupledWeightDecay(DecoupledWeightDecayExtension, base_optimizer):
        def __init__(self, weight_decay, *args, **kwargs):
            super(OptimizerWithDecoupledWeightDecay, self).__init__(weight_decay, *args, **kwargs)

    return OptimizerWithDecoupledWeightDecay


class AdamWOptimizer(DecoupledWeightDecayExtension, adam.AdamOptimizer):
    """Adam with decoupled weight decay; slots "m", "v" as AdamOptimizer's."""

    def __init__(self, weight_decay, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 name="AdamW"):
        super(AdamWOptimizer, self).__init__(weight_decay, learning_rate=learning_rate, beta1=beta1, beta2=beta2,
                                             epsilon=epsilon, use_locking=use_locking, name=name)


class MomentumWOptimizer(DecoupledWeightDecayExtension, momentum.MomentumOptimizer):
    """Momentum with decoupled weight decay; slot "momentum" as MomentumOptimizer's."""

    def __init__(self, weight_decay, learning_rate, momentum, use_locking=False, name="MomentumW",
                 use_nesterov=False):
        super(MomentumWOptimizer, self).__init__(weight_decay, learning_rate=learning_rate, momentum=momentum,
                                                 use_locking=use_locking, name=name, use_nesterov=use_nesterov)
