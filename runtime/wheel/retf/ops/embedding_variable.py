"""The EmbeddingVariable's raw ops (DeepRec's semantics) and the gradient of its lookup: an IndexedSlices whose
indices are the keys looked up."""

import tensorflow as tf

from retf._library import load_library

EV_GATHER = "Retf>EVGather"


def ev_handle(name, dim, shared_name):
    return load_library().retf_ev_handle(dim=dim, shared_name=shared_name, name=name)


def ev_initialize(handle, default_values, options, name=None):
    return load_library().retf_ev_initialize(handle, default_values, name=name, **options)


def ev_slot_initialize(slot, primary, initial, dim, name=None):
    return load_library().retf_ev_slot_initialize(slot, primary, initial, dim=dim, name=name)


def ev_is_initialized(handle, name=None):
    return load_library().retf_ev_is_initialized(handle, name=name)


def ev_gather(handle, keys, width, count=True, name=None):
    """The rows of keys (int64, any shape): keys' shape + [width]. count: a training lookup (it counts towards
    admission and creates admitted rows)."""
    return load_library().retf_ev_gather(handle, keys, width=width, count=count, name=name)


def ev_evict(handle, step, name=None):
    return load_library().retf_ev_evict(handle, step, name=name)


def ev_export(handle, name=None):
    """keys, values, freqs, versions, keys_filtered, freqs_filtered, versions_filtered, partition_offset,
    partition_filter_offset."""
    return load_library().retf_ev_export(handle, name=name)


def ev_import(handle, primary, prefix, init, head, tail, partition, partitions, is_slot, dim, options, name=None):
    return load_library().retf_ev_import(handle, primary, prefix, init, head=head, tail=tail, partition=partition,
                                         partitions=partitions, is_slot=is_slot, dim=dim, name=name, **options)


def ev_apply(rule, handles, scalars, grad, keys, step, name=None):
    """The fused sparse update `rule` (gradient_descent, adagrad, adagrad_decay, adam, adam_async, ftrl)."""
    return getattr(load_library(), "retf_ev_apply_" + rule)(*(list(handles) + list(scalars) + [grad, keys, step]),
                                                            name=name)


@tf.RegisterGradient(EV_GATHER)
def _ev_gather_grad(op, grad):
    keys = op.inputs[1]
    width = grad.shape[-1] if grad.shape.rank else tf.shape(grad)[-1]
    values = tf.reshape(grad, [-1, width])
    return [tf.IndexedSlices(values, tf.reshape(keys, [-1])), None]


for _op_type in ("EVHandle", "EVInitialize", "EVSlotInitialize", "EVIsInitialized", "EVEvict", "EVExport",
                 "EVImport", "EVApplyGradientDescent", "EVApplyAdagrad", "EVApplyAdagradDecay", "EVApplyAdam",
                 "EVApplyAdamAsync", "EVApplyFtrl"):
    tf.no_gradient("Retf>" + _op_type)
