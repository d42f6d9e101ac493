/* Op registrations of the retf op library: interfaces and shape functions only. */

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

#include <vector>

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

// A default Status is OK in every TF 2.x: Status::OK() is gone from TF 2.13, where Status is absl::Status.

// The shape of the variable behind a resource input; unknown when the handle carries none.
ShapeHandle ResourceShape(InferenceContext* c, int input) {
  const auto* handle_data = c->input_handle_shapes_and_types(input);
  if (handle_data != nullptr && !handle_data->empty() && (*handle_data)[0].dtype != DT_INVALID) {
    return (*handle_data)[0].shape;
  }
  return c->UnknownShape();
}

// var, m and v (inputs 0-2) merged into one shape; beta1_power .. epsilon (3-8) scalars.
Status AdamTablesShape(InferenceContext* c, bool is_resource, ShapeHandle* var) {
  *var = is_resource ? ResourceShape(c, 0) : c->input(0);
  TF_RETURN_IF_ERROR(c->Merge(*var, is_resource ? ResourceShape(c, 1) : c->input(1), var));
  TF_RETURN_IF_ERROR(c->Merge(*var, is_resource ? ResourceShape(c, 2) : c->input(2), var));
  ShapeHandle unused;
  for (int i = 3; i <= 8; ++i) {
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
  }
  return Status();
}

Status SparseApplyAdamShape(InferenceContext* c, bool is_resource) {
  ShapeHandle var;
  TF_RETURN_IF_ERROR(AdamTablesShape(c, is_resource, &var));
  ShapeHandle grad = c->input(9);
  ShapeHandle indices;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(10), 1, &indices));
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(grad, 1, &grad));
  DimensionHandle num_updates;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(indices, 0), c->Dim(grad, 0), &num_updates));
  if (c->RankKnown(var)) {
    TF_RETURN_IF_ERROR(c->WithRankAtLeast(var, 1, &var));
    ShapeHandle var_row, grad_row;
    TF_RETURN_IF_ERROR(c->Subshape(var, 1, &var_row));
    TF_RETURN_IF_ERROR(c->Subshape(grad, 1, &grad_row));
    TF_RETURN_IF_ERROR(c->Merge(var_row, grad_row, &var_row));
    TF_RETURN_IF_ERROR(c->Concatenate(c->Vector(c->Dim(var, 0)), var_row, &var));
  }
  if (!is_resource) c->set_output(0, var);
  return Status();
}

Status AdamDecayShape(InferenceContext* c, bool is_resource) {
  ShapeHandle var, unused;
  TF_RETURN_IF_ERROR(AdamTablesShape(c, is_resource, &var));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(9), 1, &unused));
  if (!is_resource) c->set_output(0, var);
  return Status();
}

// The variable and its slots (inputs 0 .. num_tables) share one shape; scalars are rank 0; grad
// is [N, <var row shape>] with indices [N]. Reference ops output var.
Status SparseApplyRowsShape(InferenceContext* c, bool is_resource, int num_tables, std::vector<int> scalars,
                            int grad_input) {
  ShapeHandle var = is_resource ? ResourceShape(c, 0) : c->input(0);
  for (int i = 1; i < num_tables; ++i) {
    TF_RETURN_IF_ERROR(c->Merge(var, is_resource ? ResourceShape(c, i) : c->input(i), &var));
  }
  ShapeHandle unused;
  for (int i : scalars) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
  ShapeHandle grad = c->input(grad_input);
  ShapeHandle indices;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(grad_input + 1), 1, &indices));
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(grad, 1, &grad));
  DimensionHandle num_updates;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(indices, 0), c->Dim(grad, 0), &num_updates));
  if (c->RankKnown(var)) {
    TF_RETURN_IF_ERROR(c->WithRankAtLeast(var, 1, &var));
    ShapeHandle var_row, grad_row;
    TF_RETURN_IF_ERROR(c->Subshape(var, 1, &var_row));
    TF_RETURN_IF_ERROR(c->Subshape(grad, 1, &grad_row));
    TF_RETURN_IF_ERROR(c->Merge(var_row, grad_row, &var_row));
    TF_RETURN_IF_ERROR(c->Concatenate(c->Vector(c->Dim(var, 0)), var_row, &var));
  }
  if (!is_resource) c->set_output(0, var);
  return Status();
}

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

}  // namespace

