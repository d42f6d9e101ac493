/* Op registrations of retf's fused embedding lookups, plain and safe, and their gradients. */

#include "shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;
using ::retf::ResourceShape;

namespace {

// ids and segment_ids are parallel vectors of length nnz; weights is one too, or empty
// (unweighted).
Status CheckSparseIds(InferenceContext* c, int ids_input) {
  ShapeHandle ids, segment_ids, weights;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(ids_input), 1, &ids));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(ids_input + 1), 1, &segment_ids));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(ids_input + 2), 1, &weights));
  DimensionHandle nnz;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(ids, 0), c->Dim(segment_ids, 0), &nnz));
  return Status();
}

Status EmbeddingLookupSparseShape(InferenceContext* c, bool is_resource) {
  ShapeHandle params;
  TF_RETURN_IF_ERROR(c->WithRank(is_resource ? ResourceShape(c, 0) : c->input(0), 2, &params));
  TF_RETURN_IF_ERROR(CheckSparseIds(c, 1));
  // One row per segment up to the largest segment id, as tf.math.segment_sum gives.
  c->set_output(0, c->Matrix(c->UnknownDim(), c->Dim(params, 1)));
  return Status();
}

Status EmbeddingLookupSparseGradShape(InferenceContext* c) {
  ShapeHandle grad;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &grad));
  TF_RETURN_IF_ERROR(CheckSparseIds(c, 1));
  DimensionHandle num_unique = c->UnknownDim();
  c->set_output(0, c->Vector(num_unique));
  c->set_output(1, c->Matrix(num_unique, c->Dim(grad, 1)));
  return Status();
}

Status SafeEmbeddingLookupSparseShape(InferenceContext* c, bool is_resource) {
  ShapeHandle params, num_rows;
  TF_RETURN_IF_ERROR(c->WithRank(is_resource ? ResourceShape(c, 0) : c->input(0), 2, &params));
  TF_RETURN_IF_ERROR(CheckSparseIds(c, 1));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 0, &num_rows));
  DimensionHandle rows;
  TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(4, &rows));
  c->set_output(0, c->Matrix(rows, c->Dim(params, 1)));
  return Status();
}

}  // namespace

#define RETF_EMBEDDING_LOOKUP_SPARSE_INPUTS              \
  Input("ids: Tidx")                                     \
      .Input("segment_ids: Tsegmentids")                 \
      .Input("weights: T")                 \
      .Output("output: T")                               \
      .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'") \
      .Attr("T: {float, double}")                        \
      .Attr("Tidx: {int32, int64} = DT_INT64")           \
      .Attr("Tsegmentids: {int32, int64} = DT_INT64")

// Combined embeddings of a sparse batch, fused: output[s] combines params[ids[j]] over the j
// with segment_ids[j] == s (sorted ascending), weighted by weights[j] when given, like
// tf.compat.v1.nn.embedding_lookup_sparse with one params tensor; an empty weights vector
// means unweighted. output has
// max(segment_ids) + 1 rows; empty segments are zero.
REGISTER_OP("Retf>EmbeddingLookupSparse")
    .Input("params: T")
    .RETF_EMBEDDING_LOOKUP_SPARSE_INPUTS
    .SetShapeFn([](InferenceContext* c) { return EmbeddingLookupSparseShape(c, false); });

// Retf>EmbeddingLookupSparse reading the rows of a resource variable in place.
REGISTER_OP("Retf>ResourceEmbeddingLookupSparse")
    .Input("params: resource")
    .RETF_EMBEDDING_LOOKUP_SPARSE_INPUTS
    .SetShapeFn([](InferenceContext* c) { return EmbeddingLookupSparseShape(c, true); });

#define RETF_SAFE_EMBEDDING_LOOKUP_SPARSE_INPUTS          \
  Input("ids: Tidx")                                     \
      .Input("rows: Tsegmentids")                        \
      .Input("weights: T")                               \
      .Input("num_rows: int64")                          \
      .Output("output: T")                               \
      .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'") \
      .Attr("T: {float, double}")                        \
      .Attr("Tidx: {int32, int64} = DT_INT64")           \
      .Attr("Tsegmentids: {int32, int64} = DT_INT64")

// tf.compat.v1.nn.safe_embedding_lookup_sparse with one params tensor and no default_id, fused: entry j
// (row rows[j], in [0, num_rows), in any order) is left out when ids[j] < 0, or, weighted and combined by mean or
// sqrtn, when weights[j] <= 0; output [num_rows, dim] combines each row's other entries in their order, and a row
// with none is zero. An empty weights vector means unweighted.
REGISTER_OP("Retf>SafeEmbeddingLookupSparse")
    .Input("params: T")
    .RETF_SAFE_EMBEDDING_LOOKUP_SPARSE_INPUTS
    .SetShapeFn([](InferenceContext* c) { return SafeEmbeddingLookupSparseShape(c, false); });

// Retf>SafeEmbeddingLookupSparse reading the rows of a resource variable in place.
REGISTER_OP("Retf>ResourceSafeEmbeddingLookupSparse")
    .Input("params: resource")
    .RETF_SAFE_EMBEDDING_LOOKUP_SPARSE_INPUTS
    .SetShapeFn([](InferenceContext* c) { return SafeEmbeddingLookupSparseShape(c, true); });

#undef RETF_SAFE_EMBEDDING_LOOKUP_SPARSE_INPUTS
#undef RETF_EMBEDDING_LOOKUP_SPARSE_INPUTS

// Gradient of Retf>EmbeddingLookupSparse with respect to params, as the rows of an
// IndexedSlices: values[u] is the gradient of row unique_ids[u]; unique_ids are the distinct
// ids in ascending order.
REGISTER_OP("Retf>EmbeddingLookupSparseGrad")
    .Input("grad: T")
    .Input("ids: Tidx")
    .Input("segment_ids: Tsegmentids")
    .Input("weights: T")
    .Output("unique_ids: Tidx")
    .Output("values: T")
    .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'")
    .Attr("T: {float, double}")
    .Attr("Tidx: {int32, int64} = DT_INT64")
    .Attr("Tsegmentids: {int32, int64} = DT_INT64")
    .SetShapeFn(EmbeddingLookupSparseGradShape);

// Gradient of Retf>SafeEmbeddingLookupSparse with respect to params, over the entries it keeps, for
// grad [num_rows, dim]: values[u] is the gradient of row unique_ids[u] (ascending). Where a row keeps no
// entry, id 0 is among them (with what its entries give, or zeros), as TensorFlow's safe lookup fills
// such a row with id 0 and gives it a zero gradient: a sparse optimizer updates the same rows.
REGISTER_OP("Retf>SafeEmbeddingLookupSparseGrad")
    .Input("grad: T")
    .Input("ids: Tidx")
    .Input("rows: Tsegmentids")
    .Input("weights: T")
    .Output("unique_ids: Tidx")
    .Output("values: T")
    .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'")
    .Attr("T: {float, double}")
    .Attr("Tidx: {int32, int64} = DT_INT64")
    .Attr("Tsegmentids: {int32, int64} = DT_INT64")
    .SetShapeFn(EmbeddingLookupSparseGradShape);

}  // namespace tensorflow
