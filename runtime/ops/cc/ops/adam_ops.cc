/* Op registrations of retf's sparse Adam: lazy, DeepRec's AdamAsync, TensorFlow's dense rule for a
   sparse gradient and its gradient-free half. */

#include "shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;
using ::retf::ResourceShape;

namespace {

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

}  // namespace tensorflow
