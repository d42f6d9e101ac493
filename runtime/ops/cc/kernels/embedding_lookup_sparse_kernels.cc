/* OpKernels of Retf>EmbeddingLookupSparse, Retf>ResourceEmbeddingLookupSparse and
   Retf>EmbeddingLookupSparseGrad, and of their safe forms (Retf>SafeEmbeddingLookupSparse,
   Retf>ResourceSafeEmbeddingLookupSparse, Retf>SafeEmbeddingLookupSparseGrad). */

// Before any Eigen header: the variable helpers run Eigen expressions on the CPU thread pool.
#define EIGEN_USE_THREADS

#include "embedding_lookup_sparse_kernels.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/kernels/training_op_helpers.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {
namespace {

// A default Status is OK in every TF 2.x: Status::OK() is gone from TF 2.13, where Status is absl::Status.

// A Status's message: message() from TF 2.12 on (absl::Status in 2.13 has no error_message()), error_message() before.
template <typename S>
auto StatusMessage(const S& status, int) -> decltype(std::string(status.message())) {
  return std::string(status.message());
}
template <typename S>
std::string StatusMessage(const S& status, long) {  // NOLINT(runtime/int): the lower-ranked overload
  return status.error_message();
}

using CPUDevice = Eigen::ThreadPoolDevice;

retf::Combiner ParseCombiner(const std::string& name) {
  if (name == "sum") return retf::Combiner::kSum;
  if (name == "sqrtn") return retf::Combiner::kSqrtN;
  return retf::Combiner::kMean;  // the op's attr admits only these three
}

// The ids, segment ids and optional weights shared by the forward and the gradient op.
template <typename T, typename Tseg>
struct SparseBatch {
  const Tensor* ids = nullptr;
  const Tensor* segment_ids = nullptr;
  const T* weights = nullptr;  // null: unweighted
  int64 nnz = 0;
  int64 num_segments = 0;  // the last segment id + 1: max(segment_ids) + 1 once they are checked sorted
};

template <typename T, typename Tseg>
Status ReadSparseBatch(OpKernelContext* ctx, int first_input, SparseBatch<T, Tseg>* batch) {
  batch->ids = &ctx->input(first_input);
  batch->segment_ids = &ctx->input(first_input + 1);
  if (!TensorShapeUtils::IsVector(batch->ids->shape())) {
    return errors::InvalidArgument("ids must be 1-D, got shape ", batch->ids->shape().DebugString());
  }
  batch->nnz = batch->ids->dim_size(0);
  if (!TensorShapeUtils::IsVector(batch->segment_ids->shape()) ||
      batch->segment_ids->dim_size(0) != batch->nnz) {
    return errors::InvalidArgument("segment_ids must be a vector of ", batch->nnz,
                                   " elements like ids, got shape ",
                                   batch->segment_ids->shape().DebugString());
  }
  const Tensor& weights = ctx->input(first_input + 2);
  if (!TensorShapeUtils::IsVector(weights.shape()) ||
      (weights.dim_size(0) != batch->nnz && weights.dim_size(0) != 0)) {
    return errors::InvalidArgument("weights must be a vector of ", batch->nnz,
                                   " elements like ids, or empty for unweighted; got shape ",
                                   weights.shape().DebugString());
  }
  if (weights.dim_size(0) > 0) batch->weights = weights.template flat<T>().data();
  // Sorted segment ids end with the largest; MakeSegments checks they are sorted.
  if (batch->nnz > 0) {
    const int64 last = static_cast<int64>(batch->segment_ids->template flat<Tseg>()(batch->nnz - 1));
    if (last == std::numeric_limits<int64>::max()) {
      return errors::InvalidArgument("segment_ids[", batch->nnz - 1, "] = ", last, " leaves no room for ",
                                     last, " + 1 output rows");
    }
    batch->num_segments = std::max<int64>(last, -1) + 1;
  }
  return Status();
}

// Fills segments from the batch; InvalidArgument when its segment ids are not sorted ascending
// and non-negative.
template <typename T, typename Tseg>
Status ReadSegments(const SparseBatch<T, Tseg>& batch, retf::Combiner combiner, retf::Segments<T>* segments) {
  const Tseg* segment_ids = batch.segment_ids->template flat<Tseg>().data();
  const int64 j = retf::MakeSegments(segment_ids, batch.weights, batch.nnz, batch.num_segments, combiner, segments);
  if (j < 0) return Status();
  if (segment_ids[j] < 0) {
    return errors::InvalidArgument("segment_ids[", j, "] = ", segment_ids[j], " is negative");
  }
  return errors::InvalidArgument("segment_ids must be sorted ascending (sp_ids.indices in row-major order): "
                                 "segment_ids[", j, "] = ", segment_ids[j], " follows segment_ids[", j - 1,
                                 "] = ", segment_ids[j - 1]);
}

template <typename Tidx>
Status CheckIds(const Tensor& ids, int64 num_rows) {
  const auto flat = ids.flat<Tidx>();
  for (int64 j = 0; j < flat.size(); ++j) {
    if (flat(j) < 0 || static_cast<int64>(flat(j)) >= num_rows) {
      return errors::InvalidArgument("ids[", j, "] = ", flat(j), " is not in [0, ", num_rows,
                                     "): params has ", num_rows, " rows");
    }
  }
  return Status();
}

// The params table of a lookup: input 0 itself, or the tensor of the resource variable it names, read in
// place under the variable's shared lock, which this object holds until it goes out of scope.
template <typename T, bool kResource>
class LookupTable {
 public:
  Status Open(OpKernelContext* ctx, OpKernel* kernel) {
    if (!kResource) {
      params_ = &ctx->input(0);
      return Status();
    }
    TF_RETURN_IF_ERROR(LookupResource(ctx, HandleFromInput(ctx, 0), &variable_));
    TF_RETURN_IF_ERROR((EnsureSparseVariableAccess<CPUDevice, T>(ctx, variable_.get())));
    lock_.reset(new SharedLock(*variable_->mu()));
    params_ = variable_->tensor();
    if (!params_->IsInitialized()) {
      return errors::FailedPrecondition("params variable is not initialized: ", kernel->requested_input(0));
    }
    if (params_->dtype() != DataTypeToEnum<T>::v()) {
      return errors::InvalidArgument("params variable holds ", DataTypeString(params_->dtype()),
                                     ", the op was given T=", DataTypeString(DataTypeToEnum<T>::v()));
    }
    return Status();
  }
  const Tensor& params() const { return *params_; }

