/* OpKernels of Retf>PairDenseInputGrad: the input gradient of a dense layer over concat([x, y, x - y,
   x * y, ...], -1), whole and by piece, each output computed only where a consumer runs; and of
   Retf>RepeatedPairGrad: the operands' gradients from it where x repeats a query over a sequence. */

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

// w [rows, cols] transposed, [cols, rows].
template <typename T>
std::vector<T> Transposed(const T* w, int64_t rows, int64_t cols) {
  std::vector<T> wt(rows * cols);
  for (int64_t j = 0; j < rows; ++j) {
    for (int64_t n = 0; n < cols; ++n) wt[n * rows + j] = w[j * cols + n];
  }
  return wt;
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
    const std::vector<T> wt = Transposed(w.flat<T>().data(), width, units);
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

template <typename T>
class RepeatedPairGradOp : public OpKernel {
 public:
  explicit RepeatedPairGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& parts = ctx->input(0);
    const Tensor& query = ctx->input(1);
    const Tensor& y = ctx->input(2);
    const Tensor& grad = ctx->input(3);
    const Tensor& w_x = ctx->input(4);
    const Tensor& sums = ctx->input(5);
    for (int i : {0, 1, 3, 4, 5}) {
      OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(ctx->input(i).shape()),
                  errors::InvalidArgument("parts, query, grad, w_x and sums must be matrices, got input ", i,
                                          " of shape ", ctx->input(i).shape().DebugString()));
    }
    OP_REQUIRES(ctx, y.dims() >= 1, errors::InvalidArgument("y must be at least 1-D, got a scalar"));
    const int64_t d = y.dim_size(y.dims() - 1);
    const int64_t rows = parts.dim_size(0), units = grad.dim_size(1), queries = query.dim_size(0);
    OP_REQUIRES(ctx, parts.dim_size(1) == 2 * d && y.NumElements() == rows * d,
                errors::InvalidArgument("parts must be [rows, 2 x ", d, "] for y's rows of ", d, " values, got ",
                                        parts.shape().DebugString(), " and y ", y.shape().DebugString()));
    OP_REQUIRES(ctx, query.dim_size(1) == d && w_x.dim_size(0) == d,
                errors::InvalidArgument("query and w_x must have y's last dimension ", d, " columns and rows, got ",
                                        query.shape().DebugString(), " and ", w_x.shape().DebugString()));
    OP_REQUIRES(ctx, grad.dim_size(0) == rows && w_x.dim_size(1) == units && sums.dim_size(0) == queries &&
                         sums.dim_size(1) == units,
                errors::InvalidArgument("grad must be [", rows, ", units], w_x [", d, ", units] and sums [", queries,
                                        ", units], got ", grad.shape().DebugString(), ", ", w_x.shape().DebugString(),
                                        " and ", sums.shape().DebugString()));
    OP_REQUIRES(ctx, queries == 0 ? rows == 0 : rows % queries == 0,
                errors::InvalidArgument("y's ", rows, " rows must repeat each of the query's ", queries,
                                        " rows equally often"));
    T* out[3] = {nullptr, nullptr, nullptr};
    const TensorShape shapes[3] = {y.shape(), query.shape(), y.shape()};
    for (int i = 0; i < 3; ++i) {
      if (!ctx->output_required(i)) continue;
      Tensor* output = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, shapes[i], &output));
      out[i] = output->flat<T>().data();
    }
    if (queries == 0 || d == 0 || (out[0] == nullptr && out[1] == nullptr && out[2] == nullptr)) return;
    const int64_t steps = rows / queries;
    const std::vector<T> wt = Transposed(w_x.flat<T>().data(), d, units);
    const T* p = parts.flat<T>().data();
    const T* q = query.flat<T>().data();
    const T* ys = y.flat<T>().data();
    const T* g = grad.flat<T>().data();
    const T* s = sums.flat<T>().data();
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const T* q_row = q + b * d;
        if (out[1] != nullptr) ProductRows(s, wt.data(), units, d, 0, d, b, b + 1, out[1]);
        if (out[2] != nullptr) ProductRows(g, wt.data(), units, d, 0, d, b * steps, (b + 1) * steps, out[2]);
        for (int64_t r = b * steps; r < (b + 1) * steps; ++r) {
          const T* part_y = p + r * 2 * d;
          const T* part_product = part_y + d;
          const T* y_row = ys + r * d;
          if (out[0] != nullptr) {
            T* gy = out[0] + r * d;
            for (int64_t j = 0; j < d; ++j) gy[j] = part_y[j] + part_product[j] * q_row[j];
          }
          if (out[1] != nullptr) {
            T* gq = out[1] + b * d;
            for (int64_t j = 0; j < d; ++j) gq[j] += part_product[j] * y_row[j];
          }
          if (out[2] != nullptr) {
            T* gx = out[2] + r * d;
            for (int64_t j = 0; j < d; ++j) gx[j] += part_product[j] * y_row[j];
          }
        }
      }
    };
    // Per query row: its steps' parts and y read, grad_y written; with grad_x, grad's rows and products.
    int64_t cost = static_cast<int64_t>(sizeof(T)) * steps * d * 4 + 2 * units * d;
    if (out[2] != nullptr) cost += static_cast<int64_t>(sizeof(T)) * steps * (units + d + 2 * units * d);
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(queries, cost, run);
  }
};

#define RETF_REGISTER_KERNELS(T)                                                                      \
  REGISTER_KERNEL_BUILDER(Name("Retf>PairDenseInputGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          PairDenseInputGradOp<T>);                                                   \
  REGISTER_KERNEL_BUILDER(Name("Retf>RepeatedPairGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),   \
                          RepeatedPairGradOp<T>);

RETF_REGISTER_KERNELS(float);
RETF_REGISTER_KERNELS(double);
#undef RETF_REGISTER_KERNELS

}  // namespace
}  // namespace tensorflow
