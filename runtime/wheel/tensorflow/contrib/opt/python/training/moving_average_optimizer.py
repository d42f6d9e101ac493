"""MovingAverageOptimizer: an optimizer that also keeps exponential moving averages of what it trains.

As TF 1.15's tf.contrib.opt had it: the averages are ExponentialMovingAverage's (variables named
<var>/ExponentialMovingAverage), updated after the wrapped optimizer's step unless
sequential_update=False, and swapping_saver() writes each average under its variable's name (and the
variable under the average's), so a model restored from it evaluates with the averaged weights.
"""
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_ops, variables
from tensorflow.python.training import moving_averages, optimizer, saver
from tensorflow.python.training.saving import saveable_object_util


class MovingAverageOptimizer(optimizer.Optimizer):
    def __init__(self, opt, average_decay=0.9999, num_updates=None, sequential_update=True):
        self._optimizer = opt
        self._ema = moving_averages.ExponentialMovingAverage(average_decay, num_updates=num_updates)
        self._sequential_update = sequential_update
        self._swapped_names = None  # variable name <-> its average's, once apply_gradients ran

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        train_op = self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        trained = [var for grad, var in grads_and_vars if grad is not None]
        if self._sequential_update:
            with ops.control_dependencies([train_op]):
                average_op = self._ema.apply(trained)
        else:
            average_op = self._ema.apply(trained)
        self._swapped_names = {}
        for var in trained:
            average = self._ema.average(var)
            self._swapped_names[var.op.name] = average.op.name
            self._swapped_names[average.op.name] = var.op.name
        return control_flow_ops.group(train_op, average_op, name="train_with_avg")

    def swapping_saver(self, var_list=None, name="swapping_saver", **kwargs):
        """A tf.train.Saver that saves and restores each trained variable and its average swapped."""
        if self._swapped_names is None:
            raise RuntimeError("Must call apply_gradients or minimize before creating the swapping_saver")
        if var_list is None:
            var_list = variables.global_variables()
        if not isinstance(var_list, dict):
            var_list = saveable_object_util.op_list_to_dict(var_list)
        by_name = {}
        for key, value in var_list.items():
            if isinstance(value, (list, variables.PartitionedVariable)):
                by_name.update((part.op.name, part) for part in value)
            else:
                by_name[key] = value

        def swapped(name, value):
            other = self._swapped_names.get(name)
            if other is None:
                return value
            if other not in by_name:
                raise ValueError("Variable to swap %s is not part of variables to save. This breaks "
                                 "MovingAverageOptimizer." % other)
            return by_name[other]

        swapped_list = {}
        for key, value in var_list.items():
            if isinstance(value, list):
                swapped_list[key] = [swapped(part.op.name, part) for part in value]
            else:
                swapped_list[key] = swapped(key, value)
        return saver.Saver(swapped_list, name=name, **kwargs)