 private:
  const Tensor* params_ = nullptr;
  core::RefCountPtr<Var> variable_;
  using SharedLock = tf_shared_lock;  // the name alone: the macro of that name refuses a lock without a variable
  std::unique_ptr<SharedLock> lock_;
};

template <typename T, typename Tidx, typename Tseg, bool kResource>
class EmbeddingLookupSparseOp : public OpKernel {
 public:
  explicit EmbeddingLookupSparseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string combiner;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("combiner", &combiner));
    combiner_ = ParseCombiner(combiner);
  }

  void Compute(OpKernelContext* ctx) override {
    LookupTable<T, kResource> table;
    OP_REQUIRES_OK(ctx, table.Open(ctx, this));
    Combine(ctx, table.params());
  }

 private:
  void Combine(OpKernelContext* ctx, const Tensor& params) {
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(params.shape()),
                errors::InvalidArgument("params must be 2-D [rows, dim], got shape ",
                                        params.shape().DebugString()));
    SparseBatch<T, Tseg> batch;
    OP_REQUIRES_OK(ctx, ReadSparseBatch(ctx, 1, &batch));
    OP_REQUIRES_OK(ctx, CheckIds<Tidx>(*batch.ids, params.dim_size(0)));
    const int64 dim = params.dim_size(1);
    // One row per segment up to the last segment id: checked, since a wild id would overflow it.
    TensorShape output_shape;
    const Status shape_status = TensorShapeUtils::MakeShape(std::vector<int64>{batch.num_segments, dim}, &output_shape);
    OP_REQUIRES(ctx, shape_status.ok(),
                errors::InvalidArgument("the output has a row per segment up to segment_ids[", batch.nnz - 1, "] = ",
                                        batch.num_segments - 1, ": ", StatusMessage(shape_status, 0)));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, output_shape, &output));
    retf::Segments<T> segments;
    OP_REQUIRES_OK(ctx, ReadSegments(batch, combiner_, &segments));
    if (batch.num_segments == 0 || dim == 0) return;
    retf::functor::EmbeddingLookupSparse<T, Tidx>()(
        ctx->device()->tensorflow_cpu_worker_threads()->workers, params.flat<T>().data(), dim,
        batch.ids->template flat<Tidx>().data(), batch.weights, segments, output->flat<T>().data());
  }

  retf::Combiner combiner_;
};

