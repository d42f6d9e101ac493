/* OpKernels of the fused sparse Adagrad, AdagradDecay and FTRL updates, on resource and reference variables. */

// Before any Eigen header: the variable helpers run Eigen expressions on the CPU thread pool.
#define EIGEN_USE_THREADS

#include <initializer_list>
#include <utility>
#include <vector>

#include "sparse_apply_rows.h"
#include "variable_dtypes.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/kernels/training_op_helpers.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {
namespace {

// A default Status is OK in every TF 2.x: Status::OK() is gone from TF 2.13, where Status is absl::Status.

using CPUDevice = Eigen::ThreadPoolDevice;

// What every fused sparse update checks and prepares: the variable and its same-shaped slots
// (inputs 0 .. num_tables), scalar hyperparameters, grad [N, <var row shape>], indices [N] all in
// [0, rows), grouped.
template <typename T, typename Tindex>
struct SparseInputs {
  std::vector<Tensor> tables;  // var, then the slots
  int64 num_rows = 0;
  int64 row_size = 0;
  const Tensor* grad = nullptr;
  retf::IndexGroups<Tindex>* groups = nullptr;

  std::vector<T*> TablePointers() {
    std::vector<T*> pointers;
    for (Tensor& t : tables) pointers.push_back(t.flat<T>().data());
    return pointers;
  }
};

template <typename T, typename Tindex>
Status PrepareSparseInputs(OpKernelContext* ctx, OpKernel* kernel, bool use_exclusive_lock, int num_tables,
                           std::initializer_list<std::pair<int, const char*>> scalars, int grad_input,
                           SparseInputs<T, Tindex>* in) {
  in->tables.resize(num_tables);
  for (int i = 0; i < num_tables; ++i) {
    TF_RETURN_IF_ERROR(GetInputTensorFromVariable<CPUDevice, T>(ctx, i, use_exclusive_lock, true, &in->tables[i]));
    if (!in->tables[i].IsInitialized()) {
      return errors::FailedPrecondition("Attempting to use uninitialized variables: ", kernel->requested_input(i));
    }
  }
  const Tensor& var = in->tables[0];
  for (int i = 1; i < num_tables; ++i) {
    if (!var.shape().IsSameSize(in->tables[i].shape())) {
      return errors::InvalidArgument(kernel->requested_input(i), " must have var's shape ", var.shape().DebugString(),
                                     ", got ", in->tables[i].shape().DebugString());
    }
  }
  if (!TensorShapeUtils::IsVectorOrHigher(var.shape())) {
    return errors::InvalidArgument("var must be at least 1-D, got shape ", var.shape().DebugString());
  }
  for (const auto& scalar : scalars) {
    const Tensor& t = ctx->input(scalar.first);
    if (!TensorShapeUtils::IsScalar(t.shape())) {
      return errors::InvalidArgument(scalar.second, " must be a scalar, got shape ", t.shape().DebugString());
    }
  }
  const Tensor& grad = ctx->input(grad_input);
  const Tensor& indices = ctx->input(grad_input + 1);
  if (!TensorShapeUtils::IsVector(indices.shape())) {
    return errors::InvalidArgument("indices must be 1-D, got shape ", indices.shape().DebugString());
  }
  const int64 num_updates = indices.dim_size(0);
  if (grad.dims() != var.dims() || grad.dim_size(0) != num_updates) {
    return errors::InvalidArgument("grad must have shape [", num_updates, ", <var row shape>] with one row per index, got ",
                                   grad.shape().DebugString(), " for var ", var.shape().DebugString());
  }
  for (int d = 1; d < var.dims(); ++d) {
    if (grad.dim_size(d) != var.dim_size(d)) {
      return errors::InvalidArgument("grad rows must have var's row shape: grad ", grad.shape().DebugString(),
                                     " vs var ", var.shape().DebugString());
    }
  }
  in->num_rows = var.dim_size(0);
  in->row_size = in->num_rows > 0 ? var.NumElements() / in->num_rows : 0;
  in->grad = &grad;

  const auto flat = indices.flat<Tindex>();
  if (flat.size() > retf::kMaxGroupedIndices) {
    return errors::InvalidArgument("at most ", retf::kMaxGroupedIndices, " indices per call, got ", flat.size());
  }
  for (int64 i = 0; i < flat.size(); ++i) {
    const Tindex index = flat(i);
    if (index < 0 || static_cast<int64>(index) >= in->num_rows) {
      return errors::InvalidArgument("indices[", i, "] = ", index, " is not in [0, ", in->num_rows,
                                     "): the variable has ", in->num_rows, " rows");
    }
  }
  // Kept per thread so its buffers are reused from step to step.
  static thread_local retf::IndexGroups<Tindex> groups;
  retf::GroupIndices(flat.data(), flat.size(), in->num_rows - 1, &groups);
  in->groups = &groups;
  return Status();
}

thread::ThreadPool* Pool(OpKernelContext* ctx) { return ctx->device()->tensorflow_cpu_worker_threads()->workers; }

template <typename T>
T Scalar(OpKernelContext* ctx, int input) {
  return ctx->input(input).scalar<T>()();
}

// Same locking as TensorFlow's own sparse training ops (and Retf>SparseApplyAdam): mutexes in
// address order, a shared lock on resource variables unless use_locking, copy-on-read mode.
class FusedSparseOp : public OpKernel {
 public:
  explicit FusedSparseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_locking", &use_exclusive_lock_));
  }

