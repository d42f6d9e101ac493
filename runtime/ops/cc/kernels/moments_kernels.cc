/* OpKernels of Retf>Moments, Retf>MomentsGrad, Retf>BatchNormalize and Retf>BatchNormalizeGrad: a dense layer's batch
   normalization, x [B, N] normalized per column, in a pass or two over x where TensorFlow's ops for tf.nn.moments and
   tf.nn.batch_normalization, and their gradients, make a dozen; and of Retf>LayerMoments, Retf>LayerMomentsGrad,
   Retf>LayerNormalize and Retf>LayerNormalizeGrad: a layer normalization, x [R, N] normalized per row with an offset
   and a scale per column, a row at a time.

   A column's sums run over chunks of kChunkRows rows in parallel, each chunk's rows in order and in double, every row
   read whole and in order (a block of columns would read each row's piece a page apart), and the chunks' sums are
   added in order; a row's sums run in order, in double: the results do not depend on the number of threads. */

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/lib/core/threadpool.h"

namespace tensorflow {
namespace {

constexpr int64_t kChunkRows = 128;  // rows whose column sums one task keeps

thread::ThreadPool* Workers(OpKernelContext* ctx) { return ctx->device()->tensorflow_cpu_worker_threads()->workers; }

// sums[k * n + j] = the sum over the rows of what add(r, partial) adds to partial[k * n + j], for kSums sums of each
// of n columns; add(r, partial) adds row r's terms. cost: of one row.
template <int kSums, typename Add>
void ColumnSums(OpKernelContext* ctx, int64_t rows, int64_t n, int64_t cost, double* sums, Add&& add) {
  const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  std::vector<double> partials(static_cast<size_t>(chunks * kSums * n), 0.0);
  Workers(ctx)->ParallelFor(chunks, kChunkRows * cost, [&](int64_t first, int64_t last) {
    for (int64_t chunk = first; chunk < last; ++chunk) {
      double* partial = partials.data() + chunk * kSums * n;
      for (int64_t r = chunk * kChunkRows; r < std::min(rows, (chunk + 1) * kChunkRows); ++r) add(r, partial);
    }
  });
  std::fill(sums, sums + kSums * n, 0.0);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const double* partial = partials.data() + chunk * kSums * n;
    for (int64_t i = 0; i < kSums * n; ++i) sums[i] += partial[i];
  }
}

// body(first, last) over rows [first, last), in parallel; cost: of one row.
template <typename Body>
void ForRows(OpKernelContext* ctx, int64_t rows, int64_t cost, Body&& body) {
  Workers(ctx)->ParallelFor(rows, cost, body);
}

// x a matrix, and each of inputs [first, first + count) a vector of one value per column of x.
Status CheckVectors(OpKernelContext* ctx, const Tensor& x, int first, int count) {
  if (!TensorShapeUtils::IsMatrix(x.shape())) {
    return errors::InvalidArgument("x must be a matrix [batch, columns], got shape ", x.shape().DebugString());
  }
  for (int i = first; i < first + count; ++i) {
    const Tensor& v = ctx->input(i);
    if (!TensorShapeUtils::IsVector(v.shape()) || v.dim_size(0) != x.dim_size(1)) {
      return errors::InvalidArgument("input ", i, " must be a vector of x's ", x.dim_size(1), " columns, got shape ",
                                     v.shape().DebugString());
    }
  }
  return Status();
}

// x a matrix, each of inputs [first, first + rows) a vector of one value per row of x and each of the next columns
// inputs a vector of one value per column.
Status CheckRowVectors(OpKernelContext* ctx, const Tensor& x, int first, int rows, int columns) {
  if (!TensorShapeUtils::IsMatrix(x.shape())) {
    return errors::InvalidArgument("x must be a matrix [rows, columns], got shape ", x.shape().DebugString());
  }
  for (int i = first; i < first + rows + columns; ++i) {
    const Tensor& v = ctx->input(i);
    const bool row = i < first + rows;
    const int64_t size = x.dim_size(row ? 0 : 1);
    if (!TensorShapeUtils::IsVector(v.shape()) || v.dim_size(0) != size) {
      return errors::InvalidArgument("input ", i, " must be a vector of x's ", size, row ? " rows" : " columns",
                                     ", got shape ", v.shape().DebugString());
    }
  }
  return Status();
}

template <typename T>
class MomentsOp : public OpKernel {
 public:
  explicit MomentsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckVectors(ctx, x, 1, 0));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor *mean = nullptr, *variance = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &mean));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n}), &variance));
    const T* in = x.flat<T>().data();
    T* mean_out = mean->flat<T>().data();
    T* variance_out = variance->flat<T>().data();
    std::vector<double> sums(n);
    ColumnSums<1>(ctx, rows, n, n * sizeof(T), sums.data(), [&](int64_t r, double* partial) {
      const T* row = in + r * n;
      for (int64_t j = 0; j < n; ++j) partial[j] += row[j];
    });
    for (int64_t j = 0; j < n; ++j) mean_out[j] = static_cast<T>(sums[j] / rows);
    ColumnSums<1>(ctx, rows, n, n * sizeof(T), sums.data(), [&](int64_t r, double* partial) {
      const T* row = in + r * n;
      for (int64_t j = 0; j < n; ++j) {
        const double d = static_cast<double>(row[j] - mean_out[j]);
        partial[j] += d * d;
      }
    });
    for (int64_t j = 0; j < n; ++j) variance_out[j] = static_cast<T>(sums[j] / rows);
  }
};