template <typename T, typename Tidx, typename Tseg>
class EmbeddingLookupSparseGradOp : public OpKernel {
 public:
  explicit EmbeddingLookupSparseGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string combiner;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("combiner", &combiner));
    combiner_ = ParseCombiner(combiner);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(grad.shape()),
                errors::InvalidArgument("grad must be 2-D [segments, dim], got shape ",
                                        grad.shape().DebugString()));
    SparseBatch<T, Tseg> batch;
    OP_REQUIRES_OK(ctx, ReadSparseBatch(ctx, 1, &batch));
    OP_REQUIRES(ctx, batch.num_segments <= grad.dim_size(0),
                errors::InvalidArgument("grad has ", grad.dim_size(0), " rows but segment_ids go up to ",
                                        batch.num_segments - 1));
    const int64 dim = grad.dim_size(1);
    OP_REQUIRES(ctx, batch.nnz <= retf::kMaxGroupedIndices,
                errors::InvalidArgument("at most ", retf::kMaxGroupedIndices, " ids per call, got ", batch.nnz));
    retf::Segments<T> segments;
    OP_REQUIRES_OK(ctx, ReadSegments(batch, combiner_, &segments));
    thread::ThreadPool* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    // Kept per thread so its buffers are reused from step to step.
    static thread_local retf::IndexGroups<Tidx> groups;
    const auto ids = batch.ids->template flat<Tidx>();
    int64 max_id = 0;
    for (int64 j = 0; j < batch.nnz; ++j) {
      OP_REQUIRES(ctx, ids(j) >= 0, errors::InvalidArgument("ids[", j, "] = ", ids(j), " is negative"));
      max_id = std::max(max_id, static_cast<int64>(ids(j)));
    }
    retf::GroupIndices(ids.data(), batch.nnz, max_id, &groups);
    const int64 num_unique = groups.size();
    Tensor* unique_ids = nullptr;
    Tensor* values = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({num_unique}), &unique_ids));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({num_unique, dim}), &values));
    std::copy(groups.unique.begin(), groups.unique.end(), unique_ids->flat<Tidx>().data());
    if (num_unique == 0 || dim == 0) return;
    const Tseg* segment_ids = batch.segment_ids->template flat<Tseg>().data();
    retf::functor::EmbeddingLookupSparseGrad<T, Tidx, Tseg>()(
        pool, grad.flat<T>().data(), dim, segment_ids, batch.weights, segments, groups, values->flat<T>().data());
  }

 private:
  retf::Combiner combiner_;
};

// The kept entries of a safe lookup over num_rows rows, and their segments; InvalidArgument when a row is
// outside [0, num_rows).
template <typename T, typename Tidx, typename Tseg>
Status KeepSafeEntries(const SparseBatch<T, Tseg>& batch, int64 num_rows, retf::Combiner combiner,
                       retf::KeptEntries<T, Tidx, Tseg>* kept, retf::Segments<T>* segments) {
  const Tseg* rows = batch.segment_ids->template flat<Tseg>().data();
  const int64 j = retf::KeepEntries(batch.ids->template flat<Tidx>().data(), rows, batch.weights, batch.nnz, num_rows,
                                    combiner != retf::Combiner::kSum, kept);
  if (j >= 0) {
    return errors::InvalidArgument("rows[", j, "] = ", rows[j], " is not in [0, ", num_rows,
                                   "): the sparse ids' dense shape has ", num_rows, " rows");
  }
  const int64 unsorted = retf::MakeSegments(kept->rows, kept->weights, kept->size, num_rows, combiner, segments);
  if (unsorted >= 0) return errors::Internal("kept entries out of row order at ", unsorted);
  return Status();
}