 protected:
  static void ForwardRef(OpKernelContext* ctx) {
    if (IsRefType(ctx->input_dtype(0))) ctx->forward_ref_input_to_ref_output(0, 0);
  }

  bool use_exclusive_lock_;
};

// Inputs: var, accum, lr, [epsilon,] grad, indices.
template <typename T, typename Tindex, bool kEpsilon>
class SparseApplyAdagradOp : public FusedSparseOp {
 public:
  explicit SparseApplyAdagradOp(OpKernelConstruction* ctx) : FusedSparseOp(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("update_slots", &update_slots_));
  }

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, retf::CheckVariableDtypes<T>(ctx, {0, 1}));
    auto locks = MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(ctx, use_exclusive_lock_, true, {0, 1});
    SparseInputs<T, Tindex> in;
    constexpr int kGrad = kEpsilon ? 4 : 3;
    if (kEpsilon) {
      OP_REQUIRES_OK(ctx, PrepareSparseInputs<T, Tindex>(ctx, this, use_exclusive_lock_, 2,
                                                         {{2, "lr"}, {3, "epsilon"}}, kGrad, &in));
    } else {
      OP_REQUIRES_OK(ctx, PrepareSparseInputs<T, Tindex>(ctx, this, use_exclusive_lock_, 2, {{2, "lr"}}, kGrad, &in));
    }
    const retf::functor::AdagradRow<T, kEpsilon> rule{Scalar<T>(ctx, 2), kEpsilon ? Scalar<T>(ctx, 3) : T(0),
                                                      update_slots_};
    std::vector<T*> tables = in.TablePointers();
    T* var = tables[0];
    T* accum = tables[1];
    const int64 n = in.row_size;
    retf::functor::ForEachGroupRow(Pool(ctx), tables.data(), 2, in.grad->template flat<T>().data(), n, *in.groups,
                                   [&](int64 row, const T* g) { rule(var + row * n, accum + row * n, g, n); });
    ForwardRef(ctx);
  }

 private:
  bool update_slots_;
};

