/* retf's kernel for TensorFlow's own BiasAddGrad (float32, NHWC, the kernel label "retf"): a bias's gradient, the
   column sums of its layer's output gradient [..., channels]. TensorFlow's CPU kernel reduces the rows in an Eigen
   expression that keeps its sums in memory (0.7-11 GB/s on a behaviour sequence's [102400, 1-80] gradients,
   bench/bench_bias_grad.py); this one streams the rows once.

   The rows are cut into chunks of a fixed number of values, whatever the threads; each chunk's column sums run in
   float, its rows in order, and the chunks' sums are added in order in double: the bits do not depend on the number
   of threads. */

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/lib/core/threadpool.h"
#include "tensorflow/core/util/tensor_format.h"

namespace tensorflow {
namespace {

constexpr int64_t kChunkValues = 8192;  // values one task sums into its partial sums: 32 KB of float32
constexpr int64_t kChunkRows = 32;      // and at least this many rows, so wide rows leave few partial sums to add
constexpr int kLanes = 16;              // a narrow row's values summed in this many running sums

// partial[j] += the sum of column j over rows [first, last) of the [rows, n] matrix at in, rows in order.
void SumRows(const float* __restrict in, int64_t n, int64_t first, int64_t last, float* __restrict partial) {
  if (n < kLanes && kLanes % n == 0) {
    // Narrow rows (a score's one column, a pair of columns): kLanes running sums over the chunk's values as one
    // vector, lane l holding column l % n, folded at the end; a row at a time would add one or two values per step.
    float lanes[kLanes] = {};
    const float* values = in + first * n;
    const int64_t count = (last - first) * n, whole = count - count % kLanes;
    for (int64_t i = 0; i < whole; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) lanes[l] += values[i + l];
    }
    for (int64_t i = whole; i < count; ++i) lanes[i % kLanes] += values[i];
    for (int l = 0; l < kLanes; ++l) partial[l % n] += lanes[l];
    return;
  }
  for (int64_t r = first; r < last; ++r) {
    const float* __restrict row = in + r * n;
    for (int64_t j = 0; j < n; ++j) partial[j] += row[j];
  }
}

class BiasAddGradOp : public OpKernel {
 public:
  explicit BiasAddGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string data_format;
    if (ctx->GetAttr("data_format", &data_format).ok()) {
      TensorFormat format;
      OP_REQUIRES(ctx, FormatFromString(data_format, &format), errors::InvalidArgument("Invalid data format"));
      OP_REQUIRES(ctx, format == FORMAT_NHWC,
                  errors::InvalidArgument("retf's BiasAddGrad kernel takes data_format NHWC, got ", data_format,
                                          "; remove the node's _kernel label to run TensorFlow's"));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrixOrHigher(grad.shape()),
                errors::InvalidArgument("Input tensor must be at least 2D: ", grad.shape().DebugString()));
    const int64_t n = grad.dim_size(grad.dims() - 1);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &out));
    float* sums = out->flat<float>().data();
    if (n == 0) return;
    const int64_t rows = grad.NumElements() / n;
    const int64_t chunk_rows = std::max<int64_t>(kChunkRows, kChunkValues / n);
    const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    std::vector<float> partials(static_cast<size_t>(chunks * n), 0.0f);
    const float* in = grad.flat<float>().data();
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    const int64_t cost = chunk_rows * n * static_cast<int64_t>(sizeof(float));  // bytes read per chunk
    workers->ParallelFor(chunks, cost, [&](int64_t first, int64_t last) {
      for (int64_t chunk = first; chunk < last; ++chunk) {
        SumRows(in, n, chunk * chunk_rows, std::min(rows, (chunk + 1) * chunk_rows), partials.data() + chunk * n);
      }
    });
    std::vector<double> total(static_cast<size_t>(n), 0.0);
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const float* partial = partials.data() + chunk * n;
      for (int64_t j = 0; j < n; ++j) total[j] += partial[j];
    }
    for (int64_t j = 0; j < n; ++j) sums[j] = static_cast<float>(total[j]);
  }
};

REGISTER_KERNEL_BUILDER(Name("BiasAddGrad").Device(DEVICE_CPU).TypeConstraint<float>("T").Label("retf"),
                        BiasAddGradOp);

}  // namespace
}  // namespace tensorflow
