"""The raw retf ops, one module per op family, and their gradients.

Each function loads the op library on first use. Variables may be given as resource variables
(or their handles) or, in graph mode, as reference variables. Importing this package registers the
ops' gradients with TensorFlow, once per process.

- ``adam``: sparse_apply_adam, sparse_apply_adam_async, sparse_apply_adam_dense, adam_decay_untouched.
- ``adagrad_ftrl``: sparse_apply_adagrad, sparse_apply_adagrad_decay, sparse_apply_ftrl.
- ``embedding``: embedding_lookup_sparse and embedding_lookup_sparse_grad, its gradient; safe_embedding_lookup_sparse,
  which leaves out invalid ids and weights and zeroes empty rows.
- ``matmul``: transposed_matmul and input_gradient, and route_weight_gradients into MatMul's gradient.
- ``pair_concat``: pair_concat_grad, pair_dense_input_grad, repeated_pair_grad, and
  route_pair_concat_gradients into the gradients of ConcatV2, MatMul, Tile, Sub and Mul;
  route_pair_dense_products, a dense layer over such a concat of a repeated query by its pieces' linearity.
- ``batch_matmul``: route_batch_matmul, retf's kernel for small batch products of tf.matmul.
- ``bias``: route_bias_gradients, retf's kernel for BiasAddGrad (a bias's gradient, the column sums of its layer's
  output gradient).
- ``moments``: moments and batch_normalize (a matrix's batch normalization), layer_moments and layer_normalize (a
  layer normalization of a matrix's rows), and route_batch_moments and route_layer_moments into tf.nn.moments and
  tf.nn.batch_normalization.
- ``gru``: gru_recurrence, and route_dynamic_rnn into tf.nn.dynamic_rnn's loop over a GRUCell.
- ``decode_csv``: use_fast_decode_csv, retf's kernel for TensorFlow's DecodeCSV.
- ``allocator``: use_large_block_allocator, retf's CPU allocator for TensorFlow.
"""

from retf.ops._common import _loaded_library  # noqa: F401  (the op checks call it)
from retf.ops.adagrad_ftrl import sparse_apply_adagrad, sparse_apply_adagrad_decay, sparse_apply_ftrl
from retf.ops.adam import adam_decay_untouched, sparse_apply_adam, sparse_apply_adam_async, sparse_apply_adam_dense
from retf.ops.allocator import use_large_block_allocator
from retf.ops.batch_matmul import BATCH_MATMUL_LABEL, labels_for_retf, route_batch_matmul
from retf.ops.bias import BIAS_ADD_GRAD_LABEL, bias_gradient_takes_retf, route_bias_gradients
from retf.ops.decode_csv import DECODE_CSV_LABEL, use_fast_decode_csv
from retf.ops.embedding import (
    EMBEDDING_LOOKUP_SPARSE,
    RESOURCE_EMBEDDING_LOOKUP_SPARSE,
    RESOURCE_SAFE_EMBEDDING_LOOKUP_SPARSE,
    SAFE_EMBEDDING_LOOKUP_SPARSE,
    embedding_lookup_sparse,
    embedding_lookup_sparse_grad,
    safe_embedding_lookup_sparse,
)
from retf.ops.gru import GRU_RECURRENCE, gru_recurrence, route_dynamic_rnn, routed_dynamic_rnn_loop
from retf.ops.matmul import (
    SWAPPED_INPUT_GRADIENT_MIN_COLUMNS,
    WEIGHT_GRADIENT_MAX_VALUES,
    input_gradient,
    route_weight_gradients,
    routed_matmul_gradient,
    transposed_matmul,
)
from retf.ops.moments import (
    batch_normalize,
    layer_moments,
    layer_normalize,
    moments,
    route_batch_moments,
    route_layer_moments,
)
from retf.ops.pair_concat import (
    PAIR_CONCAT_GRAD,
    PAIR_DENSE_INPUT_GRAD,
    REPEATED_PAIR_GRAD,
    pair_concat_grad,
    pair_dense_input_grad,
    repeated_pair_grad,
    route_pair_concat_gradients,
    route_pair_dense_products,
    routed_concat_gradient,
    routed_mat_mul,
    routed_pair_dense_gradient,
    routed_piece_gradient,
    routed_tile_gradient,
)

__all__ = [
    "BATCH_MATMUL_LABEL",
    "BIAS_ADD_GRAD_LABEL",
    "DECODE_CSV_LABEL",
    "EMBEDDING_LOOKUP_SPARSE",
    "GRU_RECURRENCE",
    "PAIR_CONCAT_GRAD",
    "PAIR_DENSE_INPUT_GRAD",
    "REPEATED_PAIR_GRAD",
    "RESOURCE_EMBEDDING_LOOKUP_SPARSE",
    "RESOURCE_SAFE_EMBEDDING_LOOKUP_SPARSE",
    "SAFE_EMBEDDING_LOOKUP_SPARSE",
    "SWAPPED_INPUT_GRADIENT_MIN_COLUMNS",
    "WEIGHT_GRADIENT_MAX_VALUES",
    "adam_decay_untouched",
    "batch_normalize",
    "bias_gradient_takes_retf",
    "embedding_lookup_sparse",
    "embedding_lookup_sparse_grad",
    "gru_recurrence",
    "input_gradient",
    "labels_for_retf",
    "layer_moments",
    "layer_normalize",
    "moments",
    "pair_concat_grad",
    "pair_dense_input_grad",
    "repeated_pair_grad",
    "route_batch_matmul",
    "route_batch_moments",
    "route_bias_gradients",
    "route_dynamic_rnn",
    "route_layer_moments",
    "route_pair_concat_gradients",
    "route_pair_dense_products",
    "route_weight_gradients",
    "routed_concat_gradient",
    "routed_dynamic_rnn_loop",
    "routed_mat_mul",
    "routed_matmul_gradient",
    "routed_pair_dense_gradient",
    "routed_piece_gradient",
    "routed_tile_gradient",
    "safe_embedding_lookup_sparse",
    "sparse_apply_adagrad",
    "sparse_apply_adagrad_decay",
    "sparse_apply_adam",
    "sparse_apply_adam_async",
    "sparse_apply_adam_dense",
    "sparse_apply_ftrl",
    "transposed_matmul",
    "use_fast_decode_csv",
    "use_large_block_allocator",
]