#define RETF_ADAM_DECAY_INPUTS              \
  Input("beta1_power: T")                   \
      .Input("beta2_power: T")              \
      .Input("lr: T")                       \
      .Input("beta1: T")                    \
      .Input("beta2: T")                    \
      .Input("epsilon: T")                  \
      .Input("indices: Tindices")           \
      .Attr("T: {float, double}")           \
      .Attr("Tindices: {int32, int64}")     \
      .Attr("use_locking: bool = false")

#define RETF_SPARSE_APPLY_ADAM_INPUTS       \
  Input("beta1_power: T")                   \
      .Input("beta2_power: T")              \
      .Input("lr: T")                       \
      .Input("beta1: T")                    \
      .Input("beta2: T")                    \
      .Input("epsilon: T")                  \
      .Input("grad: T")                     \
      .Input("indices: Tindices")           \
      .Attr("T: {float, double}")           \
      .Attr("Tindices: {int32, int64}")     \
      .Attr("use_locking: bool = false")

// Lazy Adam on the rows of resource variables var, m and v named by indices.
//
// Rows named more than once have their gradients summed first. For each touched row:
// m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g^2;
// var -= lr * (sqrt(1 - beta2_power) / (1 - beta1_power)) * m / (sqrt(v) + epsilon).
// Untouched rows, and their m and v, are left as they are.
REGISTER_OP("Retf>SparseApplyAdam")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .RETF_SPARSE_APPLY_ADAM_INPUTS
    .SetShapeFn([](InferenceContext* c) { return SparseApplyAdamShape(c, true); });

// Retf>SparseApplyAdam on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyAdamRef")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .RETF_SPARSE_APPLY_ADAM_INPUTS
    .Output("out: Ref(T)")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyAdamShape(c, false); });

// TensorFlow's dense Adam for a sparse gradient, as tf.compat.v1.train.AdamOptimizer applies
// one, in a single pass. Rows named more than once have their gradients summed first (g; zero for
// rows not named). For every row: m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g^2;
// var -= lr * sqrt(1 - beta2_power) / (1 - beta1_power) * m / (sqrt(v) + epsilon).
REGISTER_OP("Retf>SparseApplyAdamDense")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .RETF_SPARSE_APPLY_ADAM_INPUTS
    .SetShapeFn([](InferenceContext* c) { return SparseApplyAdamShape(c, true); });

// Retf>SparseApplyAdamDense on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyAdamDenseRef")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .RETF_SPARSE_APPLY_ADAM_INPUTS
    .Output("out: Ref(T)")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyAdamShape(c, false); });

// DeepRec's AdamAsync sparse update: Retf>SparseApplyAdam's lazy rule with the bias-corrected lr
// rounded as lr * sqrt(1 - beta2_power) / (1 - beta1_power), left to right. The beta powers are
// inputs; retf.train.AdamAsyncOptimizer advances its per-variable ones after this op.
REGISTER_OP("Retf>SparseApplyAdamAsync")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .RETF_SPARSE_APPLY_ADAM_INPUTS
    .SetShapeFn([](InferenceContext* c) { return SparseApplyAdamShape(c, true); });

// Retf>SparseApplyAdamAsync on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyAdamAsyncRef")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .RETF_SPARSE_APPLY_ADAM_INPUTS
    .Output("out: Ref(T)")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyAdamShape(c, false); });

#undef RETF_SPARSE_APPLY_ADAM_INPUTS

