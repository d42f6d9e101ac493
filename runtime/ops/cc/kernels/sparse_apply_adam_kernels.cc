/* OpKernels of Retf>SparseApplyAdam and Retf>SparseApplyAdamDense, on resource and reference variables. */

// Before any Eigen header: the variable helpers run Eigen expressions on the CPU thread pool.
#define EIGEN_USE_THREADS

#include "sparse_apply_adam_kernels.h"
#include "variable_dtypes.h"

#include <cmath>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/kernels/training_op_helpers.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {
namespace {

// A default Status is OK in every TF 2.x: Status::OK() is gone from TF 2.13, where Status is absl::Status.

using CPUDevice = Eigen::ThreadPoolDevice;

// Checks every index against [0, num_rows), naming the first bad one, then groups them.
template <typename Tindex>
Status GroupCheckedIndices(OpKernelContext* ctx, const Tensor& indices, int64 num_rows,
                           retf::IndexGroups<Tindex>* groups) {
  const auto flat = indices.flat<Tindex>();
  if (flat.size() > retf::kMaxGroupedIndices) {
    return errors::InvalidArgument("at most ", retf::kMaxGroupedIndices, " indices per call, got ", flat.size());
  }
  for (int64 i = 0; i < flat.size(); ++i) {
    const Tindex index = flat(i);
    if (index < 0 || static_cast<int64>(index) >= num_rows) {
      return errors::InvalidArgument("indices[", i, "] = ", index, " is not in [0, ", num_rows,
                                     "): the variable has ", num_rows, " rows");
    }
  }
  retf::GroupIndices(flat.data(), flat.size(), num_rows - 1, groups);
  return Status();
}

Status CheckScalar(OpKernelContext* ctx, int input, const char* name) {
  const Tensor& t = ctx->input(input);
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return errors::InvalidArgument(name, " must be a scalar, got shape ", t.shape().DebugString());
  }
  return Status();
}