template <typename T>
class MomentsGradOp : public OpKernel {
 public:
  explicit MomentsGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckVectors(ctx, x, 1, 3));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor* x_grad = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &x_grad));
    const T* mean = ctx->input(1).flat<T>().data();
    const T* mean_grad = ctx->input(2).flat<T>().data();
    const T* variance_grad = ctx->input(3).flat<T>().data();
    // d/dx of mean(x) and of mean((x - mean)^2): 1 / B, and 2 (x - mean) / B.
    std::vector<T> constant(n), slope(n);
    for (int64_t j = 0; j < n; ++j) {
      constant[j] = mean_grad[j] / static_cast<T>(rows);
      slope[j] = static_cast<T>(2) * variance_grad[j] / static_cast<T>(rows);
    }
    const T* in = x.flat<T>().data();
    T* out = x_grad->flat<T>().data();
    ForRows(ctx, rows, 3 * n * sizeof(T), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T* row = in + r * n;
        T* grad = out + r * n;
        for (int64_t j = 0; j < n; ++j) grad[j] = constant[j] + slope[j] * (row[j] - mean[j]);
      }
    });
  }
};

// inv = scale / sqrt(variance + epsilon), as tf.nn.batch_normalization computes it.
template <typename T>
void Inverse(const T* variance, const T* scale, T epsilon, int64_t n, T* root, T* inv) {
  for (int64_t j = 0; j < n; ++j) {
    root[j] = static_cast<T>(1) / std::sqrt(variance[j] + epsilon);
    inv[j] = root[j] * scale[j];
  }
}

template <typename T>
class BatchNormalizeOp : public OpKernel {
 public:
  explicit BatchNormalizeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("epsilon", &epsilon_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckVectors(ctx, x, 1, 4));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    const T* mean = ctx->input(1).flat<T>().data();
    const T* offset = ctx->input(3).flat<T>().data();
    std::vector<T> root(n), inv(n), shift(n);
    Inverse(ctx->input(2).flat<T>().data(), ctx->input(4).flat<T>().data(), static_cast<T>(epsilon_), n,
            root.data(), inv.data());
    for (int64_t j = 0; j < n; ++j) shift[j] = offset[j] - mean[j] * inv[j];
    const T* in = x.flat<T>().data();
    T* out = y->flat<T>().data();
    ForRows(ctx, rows, 2 * n * sizeof(T), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T* row = in + r * n;
        T* normalized = out + r * n;
        for (int64_t j = 0; j < n; ++j) normalized[j] = row[j] * inv[j] + shift[j];
      }
    });
  }

 private:
  float epsilon_ = 0;
};