// The rows of TensorFlow's dense Adam for a sparse gradient that the gradient does not name, on
// their own: m = beta1 * m, v = beta2 * v, var -= lr_t * m / (sqrt(v) + epsilon), rounded as
// Retf>SparseApplyAdamDense rounds them. Needs only the indices, so it can run while the
// gradient is still being computed; Retf>SparseApplyAdamAsync on the same indices then does the
// named rows, and the two give Retf>SparseApplyAdamDense's result, bit for bit.
REGISTER_OP("Retf>AdamDecayUntouched")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .RETF_ADAM_DECAY_INPUTS
    .SetShapeFn([](InferenceContext* c) { return AdamDecayShape(c, true); });

// Retf>AdamDecayUntouched on reference variables; out is var.
REGISTER_OP("Retf>AdamDecayUntouchedRef")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .RETF_ADAM_DECAY_INPUTS
    .Output("out: Ref(T)")
    .SetShapeFn([](InferenceContext* c) { return AdamDecayShape(c, false); });

#undef RETF_ADAM_DECAY_INPUTS

#define RETF_SPARSE_ATTRS                   \
  Attr("T: {float, double}")                \
      .Attr("Tindices: {int32, int64}")     \
      .Attr("use_locking: bool = false")

// TensorFlow's SparseApplyAdagrad after the optimizer's duplicate summing, fused: rows named more
// than once have their gradients summed first (in position order), then each named row once:
// accum += g * g (when update_slots); var -= lr * g * rsqrt(accum) (lr * g / sqrt(accum) for rows of
// one element).
REGISTER_OP("Retf>SparseApplyAdagrad")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("grad: T")
    .Input("indices: Tindices")
    .RETF_SPARSE_ATTRS
    .Attr("update_slots: bool = true")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, true, 2, {2}, 3); });

// Retf>SparseApplyAdagrad on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyAdagradRef")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("lr: T")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Output("out: Ref(T)")
    .RETF_SPARSE_ATTRS
    .Attr("update_slots: bool = true")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, false, 2, {2}, 3); });

// TensorFlow's SparseApplyAdagradV2, fused likewise: var -= lr * g / (sqrt(accum) + epsilon).
REGISTER_OP("Retf>SparseApplyAdagradV2")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Input("indices: Tindices")
    .RETF_SPARSE_ATTRS
    .Attr("update_slots: bool = true")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, true, 2, {2, 3}, 4); });

// Retf>SparseApplyAdagradV2 on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyAdagradV2Ref")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("lr: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Output("out: Ref(T)")
    .RETF_SPARSE_ATTRS
    .Attr("update_slots: bool = true")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, false, 2, {2, 3}, 4); });

// DeepRec's AdagradDecay sparse update, fused: per named row (duplicates summed first), when
// global_step / decay_step (integer division) exceeds the row's count in accum_decay_power
// (element r for row r), accum = max(accum * decay_rate, decay_baseline) and the count goes up by
// one; then Adagrad's update.
REGISTER_OP("Retf>SparseApplyAdagradDecay")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("accum_decay_power: resource")
    .Input("lr: T")
    .Input("decay_step: Tstep")
    .Input("decay_rate: T")
    .Input("decay_baseline: T")
    .Input("global_step: Tstep")
    .Input("grad: T")
    .Input("indices: Tindices")
    .RETF_SPARSE_ATTRS
    .Attr("Tstep: {int32, int64}")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, true, 2, {3, 4, 5, 6, 7}, 8); });

// Retf>SparseApplyAdagradDecay on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyAdagradDecayRef")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("accum_decay_power: Ref(Tstep)")
    .Input("lr: T")
    .Input("decay_step: Tstep")
    .Input("decay_rate: T")
    .Input("decay_baseline: T")
    .Input("global_step: Tstep")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Output("out: Ref(T)")
    .RETF_SPARSE_ATTRS
    .Attr("Tstep: {int32, int64}")
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, false, 2, {3, 4, 5, 6, 7}, 8); });