// Inputs: var, accum, accum_decay_power (Tstep), lr, decay_step, decay_rate, decay_baseline,
// global_step, grad, indices. The decay count of row r is element r of accum_decay_power.
template <typename T, typename Tindex, typename Tstep>
class SparseApplyAdagradDecayOp : public FusedSparseOp {
 public:
  explicit SparseApplyAdagradDecayOp(OpKernelConstruction* ctx) : FusedSparseOp(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, retf::CheckVariableDtypes<T>(ctx, {0, 1}));
    OP_REQUIRES_OK(ctx, retf::CheckVariableDtypes<Tstep>(ctx, {2}));
    auto locks = MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(ctx, use_exclusive_lock_, true, {0, 1});
    SparseInputs<T, Tindex> in;
    OP_REQUIRES_OK(ctx, PrepareSparseInputs<T, Tindex>(
                            ctx, this, use_exclusive_lock_, 2,
                            {{3, "lr"}, {4, "decay_step"}, {5, "decay_rate"}, {6, "decay_baseline"}, {7, "global_step"}},
                            8, &in));
    Tensor power;
    OP_REQUIRES_OK(ctx, GetInputTensorFromVariable<CPUDevice, Tstep>(ctx, 2, use_exclusive_lock_, true, &power));
    OP_REQUIRES(ctx, power.IsInitialized(),
                errors::FailedPrecondition("Attempting to use uninitialized variables: ", requested_input(2)));
    OP_REQUIRES(ctx, power.NumElements() >= in.num_rows,
                errors::InvalidArgument("accum_decay_power must hold one count per row of var (", in.num_rows,
                                        "), got shape ", power.shape().DebugString()));
    const Tstep decay_step = Scalar<Tstep>(ctx, 4);
    OP_REQUIRES(ctx, decay_step > 0, errors::InvalidArgument("decay_step must be positive, got ", decay_step));
    const Tstep period = Scalar<Tstep>(ctx, 7) / decay_step;
    const retf::functor::AdagradDecayRow<T> rule{Scalar<T>(ctx, 3), Scalar<T>(ctx, 5), Scalar<T>(ctx, 6)};
    std::vector<T*> tables = in.TablePointers();
    T* var = tables[0];
    T* accum = tables[1];
    Tstep* count = power.flat<Tstep>().data();
    const int64 n = in.row_size;
    retf::functor::ForEachGroupRow(Pool(ctx), tables.data(), 2, in.grad->template flat<T>().data(), n, *in.groups,
                                   [&](int64 row, const T* g) {
                                     const bool decay = period > count[row];
                                     if (decay) count[row] += 1;
                                     rule(var + row * n, accum + row * n, g, n, decay);
                                   });
    ForwardRef(ctx);
  }
};

// Inputs: var, accum, linear, grad, indices, lr, l1, l2, [l2_shrinkage,] lr_power (TensorFlow's order).
template <typename T, typename Tindex, bool kShrinkage>
class SparseApplyFtrlOp : public FusedSparseOp {
 public:
  explicit SparseApplyFtrlOp(OpKernelConstruction* ctx) : FusedSparseOp(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, retf::CheckVariableDtypes<T>(ctx, {0, 1, 2}));
    auto locks = MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(ctx, use_exclusive_lock_, true, {0, 1, 2});
    SparseInputs<T, Tindex> in;
    constexpr int kPower = kShrinkage ? 9 : 8;
    if (kShrinkage) {
      OP_REQUIRES_OK(ctx, PrepareSparseInputs<T, Tindex>(
                              ctx, this, use_exclusive_lock_, 3,
                              {{5, "lr"}, {6, "l1"}, {7, "l2"}, {8, "l2_shrinkage"}, {9, "lr_power"}}, 3, &in));
    } else {
      OP_REQUIRES_OK(ctx, PrepareSparseInputs<T, Tindex>(ctx, this, use_exclusive_lock_, 3,
                                                         {{5, "lr"}, {6, "l1"}, {7, "l2"}, {8, "lr_power"}}, 3, &in));
    }
    const retf::functor::FtrlRow<T, kShrinkage> rule{Scalar<T>(ctx, 5), Scalar<T>(ctx, 6), Scalar<T>(ctx, 7),
                                                     kShrinkage ? Scalar<T>(ctx, 8) : T(0), Scalar<T>(ctx, kPower)};
    // TensorFlow's own checks on FTRL's hyperparameters.
    OP_REQUIRES(ctx, rule.lr > T(0), errors::InvalidArgument("lr must be positive, got ", rule.lr));
    OP_REQUIRES(ctx, rule.l1 >= T(0), errors::InvalidArgument("l1 must be >= 0, got ", rule.l1));
    OP_REQUIRES(ctx, rule.l2 >= T(0), errors::InvalidArgument("l2 must be >= 0, got ", rule.l2));
    OP_REQUIRES(ctx, rule.l2_shrinkage >= T(0),
                errors::InvalidArgument("l2_shrinkage must be >= 0, got ", rule.l2_shrinkage));
    OP_REQUIRES(ctx, rule.lr_power <= T(0), errors::InvalidArgument("lr_power must be <= 0, got ", rule.lr_power));
    std::vector<T*> tables = in.TablePointers();
    T* var = tables[0];
    T* accum = tables[1];
    T* linear = tables[2];
    const int64 n = in.row_size;
    retf::functor::ForEachGroupRow(
        Pool(ctx), tables.data(), 3, in.grad->template flat<T>().data(), n, *in.groups,
        [&](int64 row, const T* g) { rule(var + row * n, accum + row * n, linear + row * n, g, n); });
    ForwardRef(ctx);
  }
};