template <typename T>
class BatchNormalizeGradOp : public OpKernel {
 public:
  explicit BatchNormalizeGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("epsilon", &epsilon_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& y_grad = ctx->input(0);
    const Tensor& x = ctx->input(1);
    OP_REQUIRES_OK(ctx, CheckVectors(ctx, x, 2, 3));
    OP_REQUIRES(ctx, y_grad.shape() == x.shape(),
                errors::InvalidArgument("y_grad and x must have one shape, got ", y_grad.shape().DebugString(),
                                        " and ", x.shape().DebugString()));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor* outputs[5] = {nullptr};
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &outputs[0]));
    for (int i = 1; i < 5; ++i) OP_REQUIRES_OK(ctx, ctx->allocate_output(i, TensorShape({n}), &outputs[i]));
    const T* mean = ctx->input(2).flat<T>().data();
    const T* scale = ctx->input(4).flat<T>().data();
    std::vector<T> root(n), inv(n);
    Inverse(ctx->input(3).flat<T>().data(), scale, static_cast<T>(epsilon_), n, root.data(), inv.data());
    const T* g = y_grad.flat<T>().data();
    const T* in = x.flat<T>().data();
    T* x_grad = outputs[0]->flat<T>().data();
    T* mean_grad = outputs[1]->flat<T>().data();
    T* variance_grad = outputs[2]->flat<T>().data();
    T* offset_grad = outputs[3]->flat<T>().data();
    T* scale_grad = outputs[4]->flat<T>().data();
    // sums[j] = sum(g), sums[n + j] = sum(g (x - mean)) of column j; x's gradient written in the same pass.
    std::vector<double> sums(2 * n);
    ColumnSums<2>(ctx, rows, n, 3 * n * sizeof(T), sums.data(), [&](int64_t r, double* partial) {
      const T* g_row = g + r * n;
      const T* row = in + r * n;
      T* grad = x_grad + r * n;
      const T* inv_row = inv.data();
      for (int64_t j = 0; j < n; ++j) {
        grad[j] = g_row[j] * inv_row[j];
        partial[j] += g_row[j];
        partial[n + j] += static_cast<double>(g_row[j]) * static_cast<double>(row[j] - mean[j]);
      }
    });
    // y = x inv + offset - mean inv: d offset = sum(g), d mean = -inv sum(g), d inv = sum(g (x - mean)); inv =
    // root scale, root = (variance + epsilon)^-1/2: d scale = root d inv, d variance = -root^3 scale d inv / 2.
    for (int64_t j = 0; j < n; ++j) {
      const T d_inv = static_cast<T>(sums[n + j]);
      offset_grad[j] = static_cast<T>(sums[j]);
      mean_grad[j] = -inv[j] * static_cast<T>(sums[j]);
      scale_grad[j] = root[j] * d_inv;
      variance_grad[j] = static_cast<T>(-0.5) * root[j] * root[j] * root[j] * scale[j] * d_inv;
    }
  }

 private:
  float epsilon_ = 0;
};

template <typename T>
class LayerMomentsOp : public OpKernel {
 public:
  explicit LayerMomentsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckRowVectors(ctx, x, 1, 0, 0));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor *mean = nullptr, *variance = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({rows}), &mean));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({rows}), &variance));
    const T* in = x.flat<T>().data();
    T* mean_out = mean->flat<T>().data();
    T* variance_out = variance->flat<T>().data();
    ForRows(ctx, rows, 2 * n * sizeof(T), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T* row = in + r * n;
        double sum = 0.0;
        for (int64_t j = 0; j < n; ++j) sum += row[j];
        const T m = static_cast<T>(sum / n);
        double squares = 0.0;  // of the differences from the mean as the output holds it, as TensorFlow's are
        for (int64_t j = 0; j < n; ++j) {
          const double d = static_cast<double>(row[j] - m);
          squares += d * d;
        }
        mean_out[r] = m;
        variance_out[r] = static_cast<T>(squares / n);
      }
    });
  }
};

template <typename T>
class LayerMomentsGradOp : public OpKernel {
 public:
  explicit LayerMomentsGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckRowVectors(ctx, x, 1, 3, 0));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor* x_grad = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &x_grad));
    const T* mean = ctx->input(1).flat<T>().data();
    const T* mean_grad = ctx->input(2).flat<T>().data();
    const T* variance_grad = ctx->input(3).flat<T>().data();
    const T* in = x.flat<T>().data();
    T* out = x_grad->flat<T>().data();
    // d/dx of mean(x) and of mean((x - mean)^2) over a row: 1 / N, and 2 (x - mean) / N.
    ForRows(ctx, rows, 2 * n * sizeof(T), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T constant = mean_grad[r] / static_cast<T>(n);
        const T slope = static_cast<T>(2) * variance_grad[r] / static_cast<T>(n);
        const T m = mean[r];
        const T* row = in + r * n;
        T* grad = out + r * n;
        for (int64_t j = 0; j < n; ++j) grad[j] = constant + slope * (row[j] - m);
      }
    });
  }
};

template <typename T>
class LayerNormalizeOp : public OpKernel {
 public:
  explicit LayerNormalizeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("epsilon", &epsilon_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckRowVectors(ctx, x, 1, 2, 2));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    const T* mean = ctx->input(1).flat<T>().data();
    const T* variance = ctx->input(2).flat<T>().data();
    const T* offset = ctx->input(3).flat<T>().data();
    const T* scale = ctx->input(4).flat<T>().data();
    const T epsilon = static_cast<T>(epsilon_);
    const T* in = x.flat<T>().data();
    T* out = y->flat<T>().data();
    ForRows(ctx, rows, 2 * n * sizeof(T), [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        const T root = static_cast<T>(1) / std::sqrt(variance[r] + epsilon);
        const T m = mean[r];
        const T* row = in + r * n;
        T* normalized = out + r * n;
        for (int64_t j = 0; j < n; ++j) {
          const T inv = root * scale[j];  // tf.nn.batch_normalization's x * inv + (offset - mean * inv)
          normalized[j] = row[j] * inv + (offset[j] - m * inv);
        }
      }
    });
  }

 private:
  float epsilon_ = 0;
};

