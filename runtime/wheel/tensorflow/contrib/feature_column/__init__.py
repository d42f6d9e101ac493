"""tf.contrib.feature_column: TF 1.15's sequence feature columns and sequence_input_layer (BST-style models).

TensorFlow 2.x keeps the TF 1.x feature-column classes these are built on, but not these functions:
they are written here with TF 1.15's variable scopes, so checkpoints carry the same names.
"""
import collections

from tensorflow.contrib import part
from tensorflow.python.feature_column import feature_column as _fc
from tensorflow.python.feature_column import utils as _fc_utils
from tensorflow.python.framework import dtypes, ops, tensor_shape
from tensorflow.python.ops import array_ops, check_ops, parsing_ops, sparse_ops, variable_scope


def sequence_input_layer(features, feature_columns, weight_collections=None, trainable=True):
    """(input, sequence_length): the columns' dense sequences concatenated along the last axis, batch x time x sum
    of their sizes, in the order of their names, and the sequence lengths they agree on."""
    columns = _fc._normalize_feature_columns(feature_columns)
    for column in columns:
        if not isinstance(column, _fc._SequenceDenseColumn):
            raise ValueError("All feature_columns must be of type _SequenceDenseColumn. You can wrap a "
                             "sequence_categorical_column with an embedding_column or indicator_column. Given "
                             "(type {}): {}".format(type(column), column))
    with variable_scope.variable_scope(None, default_name="sequence_input_layer", values=features.values()):
        builder = _fc._LazyBuilder(features)
        ordered = sorted(columns, key=lambda column: column.name)
        outputs, lengths = [], []
        for column in ordered:
            with variable_scope.variable_scope(None, default_name=column._var_scope_name):
                dense, length = column._get_sequence_dense_tensor(builder, weight_collections=weight_collections,
                                                                  trainable=trainable)
                shape = array_ops.shape(dense)
                size = column._variable_shape.num_elements()
                outputs.append(array_ops.reshape(dense, shape=[shape[0], shape[1], size]))
                lengths.append(length)
        _fc._verify_static_batch_size_equality(outputs, ordered)
        _fc._verify_static_batch_size_equality(lengths, ordered)
        return array_ops.concat(outputs, -1), _all_equal(lengths)


def concatenate_context_input(context_input, sequence_input):
    """``sequence_input`` (batch x time x d) with ``context_input`` (batch x c) repeated at every step."""
    checks = [
        check_ops.assert_rank(sequence_input, 3, message="sequence_input must have rank 3",
                              data=[array_ops.shape(sequence_input)]),
        check_ops.assert_type(sequence_input, dtypes.float32,
                              message="sequence_input must have dtype float32; got {}.".format(sequence_input.dtype)),
        check_ops.assert_rank(context_input, 2, message="context_input must have rank 2",
                              data=[array_ops.shape(context_input)]),
        check_ops.assert_type(context_input, dtypes.float32,
                              message="context_input must have dtype float32; got {}.".format(context_input.dtype)),
    ]
    with ops.control_dependencies(checks):
        steps = array_ops.shape(sequence_input)[1]
        tiled = array_ops.tile(array_ops.expand_dims(context_input, 1), array_ops.concat([[1], [steps], [1]], 0))
    return array_ops.concat([sequence_input, tiled], 2)


def sequence_categorical_column_with_identity(key, num_buckets, default_value=None):
    return _fc._SequenceCategoricalColumn(
        _fc._categorical_column_with_identity(key=key, num_buckets=num_buckets, default_value=default_value))


def sequence_categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=dtypes.string):
    return _fc._SequenceCategoricalColumn(
        _fc._categorical_column_with_hash_bucket(key=key, hash_bucket_size=hash_bucket_size, dtype=dtype))


def sequence_categorical_column_with_vocabulary_file(key, vocabulary_file, vocabulary_size=None, num_oov_buckets=0,
                                                     default_value=None, dtype=dtypes.string):
    return _fc._SequenceCategoricalColumn(_fc._categorical_column_with_vocabulary_file(
        key=key, vocabulary_file=vocabulary_file, vocabulary_size=vocabulary_size, num_oov_buckets=num_oov_buckets,
        default_value=default_value, dtype=dtype))


def sequence_categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None, default_value=-1,
                                                     num_oov_buckets=0):
    return _fc._SequenceCategoricalColumn(_fc._categorical_column_with_vocabulary_list(
        key=key, vocabulary_list=vocabulary_list, dtype=dtype, default_value=default_value,
        num_oov_buckets=num_oov_buckets))


def sequence_numeric_column(key, shape=(1,), default_value=0.0, dtype=dtypes.float32, normalizer_fn=None):
    """A numeric value of ``shape`` at every step of a sequence (a VarLenFeature)."""
    shape = _fc._check_shape(shape=shape, key=key)
    if not (dtype.is_integer or dtype.is_floating):
        raise ValueError("dtype must be convertible to float. dtype: {}, key: {}".format(dtype, key))
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError("normalizer_fn must be a callable. Given: {}".format(normalizer_fn))
    return _SequenceNumericColumn(key, shape=shape, default_value=default_value, dtype=dtype,
                                  normalizer_fn=normalizer_fn)


def _all_equal(tensors):
    with ops.name_scope(None, "assert_all_equal", values=tensors):
        if len(tensors) == 1:
            return tensors[0]
        with ops.control_dependencies([check_ops.assert_equal(tensors[0], t) for t in tensors[1:]]):
            return array_ops.identity(tensors[0])


class _SequenceNumericColumn(_fc._SequenceDenseColumn,
                             collections.namedtuple("_SequenceNumericColumn",
                                                    ["key", "shape", "default_value", "dtype", "normalizer_fn"])):
    @property
    def name(self):
        return self.key

    @property
    def _parse_example_spec(self):
        return {self.key: parsing_ops.VarLenFeature(self.dtype)}

    def _transform_feature(self, inputs):
        tensor = inputs.get(self.key)
        return self.normalizer_fn(tensor) if self.normalizer_fn is not None else tensor

    @property
    def _variable_shape(self):
        return tensor_shape.TensorShape(self.shape)

    def _get_sequence_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        sparse = inputs.get(self)
        dense = sparse_ops.sparse_tensor_to_dense(sparse, default_value=self.default_value)
        dense = array_ops.reshape(dense, array_ops.concat([array_ops.shape(dense)[:1], [-1], self._variable_shape], 0))
        elements = self._variable_shape.num_elements() if sparse.shape.ndims == 2 else 1
        length = _fc_utils.sequence_length_from_sparse_tensor(sparse, num_elements=elements)
        return _fc._SequenceDenseColumn.TensorSequenceLengthPair(dense_tensor=dense, sequence_length=length)


part(__name__, "see tf.feature_column's sequence_categorical_column_with_* and tf.keras.experimental.SequenceFeatures")