// var, m and v (inputs 0-2, locked by the caller) checked against each other and T, and the six
// scalars after them.
template <typename T>
Status GetAdamTables(OpKernelContext* ctx, bool use_exclusive_lock, Tensor* var, Tensor* m, Tensor* v) {
  Tensor* tables[] = {var, m, v};
  for (int i = 0; i < 3; ++i) {
    TF_RETURN_IF_ERROR(GetInputTensorFromVariable<CPUDevice, T>(ctx, i, use_exclusive_lock, true, tables[i]));
  }
  if (!var->IsInitialized() || !m->IsInitialized() || !v->IsInitialized()) {
    return errors::FailedPrecondition("Attempting to use uninitialized variables: ", ctx->op_kernel().requested_input(0),
                                      ", ", ctx->op_kernel().requested_input(1), ", ",
                                      ctx->op_kernel().requested_input(2));
  }
  if (!var->shape().IsSameSize(m->shape()) || !var->shape().IsSameSize(v->shape())) {
    return errors::InvalidArgument("var, m and v must have the same shape, got ", var->shape().DebugString(), ", ",
                                   m->shape().DebugString(), " and ", v->shape().DebugString());
  }
  if (!TensorShapeUtils::IsVectorOrHigher(var->shape())) {
    return errors::InvalidArgument("var must be at least 1-D, got shape ", var->shape().DebugString());
  }
  static const char* const kScalarNames[] = {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"};
  for (int i = 0; i < 6; ++i) TF_RETURN_IF_ERROR(CheckScalar(ctx, 3 + i, kScalarNames[i]));
  return Status();
}

// kDense: TensorFlow's dense Adam for a sparse gradient (every row decays); otherwise lazy Adam
// (only the named rows change). kLeftToRight: the bias-corrected lr rounded as TensorFlow's dense
// Adam (and DeepRec's AdamAsync) round it, lr * sqrt(1 - beta2_power) / (1 - beta1_power) left to
// right, rather than as tfa's LazyAdam does.
template <typename T, typename Tindex, bool kDense, bool kLeftToRight = kDense>
class SparseApplyAdamOp : public OpKernel {
 public:
  explicit SparseApplyAdamOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_locking", &use_exclusive_lock_));
  }

  void Compute(OpKernelContext* ctx) override {
    // Same discipline as TensorFlow's own sparse training ops: locks taken in address order, a
    // shared lock on resource variables unless use_locking asks for an exclusive one, and the
    // variables in copy-on-read mode, updated in place. The dense update too: a variable an
    // embedding lookup gathers from is in that mode already, and updating it as a dense one
    // (copy first) would copy the whole table every step.
    OP_REQUIRES_OK(ctx, retf::CheckVariableDtypes<T>(ctx, {0, 1, 2}));
    auto locks = MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(ctx, use_exclusive_lock_,
                                                                     /*sparse=*/true, {0, 1, 2});
    Tensor var, m, v;
    OP_REQUIRES_OK(ctx, GetAdamTables<T>(ctx, use_exclusive_lock_, &var, &m, &v));

    const Tensor& grad = ctx->input(9);
    const Tensor& indices = ctx->input(10);
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(indices.shape()),
                errors::InvalidArgument("indices must be 1-D, got shape ", indices.shape().DebugString()));
    const int64 num_updates = indices.dim_size(0);
    OP_REQUIRES(ctx, grad.dims() == var.dims() && grad.dim_size(0) == num_updates,
                errors::InvalidArgument("grad must have shape [", num_updates,
                                        ", <var row shape>] with one row per index, got ",
                                        grad.shape().DebugString(), " for var ", var.shape().DebugString()));
    for (int d = 1; d < var.dims(); ++d) {
      OP_REQUIRES(ctx, grad.dim_size(d) == var.dim_size(d),
                  errors::InvalidArgument("grad rows must have var's row shape: grad ",
                                          grad.shape().DebugString(), " vs var ", var.shape().DebugString()));
    }

    const int64 num_rows = var.dim_size(0);
    // Kept per thread so its buffers are reused from step to step.
    static thread_local retf::IndexGroups<Tindex> groups;
    OP_REQUIRES_OK(ctx, GroupCheckedIndices(ctx, indices, num_rows, &groups));
    const bool any_work = kDense ? num_rows > 0 : num_updates > 0 && num_rows > 0;
    if (any_work) {
      const T beta1_power = ctx->input(3).scalar<T>()();
      const T beta2_power = ctx->input(4).scalar<T>()();
      const T lr = ctx->input(5).scalar<T>()();
      retf::functor::AdamCoefficients<T> k;
      // Each rounded as its optimizer rounds it: tfa's LazyAdam, and tf.compat.v1's
      // lr * sqrt(1 - beta2_power) / (1 - beta1_power), left to right.
      k.lr = kLeftToRight ? lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power)
                    : lr * (std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power));
      k.beta1 = ctx->input(6).scalar<T>()();
      k.beta2 = ctx->input(7).scalar<T>()();
      k.epsilon = ctx->input(8).scalar<T>()();
      const int64 row_size = var.NumElements() / num_rows;
      thread::ThreadPool* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
      if (kDense) {
        retf::functor::SparseApplyAdamDense<T, Tindex>()(pool, var.flat<T>().data(), m.flat<T>().data(),
                                                         v.flat<T>().data(), grad.flat<T>().data(), num_rows,
                                                         row_size, groups, k);
      } else {
        retf::functor::SparseApplyAdam<T, Tindex>()(pool, var.flat<T>().data(), m.flat<T>().data(),
                                                    v.flat<T>().data(), grad.flat<T>().data(), row_size, groups, k);
      }
    }
    if (IsRefType(ctx->input_dtype(0))) ctx->forward_ref_input_to_ref_output(0, 0);
  }

 private:
  bool use_exclusive_lock_;
};