template <typename T>
class LayerNormalizeGradOp : public OpKernel {
 public:
  explicit LayerNormalizeGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("epsilon", &epsilon_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& y_grad = ctx->input(0);
    const Tensor& x = ctx->input(1);
    OP_REQUIRES_OK(ctx, CheckRowVectors(ctx, x, 2, 2, 1));
    OP_REQUIRES(ctx, y_grad.shape() == x.shape(),
                errors::InvalidArgument("y_grad and x must have one shape, got ", y_grad.shape().DebugString(),
                                        " and ", x.shape().DebugString()));
    const int64_t rows = x.dim_size(0), n = x.dim_size(1);
    Tensor* outputs[5] = {nullptr};
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &outputs[0]));
    for (int i = 1; i < 5; ++i) {
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, TensorShape({i < 3 ? rows : n}), &outputs[i]));
    }
    const T* mean = ctx->input(2).flat<T>().data();
    const T* variance = ctx->input(3).flat<T>().data();
    const T* scale = ctx->input(4).flat<T>().data();
    const T epsilon = static_cast<T>(epsilon_);
    const T* g = y_grad.flat<T>().data();
    const T* in = x.flat<T>().data();
    T* x_grad = outputs[0]->flat<T>().data();
    T* mean_grad = outputs[1]->flat<T>().data();
    T* variance_grad = outputs[2]->flat<T>().data();
    T* offset_grad = outputs[3]->flat<T>().data();
    T* scale_grad = outputs[4]->flat<T>().data();
    // y = x inv + offset - mean inv, inv = root scale, root = (variance + epsilon)^-1/2 of the row: d offset =
    // sum(g) over rows, d mean = -sum(g inv) over the row, d inv = g (x - mean), so d scale = sum(root g (x - mean))
    // over rows and d root = sum(scale g (x - mean)) over the row, d variance = -root^3 d root / 2. The columns' sums
    // (sums[j] = sum(g), sums[n + j] = sum(root g (x - mean))) over chunks of rows; a row's in the same pass.
    std::vector<double> sums(2 * n);
    ColumnSums<2>(ctx, rows, n, 3 * n * sizeof(T), sums.data(), [&](int64_t r, double* partial) {
      const T root = static_cast<T>(1) / std::sqrt(variance[r] + epsilon);
      const T m = mean[r];
      const T* g_row = g + r * n;
      const T* row = in + r * n;
      T* grad = x_grad + r * n;
      double g_inv = 0.0, d_root = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const T inv = root * scale[j];
        const double d_inv = static_cast<double>(g_row[j]) * static_cast<double>(row[j] - m);
        grad[j] = g_row[j] * inv;
        g_inv += static_cast<double>(g_row[j]) * inv;
        d_root += d_inv * scale[j];
        partial[j] += g_row[j];
        partial[n + j] += d_inv * root;
      }
      mean_grad[r] = static_cast<T>(-g_inv);
      variance_grad[r] = static_cast<T>(-0.5 * root * root * root * d_root);
    });
    for (int64_t j = 0; j < n; ++j) {
      offset_grad[j] = static_cast<T>(sums[j]);
      scale_grad[j] = static_cast<T>(sums[n + j]);
    }
  }

 private:
  float epsilon_ = 0;
};

#define RETF_REGISTER_KERNELS(T)                                                                                      \
  REGISTER_KERNEL_BUILDER(Name("Retf>Moments").Device(DEVICE_CPU).TypeConstraint<T>("T"), MomentsOp<T>);               \
  REGISTER_KERNEL_BUILDER(Name("Retf>MomentsGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), MomentsGradOp<T>);       \
  REGISTER_KERNEL_BUILDER(Name("Retf>BatchNormalize").Device(DEVICE_CPU).TypeConstraint<T>("T"), BatchNormalizeOp<T>); \
  REGISTER_KERNEL_BUILDER(Name("Retf>BatchNormalizeGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),                   \
                          BatchNormalizeGradOp<T>);                                                                    \
  REGISTER_KERNEL_BUILDER(Name("Retf>LayerMoments").Device(DEVICE_CPU).TypeConstraint<T>("T"), LayerMomentsOp<T>);     \
  REGISTER_KERNEL_BUILDER(Name("Retf>LayerMomentsGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),                     \
                          LayerMomentsGradOp<T>);                                                                      \
  REGISTER_KERNEL_BUILDER(Name("Retf>LayerNormalize").Device(DEVICE_CPU).TypeConstraint<T>("T"),                       \
                          LayerNormalizeOp<T>);                                                                        \
  REGISTER_KERNEL_BUILDER(Name("Retf>LayerNormalizeGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),                   \
                          LayerNormalizeGradOp<T>);

RETF_REGISTER_KERNELS(float);
RETF_REGISTER_KERNELS(double);

}  // namespace
}  // namespace tensorflow