#define RETF_REGISTER(name, T, Tindex, ...)                                                                   \
  REGISTER_KERNEL_BUILDER(                                                                                   \
      Name(name).Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint<Tindex>("Tindices"), __VA_ARGS__);

#define RETF_REGISTER_KERNELS(T, Tindex)                                                            \
  RETF_REGISTER("Retf>SparseApplyAdagrad", T, Tindex, SparseApplyAdagradOp<T, Tindex, false>)       \
  RETF_REGISTER("Retf>SparseApplyAdagradRef", T, Tindex, SparseApplyAdagradOp<T, Tindex, false>)    \
  RETF_REGISTER("Retf>SparseApplyAdagradV2", T, Tindex, SparseApplyAdagradOp<T, Tindex, true>)      \
  RETF_REGISTER("Retf>SparseApplyAdagradV2Ref", T, Tindex, SparseApplyAdagradOp<T, Tindex, true>)   \
  RETF_REGISTER("Retf>SparseApplyFtrl", T, Tindex, SparseApplyFtrlOp<T, Tindex, false>)             \
  RETF_REGISTER("Retf>SparseApplyFtrlRef", T, Tindex, SparseApplyFtrlOp<T, Tindex, false>)          \
  RETF_REGISTER("Retf>SparseApplyFtrlV2", T, Tindex, SparseApplyFtrlOp<T, Tindex, true>)            \
  RETF_REGISTER("Retf>SparseApplyFtrlV2Ref", T, Tindex, SparseApplyFtrlOp<T, Tindex, true>)

RETF_REGISTER_KERNELS(float, int32);
RETF_REGISTER_KERNELS(float, int64);
RETF_REGISTER_KERNELS(double, int32);
RETF_REGISTER_KERNELS(double, int64);

#define RETF_REGISTER_DECAY(T, Tindex, Tstep)                                                               \
  REGISTER_KERNEL_BUILDER(Name("Retf>SparseApplyAdagradDecay")                                              \
                              .Device(DEVICE_CPU)                                                           \
                              .TypeConstraint<T>("T")                                                       \
                              .TypeConstraint<Tindex>("Tindices")                                           \
                              .TypeConstraint<Tstep>("Tstep"),                                              \
                          SparseApplyAdagradDecayOp<T, Tindex, Tstep>);                                     \
  REGISTER_KERNEL_BUILDER(Name("Retf>SparseApplyAdagradDecayRef")                                           \
                              .Device(DEVICE_CPU)                                                           \
                              .TypeConstraint<T>("T")                                                       \
                              .TypeConstraint<Tindex>("Tindices")                                           \
                              .TypeConstraint<Tstep>("Tstep"),                                              \
                          SparseApplyAdagradDecayOp<T, Tindex, Tstep>);

#define RETF_REGISTER_DECAY_STEPS(T, Tindex) \
  RETF_REGISTER_DECAY(T, Tindex, int32)      \
  RETF_REGISTER_DECAY(T, Tindex, int64)

RETF_REGISTER_DECAY_STEPS(float, int32);
RETF_REGISTER_DECAY_STEPS(float, int64);
RETF_REGISTER_DECAY_STEPS(double, int32);
RETF_REGISTER_DECAY_STEPS(double, int64);

#undef RETF_REGISTER_DECAY_STEPS
#undef RETF_REGISTER_DECAY
#undef RETF_REGISTER_KERNELS
#undef RETF_REGISTER

}  // namespace
}  // namespace tensorflow