// The untouched rows of TensorFlow's dense Adam for a sparse gradient, before the gradient is known
// (Retf>AdamDecayUntouched): var, m and v under the same locks as the update ops.
template <typename T, typename Tindex>
class AdamDecayUntouchedOp : public OpKernel {
 public:
  explicit AdamDecayUntouchedOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_locking", &use_exclusive_lock_));
  }

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, retf::CheckVariableDtypes<T>(ctx, {0, 1, 2}));
    auto locks = MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(ctx, use_exclusive_lock_,
                                                                     /*sparse=*/true, {0, 1, 2});
    Tensor var, m, v;
    OP_REQUIRES_OK(ctx, GetAdamTables<T>(ctx, use_exclusive_lock_, &var, &m, &v));
    const Tensor& indices = ctx->input(9);
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(indices.shape()),
                errors::InvalidArgument("indices must be 1-D, got shape ", indices.shape().DebugString()));

    const int64 num_rows = var.dim_size(0);
    static thread_local retf::IndexGroups<Tindex> groups;
    OP_REQUIRES_OK(ctx, GroupCheckedIndices(ctx, indices, num_rows, &groups));
    if (num_rows > 0) {
      const T beta1_power = ctx->input(3).scalar<T>()();
      const T beta2_power = ctx->input(4).scalar<T>()();
      const T lr = ctx->input(5).scalar<T>()();
      retf::functor::AdamCoefficients<T> k;
      k.lr = lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);  // as the dense Adam rounds it
      k.beta1 = ctx->input(6).scalar<T>()();
      k.beta2 = ctx->input(7).scalar<T>()();
      k.epsilon = ctx->input(8).scalar<T>()();
      retf::functor::AdamDecayUntouched<T, Tindex>()(var.flat<T>().data(), m.flat<T>().data(), v.flat<T>().data(),
                                                     num_rows, var.NumElements() / num_rows, groups.unique.data(),
                                                     groups.size(), k);
    }
    if (IsRefType(ctx->input_dtype(0))) ctx->forward_ref_input_to_ref_output(0, 0);
  }

 private:
  bool use_exclusive_lock_;
};

#define RETF_REGISTER_DECAY_KERNELS(T, Tindex)                                                       \
  REGISTER_KERNEL_BUILDER(                                                                            \
      Name("Retf>AdamDecayUntouched").Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint<Tindex>("Tindices"), \
      AdamDecayUntouchedOp<T, Tindex>);                                                               \
  REGISTER_KERNEL_BUILDER(                                                                            \
      Name("Retf>AdamDecayUntouchedRef").Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint<Tindex>("Tindices"), \
      AdamDecayUntouchedOp<T, Tindex>);

RETF_REGISTER_DECAY_KERNELS(float, int32);
RETF_REGISTER_DECAY_KERNELS(float, int64);
RETF_REGISTER_DECAY_KERNELS(double, int32);
RETF_REGISTER_DECAY_KERNELS(double, int64);
#undef RETF_REGISTER_DECAY_KERNELS

#define RETF_REGISTER_KERNEL(name, T, Tindex, ...)                                               \
  REGISTER_KERNEL_BUILDER(                                                                         \
      Name(name).Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint<Tindex>("Tindices"),     \
      SparseApplyAdamOp<T, Tindex, __VA_ARGS__>);

#define RETF_REGISTER_KERNELS(T, Tindex)                                \
  RETF_REGISTER_KERNEL("Retf>SparseApplyAdam", T, Tindex, false)        \
  RETF_REGISTER_KERNEL("Retf>SparseApplyAdamRef", T, Tindex, false)     \
  RETF_REGISTER_KERNEL("Retf>SparseApplyAdamDense", T, Tindex, true)    \
  RETF_REGISTER_KERNEL("Retf>SparseApplyAdamDenseRef", T, Tindex, true)   \
  RETF_REGISTER_KERNEL("Retf>SparseApplyAdamAsync", T, Tindex, false, true) \
  RETF_REGISTER_KERNEL("Retf>SparseApplyAdamAsyncRef", T, Tindex, false, true)

RETF_REGISTER_KERNELS(float, int32);
RETF_REGISTER_KERNELS(float, int64);
RETF_REGISTER_KERNELS(double, int32);
RETF_REGISTER_KERNELS(double, int64);

#undef RETF_REGISTER_KERNELS
#undef RETF_REGISTER_KERNEL

}  // namespace
}  // namespace tensorflow
