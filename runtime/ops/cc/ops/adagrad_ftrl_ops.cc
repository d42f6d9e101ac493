/* Op registrations of retf's sparse Adagrad, AdagradDecay and FTRL. */

#include <vector>

#include "shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;
using ::retf::ResourceShape;

namespace {

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

}  // namespace

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

}  // namespace tensorflow
