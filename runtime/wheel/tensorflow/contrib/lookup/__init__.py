"""tf.contrib.lookup: TF 1.15's lookup tables and the vocabulary functions (index_table_from_file, ...), from
TensorFlow's own lookup ops."""
from tensorflow.contrib import part
from tensorflow.python.ops.lookup_ops import DenseHashTable as MutableDenseHashTable  # noqa: F401
from tensorflow.python.ops.lookup_ops import (  # noqa: F401
    IdTableWithHashBuckets,
    InitializableLookupTableBase,
    KeyValueTensorInitializer,
    MutableHashTable,  # noqa: F401
    TableInitializerBase,
    TextFileIdTableInitializer,
    TextFileIndex,
    TextFileInitializer,
    TextFileStringTableInitializer,
    index_table_from_file,
    index_table_from_tensor,
    index_to_string_table_from_file,
    index_to_string_table_from_tensor,
)
from tensorflow.python.ops.lookup_ops import StaticHashTableV1 as HashTable  # noqa: F401

part(__name__, "see tf.compat.v1.lookup and tf.lookup.experimental")