// TensorFlow's SparseApplyFtrl (multiply_linear_by_lr false, as tf.compat.v1.train.FtrlOptimizer
// runs it) after the optimizer's duplicate summing, fused: each named row once, with the same
// formulas and roundings as TensorFlow's kernel.
REGISTER_OP("Retf>SparseApplyFtrl")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("linear: resource")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("lr_power: T")
    .RETF_SPARSE_ATTRS
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, true, 3, {5, 6, 7, 8}, 3); });

// Retf>SparseApplyFtrl on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyFtrlRef")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("linear: Ref(T)")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("lr_power: T")
    .Output("out: Ref(T)")
    .RETF_SPARSE_ATTRS
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, false, 3, {5, 6, 7, 8}, 3); });

// TensorFlow's SparseApplyFtrlV2 (with l2_shrinkage), fused likewise.
REGISTER_OP("Retf>SparseApplyFtrlV2")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("linear: resource")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("l2_shrinkage: T")
    .Input("lr_power: T")
    .RETF_SPARSE_ATTRS
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, true, 3, {5, 6, 7, 8, 9}, 3); });

// Retf>SparseApplyFtrlV2 on reference variables; out is var.
REGISTER_OP("Retf>SparseApplyFtrlV2Ref")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("linear: Ref(T)")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("l2_shrinkage: T")
    .Input("lr_power: T")
    .Output("out: Ref(T)")
    .RETF_SPARSE_ATTRS
    .SetShapeFn([](InferenceContext* c) { return SparseApplyRowsShape(c, false, 3, {5, 6, 7, 8, 9}, 3); });

#undef RETF_SPARSE_ATTRS

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

// a^T b for matrices a [K, M] and b [K, N]: the weight gradient of a dense layer, whose input is a
// and output gradient b. What MatMul computes with transpose_a = true, each chunk of K's rows summed
// on one thread and the chunks' sums added in order (the result does not depend on the threads).
REGISTER_OP("Retf>TransposedMatMul")
    .Input("a: T")
    .Input("b: T")
    .Output("product: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle a, b;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &b));
      DimensionHandle rows;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(a, 0), c->Dim(b, 0), &rows));
      c->set_output(0, c->Matrix(c->Dim(a, 1), c->Dim(b, 1)));
      return Status();
    });

// The input gradient of a dense layer z = concat(pieces, -1) w, for P pieces of like's shape [..., D]
// (DIN's activation unit: [x, y, x - y, x * y]) and grad = dL/dz as a matrix: input_grad = grad w^T
// ([rows, P * D], the concat's gradient as the layer sees it) and piece_grads[i] = grad w_i^T (like's
// shape), w_i the i-th block of D rows of w. Each output is computed only where a consumer of it runs:
// retf routes the layer's whole gradient through cheaper products and reads none of them, unless a
// program asks for the gradient of the concat or of a piece itself.
REGISTER_OP("Retf>PairDenseInputGrad")
    .Input("grad: T")
    .Input("w: T")
    .Input("like: T")
    .Output("input_grad: T")
    .Output("piece_grads: P * T")
    .Attr("P: int >= 1")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      int p;
      TF_RETURN_IF_ERROR(c->GetAttr("P", &p));
      ShapeHandle grad, w, like;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &grad));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &w));
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(2), 1, &like));
      DimensionHandle units;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(grad, 1), c->Dim(w, 1), &units));
      DimensionHandle width = c->Dim(w, 0);
      if (c->RankKnown(like)) {
        TF_RETURN_IF_ERROR(c->Multiply(c->Dim(like, c->Rank(like) - 1), p, &width));
        TF_RETURN_IF_ERROR(c->Merge(width, c->Dim(w, 0), &width));
      }
      c->set_output(0, c->Matrix(c->Dim(grad, 0), width));
      for (int i = 0; i < p; ++i) c->set_output(1 + i, like);
      return Status();
    });

