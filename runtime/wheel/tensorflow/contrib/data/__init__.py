"""tf.contrib.data: TF 1.15's names for what became tf.data.experimental (and Dataset methods)."""
from tensorflow.compat import v1 as _v1
from tensorflow.contrib import part

_experimental = _v1.data.experimental

# TF 1.15's tf.contrib.data names that tf.data.experimental keeps under the same name.
_SAME = ("AUTOTUNE", "CheckpointInputPipelineHook", "Counter", "CsvDataset", "Optional", "RandomDataset", "Reducer",
         "SqlDataset", "TFRecordWriter", "bucket_by_sequence_length", "choose_from_datasets", "copy_to_device",
         "dense_to_sparse_batch", "enumerate_dataset", "get_next_as_optional", "get_single_element",
         "group_by_reducer", "group_by_window", "ignore_errors", "make_batched_features_dataset", "make_csv_dataset",
         "make_saveable_from_iterator", "map_and_batch", "parallel_interleave", "parse_example_dataset",
         "prefetch_to_device", "rejection_resample", "sample_from_datasets", "scan", "shuffle_and_repeat", "unbatch",
         "unique")
for _name in _SAME:
    if hasattr(_experimental, _name):
        globals()[_name] = getattr(_experimental, _name)


def batch_and_drop_remainder(batch_size):
    """A transformation batching ``batch_size`` elements and dropping a last, smaller batch."""
    return lambda dataset: dataset.batch(batch_size, drop_remainder=True)


def padded_batch_and_drop_remainder(batch_size, padded_shapes, padding_values=None):
    """As batch_and_drop_remainder, padding each batch's elements to ``padded_shapes``."""
    return lambda dataset: dataset.padded_batch(batch_size, padded_shapes, padding_values, drop_remainder=True)


def sloppy_interleave(map_func, cycle_length, block_length=1):
    """parallel_interleave that may return elements out of order."""
    return _experimental.parallel_interleave(map_func, cycle_length, block_length, sloppy=True)


def reduce_dataset(dataset, reducer):
    """The result of ``reducer`` (a tf.data.experimental.Reducer) over every element of ``dataset``."""
    return _experimental.get_single_element(dataset.apply(_experimental.group_by_reducer(lambda _: 0, reducer)))


part(__name__, "see tf.data.experimental and tf.data.Dataset's methods (window, padded_batch)")
