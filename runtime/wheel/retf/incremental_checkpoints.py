"""DeepRec's incremental checkpoints, as full ones: a recovery point at the interval asked for.

DeepRec saves, between full checkpoints, only the sparse rows that changed, so a parameter server that fails
resumes from its last full checkpoint plus the increments since. Here the same arguments are taken and each
increment is a full checkpoint: resuming finds a checkpoint no older than the interval, as on DeepRec, and each
save writes every variable (the cost DeepRec's increments avoid). DeepRec's own increments (its
``.incremental_checkpoint`` folder) are not read: a DeepRec checkpoint folder resumes from its last full save.

``tf.train.MonitoredTrainingSession(save_incremental_checkpoint_secs=S)`` and
``tf.train.CheckpointSaverHook(incremental_save_secs=S)`` save every S seconds besides their own schedule;
``tf.train.Saver`` and ``tf.train.Scaffold`` take ``incremental_save_restore=`` (nothing to switch here).
"""

import functools

from tensorflow.python.training import basic_session_run_hooks, monitored_session, saver

USE_DEFAULT = monitored_session.USE_DEFAULT


class EitherTimer(object):
    """Triggers when any of its timers would (SecondOrStepTimer's interface); a save restarts them all."""

    def __init__(self, *timers):
        self._timers = timers

    def should_trigger_for_step(self, step):
        return any(timer.should_trigger_for_step(step) for timer in self._timers)

    def update_last_triggered_step(self, step):
        results = [timer.update_last_triggered_step(step) for timer in self._timers]
        return results[0]

    def last_triggered_step(self):
        return self._timers[0].last_triggered_step()

    def reset(self):
        for timer in self._timers:
            timer.reset()


def _accept_incremental_save_restore(cls):
    """cls.__init__ taking DeepRec's incremental_save_restore= and otherwise its own arguments."""
    original = cls.__init__
    if getattr(original, "retf_incremental", False):
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        kwargs.pop("incremental_save_restore", None)
        original(self, *args, **kwargs)

    __init__.retf_incremental = True
    cls.__init__ = __init__


def install():
    """Teach TensorFlow's sessions and savers DeepRec's incremental-checkpoint arguments. Idempotent.
    Returns (MonitoredTrainingSession, CheckpointSaverHook) to publish in tf.train."""
    hook_class = basic_session_run_hooks.CheckpointSaverHook
    if not getattr(hook_class.__init__, "retf_incremental", False):
        stock_hook_init = hook_class.__init__

        @functools.wraps(stock_hook_init)
        def hook_init(self, *args, **kwargs):
            seconds = kwargs.pop("incremental_save_secs", None)
            stock_hook_init(self, *args, **kwargs)
            if seconds:
                self._timer = EitherTimer(self._timer, basic_session_run_hooks.SecondOrStepTimer(every_secs=seconds))

        hook_init.retf_incremental = True
        hook_class.__init__ = hook_init
    _accept_incremental_save_restore(saver.Saver)
    _accept_incremental_save_restore(monitored_session.Scaffold)

    stock_session = monitored_session.MonitoredTrainingSession
    if getattr(stock_session, "retf_incremental", False):
        return stock_session, hook_class

    @functools.wraps(stock_session)
    def MonitoredTrainingSession(*args, **kwargs):  # pylint: disable=invalid-name
        seconds = kwargs.pop("save_incremental_checkpoint_secs", None)
        if not seconds:  # TensorFlow's own call, its own errors
            return stock_session(*args, **kwargs)
        arguments = _arguments(stock_session, args, kwargs)
        if not arguments["is_chief"] or not arguments["checkpoint_dir"]:
            return stock_session(*args, **kwargs)
        steps, secs = arguments["save_checkpoint_steps"], arguments["save_checkpoint_secs"]
        if steps is USE_DEFAULT and secs is USE_DEFAULT:  # TensorFlow's default: every 600 s
            steps, secs = None, 600
        steps = None if steps is USE_DEFAULT or not (steps and steps > 0) else steps
        secs = None if secs is USE_DEFAULT or not (secs and secs > 0) else secs
        if steps is None and secs is None:
            secs = seconds
        arguments["scaffold"] = arguments["scaffold"] or monitored_session.Scaffold()
        saver_hook = hook_class(arguments["checkpoint_dir"], save_steps=steps, save_secs=secs,
                                scaffold=arguments["scaffold"], save_graph_def=arguments["save_graph_def"],
                                incremental_save_secs=seconds)
        arguments["chief_only_hooks"] = list(arguments["chief_only_hooks"] or []) + [saver_hook]
        arguments["save_checkpoint_steps"] = arguments["save_checkpoint_secs"] = None  # saved by saver_hook
        return stock_session(**arguments)

    MonitoredTrainingSession.retf_incremental = True
    monitored_session.MonitoredTrainingSession = MonitoredTrainingSession
    return MonitoredTrainingSession, hook_class


def _arguments(function, args, kwargs):
    """function's arguments by name, its defaults filled in."""
    import inspect

    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)