template <typename T, typename Tidx, typename Tseg, bool kResource>
class SafeEmbeddingLookupSparseOp : public OpKernel {
 public:
  explicit SafeEmbeddingLookupSparseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string combiner;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("combiner", &combiner));
    combiner_ = ParseCombiner(combiner);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& num_rows_tensor = ctx->input(4);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(num_rows_tensor.shape()),
                errors::InvalidArgument("num_rows must be a scalar, got shape ",
                                        num_rows_tensor.shape().DebugString()));
    const int64 num_rows = num_rows_tensor.scalar<int64>()();
    OP_REQUIRES(ctx, num_rows >= 0, errors::InvalidArgument("num_rows = ", num_rows, " is negative"));
    LookupTable<T, kResource> table;
    OP_REQUIRES_OK(ctx, table.Open(ctx, this));
    const Tensor& params = table.params();
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(params.shape()),
                errors::InvalidArgument("params must be 2-D [rows, dim], got shape ",
                                        params.shape().DebugString()));
    const int64 dim = params.dim_size(1);
    TensorShape output_shape;
    const Status shape_status = TensorShapeUtils::MakeShape(std::vector<int64>{num_rows, dim}, &output_shape);
    OP_REQUIRES(ctx, shape_status.ok(), errors::InvalidArgument("num_rows = ", num_rows, ": ",
                                                                StatusMessage(shape_status, 0)));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, output_shape, &output));
    SparseBatch<T, Tseg> batch;
    OP_REQUIRES_OK(ctx, ReadSparseBatch(ctx, 1, &batch));
    static thread_local retf::KeptEntries<T, Tidx, Tseg> kept;
    retf::Segments<T> segments;
    OP_REQUIRES_OK(ctx, (KeepSafeEntries<T, Tidx, Tseg>(batch, num_rows, combiner_, &kept, &segments)));
    for (int64 k = 0; k < kept.size; ++k) {
      OP_REQUIRES(ctx, static_cast<int64>(kept.ids[k]) < params.dim_size(0),
                  errors::InvalidArgument("id ", kept.ids[k], " is not in [0, ", params.dim_size(0),
                                          "): params has ", params.dim_size(0), " rows"));
    }
    if (num_rows == 0 || dim == 0) return;
    retf::functor::EmbeddingLookupSparse<T, Tidx>()(ctx->device()->tensorflow_cpu_worker_threads()->workers,
                                                    params.flat<T>().data(), dim, kept.ids, kept.weights, segments,
                                                    output->flat<T>().data());
  }

 private:
  retf::Combiner combiner_;
};

template <typename T, typename Tidx, typename Tseg>
class SafeEmbeddingLookupSparseGradOp : public OpKernel {
 public:
  explicit SafeEmbeddingLookupSparseGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string combiner;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("combiner", &combiner));
    combiner_ = ParseCombiner(combiner);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(grad.shape()),
                errors::InvalidArgument("grad must be 2-D [rows, dim], got shape ", grad.shape().DebugString()));
    SparseBatch<T, Tseg> batch;
    OP_REQUIRES_OK(ctx, ReadSparseBatch(ctx, 1, &batch));
    OP_REQUIRES(ctx, batch.nnz <= retf::kMaxGroupedIndices,
                errors::InvalidArgument("at most ", retf::kMaxGroupedIndices, " ids per call, got ", batch.nnz));
    const int64 num_rows = grad.dim_size(0);
    const int64 dim = grad.dim_size(1);
    static thread_local retf::KeptEntries<T, Tidx, Tseg> kept;
    retf::Segments<T> segments;
    OP_REQUIRES_OK(ctx, (KeepSafeEntries<T, Tidx, Tseg>(batch, num_rows, combiner_, &kept, &segments)));
    // Kept per thread so its buffers are reused from step to step.
    static thread_local retf::IndexGroups<Tidx> groups;
    int64 max_id = 0;
    for (int64 k = 0; k < kept.size; ++k) max_id = std::max(max_id, static_cast<int64>(kept.ids[k]));
    retf::GroupIndices(kept.ids, kept.size, max_id, &groups);
    bool some_row_empty = false;
    for (int64 r = 0; r < num_rows && !some_row_empty; ++r) {
      some_row_empty = segments.starts[r] == segments.starts[r + 1];
    }
    // TensorFlow's safe lookup fills an empty row with id 0 and zeroes its result: id 0 gets a zero gradient.
    const int64 filled = some_row_empty && (groups.size() == 0 || groups.unique[0] != 0) ? 1 : 0;
    const int64 num_unique = groups.size() + filled;
    Tensor* unique_ids = nullptr;
    Tensor* values = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({num_unique}), &unique_ids));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({num_unique, dim}), &values));
    Tidx* unique = unique_ids->flat<Tidx>().data();
    T* rows = values->flat<T>().data();
    if (filled) {
      unique[0] = 0;
      std::fill(rows, rows + dim, T(0));
    }
    std::copy(groups.unique.begin(), groups.unique.end(), unique + filled);
    if (groups.size() == 0 || dim == 0) return;
    retf::functor::EmbeddingLookupSparseGrad<T, Tidx, Tseg>()(
        ctx->device()->tensorflow_cpu_worker_threads()->workers, grad.flat<T>().data(), dim, kept.rows,
        kept.weights, segments, groups, rows + filled * dim);
  }

 private:
  retf::Combiner combiner_;
};

