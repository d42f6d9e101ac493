/* OpKernel of Retf>PairDenseInputGrad: the input gradient of a dense layer over concat([x, y, x - y,
   x * y, ...], -1), whole and by piece, each output computed only where a consumer runs. */

#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tensorflow {
namespace {

// out[r, 0 .. width) = grad[r, :] . wt[:, first .. first + width) for rows [begin, end): each value summed
// over the layer's units in order from zero.
template <typename T>
void ProductRows(const T* grad, const T* wt, int64_t units, int64_t wt_cols, int64_t first, int64_t width,
                 int64_t begin, int64_t end, T* out) {
  for (int64_t r = begin; r < end; ++r) {
    T* out_row = out + r * width;
    for (int64_t j = 0; j < width; ++j) out_row[j] = T(0);
    const T* g_row = grad + r * units;
    for (int64_t n = 0; n < units; ++n) {
      const T g = g_row[n];
      const T* w_row = wt + n * wt_cols + first;
      for (int64_t j = 0; j < width; ++j) out_row[j] += g * w_row[j];
    }
  }
}

template <typename T>
class PairDenseInputGradOp : public OpKernel {
 public:
  explicit PairDenseInputGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("P", &num_pieces_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    const Tensor& w = ctx->input(1);
    const Tensor& like = ctx->input(2);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(grad.shape()) && TensorShapeUtils::IsMatrix(w.shape()),
                errors::InvalidArgument("grad and w must be matrices, got shapes ", grad.shape().DebugString(),
                                        " and ", w.shape().DebugString()));
    OP_REQUIRES(ctx, like.dims() >= 1, errors::InvalidArgument("like must be at least 1-D, got a scalar"));
    const int64_t rows = grad.dim_size(0), units = grad.dim_size(1);
    const int64_t d = like.dim_size(like.dims() - 1);
    const int64_t width = d * num_pieces_;
    OP_REQUIRES(ctx, w.dim_size(0) == width && w.dim_size(1) == units,
                errors::InvalidArgument("w must be [", num_pieces_, " x ", d, ", ", units, "] (P pieces of like's ",
                                        "last dimension, grad's columns), got ", w.shape().DebugString()));
    OP_REQUIRES(ctx, like.NumElements() == rows * d,
                errors::InvalidArgument("like must hold grad's ", rows, " rows of ", d, " values, got shape ",
                                        like.shape().DebugString()));
    // (output, first column of w's rows, width) for the outputs some consumer reads.
    struct Wanted {
      T* out;
      int64_t first, width;
    };
    std::vector<Wanted> wanted;
    if (ctx->output_required(0)) {
      Tensor* whole = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({rows, width}), &whole));
      wanted.push_back({whole->flat<T>().data(), 0, width});
    }
    for (int i = 0; i < num_pieces_; ++i) {
      if (!ctx->output_required(1 + i)) continue;
      Tensor* piece = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(1 + i, like.shape(), &piece));
      wanted.push_back({piece->flat<T>().data(), i * d, d});
    }
    if (wanted.empty() || rows == 0 || width == 0) return;
    // w transposed, [units, width]: each output row is then a sum of w's rows scaled by grad's values.
    const T* w_data = w.flat<T>().data();
    std::vector<T> wt(units * width);
    for (int64_t j = 0; j < width; ++j) {
      for (int64_t n = 0; n < units; ++n) wt[n * width + j] = w_data[j * units + n];
    }
    const T* g = grad.flat<T>().data();
    auto run = [&](int64_t begin, int64_t end) {
      for (const Wanted& out : wanted) {
        ProductRows(g, wt.data(), units, width, out.first, out.width, begin, end, out.out);
      }
    };
    int64_t wanted_width = 0;
    for (const Wanted& out : wanted) wanted_width += out.width;
    const int64_t cost = static_cast<int64_t>(sizeof(T)) * (units + 2 * wanted_width * (units + 1));
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(rows, cost, run);
  }

 private:
  int num_pieces_ = 0;
};

#define RETF_REGISTER_KERNELS(T)                                                                      \
  REGISTER_KERNEL_BUILDER(Name("Retf>PairDenseInputGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          PairDenseInputGradOp<T>);

RETF_REGISTER_KERNELS(float);
RETF_REGISTER_KERNELS(double);
#undef RETF_REGISTER_KERNELS

}  // namespace
}  // namespace tensorflow