// The operands' gradients of a dense layer z = concat(pieces, -1) w over x, y and their differences and
// product, where x repeats each row of query [B, D] over a sequence (DIN's query against each step of the
// behaviour, y [..., D] with R = B x T rows, the rows of x's b-th query consecutive). With grad = dL/dz
// [R, units], w_x the sum of w's signed blocks that x's pieces take and w_y and w_p likewise, parts = grad
// [w_y; w_p]^T [R, 2 x D] (w_x's part left out of the per-step product): grad_y = parts_y + parts_p x;
// query_grad = sums w_x^T + the sum over the query's steps of parts_p y (sums [B, units] being grad summed
// over each query's steps), the query's whole gradient; grad_x = grad w_x^T + parts_p y, x's own gradient
// per step. Each output is computed only where a consumer of it runs: retf's Tile gradient takes
// query_grad where grad_x would only be summed over the sequence. Sums are in order: units from zero,
// then steps from the first.
REGISTER_OP("Retf>RepeatedPairGrad")
    .Input("parts: T")
    .Input("query: T")
    .Input("y: T")
    .Input("grad: T")
    .Input("w_x: T")
    .Input("sums: T")
    .Output("grad_y: T")
    .Output("query_grad: T")
    .Output("grad_x: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle parts, query, y, grad, w_x, sums;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &parts));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &query));
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(2), 1, &y));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 2, &grad));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 2, &w_x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 2, &sums));
      DimensionHandle d = c->Dim(query, 1), units, rows;
      TF_RETURN_IF_ERROR(c->Merge(d, c->Dim(w_x, 0), &d));
      if (c->RankKnown(y)) TF_RETURN_IF_ERROR(c->Merge(d, c->Dim(y, c->Rank(y) - 1), &d));
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(grad, 1), c->Dim(w_x, 1), &units));
      TF_RETURN_IF_ERROR(c->Merge(units, c->Dim(sums, 1), &units));
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(parts, 0), c->Dim(grad, 0), &rows));
      c->set_output(0, y);
      c->set_output(1, c->Matrix(c->Dim(query, 0), d));
      c->set_output(2, y);
      return Status();
    });

// The gradient of concat([x, y, x - y, x * y, ...], axis=-1), for x and y of one shape [..., D]
// (DIN's activation unit builds its input so): each of the N pieces is one of "x", "y", "x-y",
// "y-x", "x*y", with x and y each once. grad_x and grad_y are the whole gradients of x and y
// through the concat and its differences and products, each the direct piece's slice first, then
// the others' parts in piece order (TensorFlow's AddN may add the same terms in another order).
// piece_grads are the concat gradient's slices, computed only where used.
REGISTER_OP("Retf>PairConcatGrad")
    .Input("grad: T")
    .Input("x: T")
    .Input("y: T")
    .Output("grad_x: T")
    .Output("grad_y: T")
    .Output("piece_grads: N * T")
    .Attr("pieces: list(string)")
    .Attr("N: int >= 3")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      int n;
      TF_RETURN_IF_ERROR(c->GetAttr("N", &n));
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(1), 1, &x));
      TF_RETURN_IF_ERROR(c->Merge(x, c->input(2), &x));
      ShapeHandle grad;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &grad));
      if (c->RankKnown(x) && c->RankKnown(grad)) {
        const int rank = c->Rank(x);
        TF_RETURN_IF_ERROR(c->WithRank(grad, rank, &grad));
        ShapeHandle outer_x, outer_grad;
        TF_RETURN_IF_ERROR(c->Subshape(x, 0, rank - 1, &outer_x));
        TF_RETURN_IF_ERROR(c->Subshape(grad, 0, rank - 1, &outer_grad));
        TF_RETURN_IF_ERROR(c->Merge(outer_x, outer_grad, &outer_x));
        DimensionHandle width;
        TF_RETURN_IF_ERROR(c->Multiply(c->Dim(x, rank - 1), n, &width));
        TF_RETURN_IF_ERROR(c->Merge(width, c->Dim(grad, rank - 1), &width));
        TF_RETURN_IF_ERROR(c->Concatenate(outer_x, c->Vector(c->Dim(x, rank - 1)), &x));
      }
      for (int i = 0; i < n + 2; ++i) c->set_output(i, x);
      return Status();
    });

}  // namespace tensorflow