#define RETF_REGISTER_KERNELS(T, Tidx, Tseg)                                                   \
  REGISTER_KERNEL_BUILDER(Name("Retf>EmbeddingLookupSparse")                                   \
                              .Device(DEVICE_CPU)                                              \
                              .TypeConstraint<T>("T")                                          \
                              .TypeConstraint<Tidx>("Tidx")                                    \
                              .TypeConstraint<Tseg>("Tsegmentids"),                            \
                          EmbeddingLookupSparseOp<T, Tidx, Tseg, false>);                      \
  REGISTER_KERNEL_BUILDER(Name("Retf>ResourceEmbeddingLookupSparse")                           \
                              .Device(DEVICE_CPU)                                              \
                              .TypeConstraint<T>("T")                                          \
                              .TypeConstraint<Tidx>("Tidx")                                    \
                              .TypeConstraint<Tseg>("Tsegmentids"),                            \
                          EmbeddingLookupSparseOp<T, Tidx, Tseg, true>);                       \
  REGISTER_KERNEL_BUILDER(Name("Retf>EmbeddingLookupSparseGrad")                               \
                              .Device(DEVICE_CPU)                                              \
                              .TypeConstraint<T>("T")                                          \
                              .TypeConstraint<Tidx>("Tidx")                                    \
                              .TypeConstraint<Tseg>("Tsegmentids"),                            \
                          EmbeddingLookupSparseGradOp<T, Tidx, Tseg>);                 \
  REGISTER_KERNEL_BUILDER(Name("Retf>SafeEmbeddingLookupSparse")                               \
                              .Device(DEVICE_CPU)                                              \
                              .TypeConstraint<T>("T")                                          \
                              .TypeConstraint<Tidx>("Tidx")                                    \
                              .TypeConstraint<Tseg>("Tsegmentids"),                            \
                          SafeEmbeddingLookupSparseOp<T, Tidx, Tseg, false>);                  \
  REGISTER_KERNEL_BUILDER(Name("Retf>ResourceSafeEmbeddingLookupSparse")                       \
                              .Device(DEVICE_CPU)                                              \
                              .TypeConstraint<T>("T")                                          \
                              .TypeConstraint<Tidx>("Tidx")                                    \
                              .TypeConstraint<Tseg>("Tsegmentids"),                            \
                          SafeEmbeddingLookupSparseOp<T, Tidx, Tseg, true>);                   \
  REGISTER_KERNEL_BUILDER(Name("Retf>SafeEmbeddingLookupSparseGrad")                           \
                              .Device(DEVICE_CPU)                                              \
                              .TypeConstraint<T>("T")                                          \
                              .TypeConstraint<Tidx>("Tidx")                                    \
                              .TypeConstraint<Tseg>("Tsegmentids"),                            \
                          SafeEmbeddingLookupSparseGradOp<T, Tidx, Tseg>);

#define RETF_REGISTER_FOR_TYPE(T)           \
  RETF_REGISTER_KERNELS(T, int32, int32);   \
  RETF_REGISTER_KERNELS(T, int32, int64);   \
  RETF_REGISTER_KERNELS(T, int64, int32);   \
  RETF_REGISTER_KERNELS(T, int64, int64);

RETF_REGISTER_FOR_TYPE(float);
RETF_REGISTER_FOR_TYPE(double);

#undef RETF_REGISTER_FOR_TYPE
#undef RETF_REGISTER_KERNELS

}  // namespace
}  // namespace tensorflow
