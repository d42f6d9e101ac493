"""DeepRec's tf.staged and tf.make_prefetch_hook: the input subgraph runs ahead of the training step.

``staged(features)`` returns the same structure (SparseTensors included), now taken from a buffer of
``capacity`` results that ``num_threads`` threads fill by running the subgraph that computes ``features``,
beside the training step. The threads start with ``make_prefetch_hook()`` in a MonitoredSession (as DeepRec
requires), or with ``tf.train.start_queue_runners`` in a plain Session (the stage is a queue runner); an
exhausted input ends the steps with OutOfRangeError once the buffer is drained, as without the stage.
"""

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.util import deprecation

# DeepRec's collection of prefetch runners.
PREFETCH = "prefetch"


def staged(features, feed_list=None, feed_generator=None, capacity=1, num_threads=1, num_clients=1,
           timeout_millis=300000, closed_exception_types=None, ignored_exception_types=None,
           use_stage_subgraph_thread_pool=False, stage_subgraph_thread_pool_id=0, stage_subgraph_stream_id=0,
           name=None):
    """features (a nest of Tensors and SparseTensors), computed ahead by num_threads threads into a buffer of
    capacity results."""
    if num_threads < 1:
        raise ValueError("tf.staged: num_threads must be at least 1, got %r" % (num_threads,))
    if capacity < 1:
        raise ValueError("tf.staged: capacity must be at least 1, got %r" % (capacity,))
    if feed_list is not None or feed_generator is not None:
        raise ValueError("tf.staged(feed_list=..., feed_generator=...): feeding a stage from Python is not provided "
                         "by this TensorFlow; stage a tf.data pipeline's tensors instead")
    flat = tf.nest.flatten(features, expand_composites=True)
    if not flat:
        raise ValueError("tf.staged: features holds no tensors")
    exceptions = tuple(closed_exception_types or (tf.errors.OutOfRangeError,))
    with ops.name_scope(name, "prefetch", flat):
        buffer = tf.queue.FIFOQueue(capacity, [t.dtype for t in flat], name="buffer")
        enqueue = buffer.enqueue(flat)
        with deprecation.silence():  # the stage is DeepRec's API, not a use of TF 1.x's queues to warn about
            runner = tf.compat.v1.train.QueueRunner(buffer, [enqueue] * num_threads, close_op=buffer.close(),
                                                    cancel_op=buffer.close(cancel_pending_enqueues=True),
                                                    queue_closed_exception_types=exceptions)
            tf.compat.v1.train.add_queue_runner(runner)
        ops.add_to_collection(PREFETCH, runner)
        taken = buffer.dequeue()
    taken = taken if isinstance(taken, (list, tuple)) else [taken]
    for tensor, original in zip(taken, flat):
        tensor.set_shape(original.shape)
    return tf.nest.pack_sequence_as(features, list(taken), expand_composites=True)


class PrefetchHook(tf.compat.v1.train.SessionRunHook):
    """Starts the stages' threads when the session is created (once per session) and stops them with it."""

    def __init__(self, daemon=True, start=True):
        self._daemon = daemon
        self._start = start

    def after_create_session(self, session, coord):
        with deprecation.silence():
            for runner in ops.get_collection(PREFETCH):
                runner.create_threads(session, coord=coord, daemon=self._daemon, start=self._start)


def make_prefetch_hook(daemon=True, start=True):
    """DeepRec's tf.make_prefetch_hook: the hook a MonitoredSession needs to run tf.staged's threads."""
    return PrefetchHook(daemon=daemon, start=start)
