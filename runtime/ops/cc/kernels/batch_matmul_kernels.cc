/* retf's CPU kernel for TensorFlow's own BatchMatMulV2 on float32, registered under the kernel label "retf":
   the nodes that carry `_kernel: "retf"` run it (the 1.x API labels the float32 products as it builds them),
   every other node TensorFlow's.

   Attention multiplies thousands of small matrices (a transformer over 50 steps: [50, 8] by [8, 50], [50, 50]
   by [50, 8], and their adjoint forms in the gradient). TensorFlow's kernel runs an Eigen product per matrix,
   whose packing and blocking cost more than the arithmetic at these sizes, and its adjoint forms more again.
   Here each matrix of the batch is one thread's: y's matrix is made row-major once (transposed into the
   thread's buffer for adj_y), then register tiles of 4 rows by 16 columns sum over k in order, x's values
   broadcast from wherever adj_x puts them. Batches broadcast as TensorFlow's do. Each output value is the
   same sum in the same order whatever the threads, so the results do not depend on them.

   The shapes are known only when the node runs (public code pads sequences to lengths it computes), so the
   choice is made here, per call: products whose y matrix is small (kMaxYValues) and at least a vector wide
   (kMinColumns) run these tiles, every other one TensorFlow's own kernel, which this one holds. */

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/util/work_sharder.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensorflow {
namespace {

#if defined(__x86_64__)
namespace bmm_avx {
#define RETF_BMM_TARGET "avx"
#define RETF_BMM_MULADD(acc, x, y) _mm256_add_ps(acc, _mm256_mul_ps(x, y))
#include "batch_matmul_tile.inc"
#undef RETF_BMM_MULADD
#undef RETF_BMM_TARGET
}  // namespace bmm_avx

namespace bmm_fma {
#define RETF_BMM_TARGET "avx,fma"
#define RETF_BMM_MULADD(acc, x, y) _mm256_fmadd_ps(x, y, acc)
#include "batch_matmul_tile.inc"
#undef RETF_BMM_MULADD
#undef RETF_BMM_TARGET
}  // namespace bmm_fma
#endif

// out [M, N] = X Y in plain loops, the sum over k in order (X's [m, k] at x + m * x_row + k * x_col).
void PlainProduct(const float* x, int64_t x_row, int64_t x_col, const float* y, int64_t m_size, int64_t n,
                  int64_t k_size, float* out) {
  for (int64_t i = 0; i < m_size; ++i) {
    float* out_i = out + i * n;
    std::fill(out_i, out_i + n, 0.0f);
    for (int64_t k = 0; k < k_size; ++k) {
      const float x_ik = x[i * x_row + k * x_col];
      const float* y_k = y + k * n;
      for (int64_t j = 0; j < n; ++j) out_i[j] += x_ik * y_k[j];
    }
  }
}

using Product = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float*);

// AVX with FMA where the CPU has it (as TensorFlow's own products fuse where they can), AVX without, else
// plain loops. RETF_BATCH_MATMUL_ISA=fma|avx|plain caps the choice (the checks compare the paths on one CPU);
// it is read once.
Product BestProduct() {
  static const Product best = [] {
    const char* isa = std::getenv("RETF_BATCH_MATMUL_ISA");
    const std::string cap = isa == nullptr ? "fma" : isa;
#if defined(__x86_64__)
    const bool avx = __builtin_cpu_supports("avx") && cap != "plain";
    if (avx && __builtin_cpu_supports("fma") && cap != "avx") return bmm_fma::Product;
    if (avx) return bmm_avx::Product;
#endif
    return PlainProduct;
  }();
  return best;
}

// Where each matrix of the output's batch is in x and in y, batch dimensions aligned from the right and
// broadcast where one side has 1 (or lacks the dimension), as numpy and TensorFlow broadcast them.
struct BatchIndex {
  TensorShape batch;                         // the output's batch dimensions
  std::vector<int64_t> x_matrix, y_matrix;   // per output matrix, the matrix of x and of y it multiplies
};

// False where they do not broadcast.
bool IndexBatches(const TensorShape& x, const TensorShape& y, BatchIndex* index) {
  const int x_batch_rank = x.dims() - 2, y_batch_rank = y.dims() - 2;
  const int rank = std::max(x_batch_rank, y_batch_rank);
  std::vector<int64_t> x_dims(rank, 1), y_dims(rank, 1);
  for (int d = 0; d < x_batch_rank; ++d) x_dims[rank - x_batch_rank + d] = x.dim_size(d);
  for (int d = 0; d < y_batch_rank; ++d) y_dims[rank - y_batch_rank + d] = y.dim_size(d);
  index->batch = TensorShape();
  for (int d = 0; d < rank; ++d) {
    if (x_dims[d] != y_dims[d] && x_dims[d] != 1 && y_dims[d] != 1) return false;
    index->batch.AddDim(x_dims[d] == 1 ? y_dims[d] : x_dims[d]);
  }
  const int64_t count = index->batch.num_elements();
  index->x_matrix.assign(count, 0);
  index->y_matrix.assign(count, 0);
  // Walk the output's batch in row-major order, carrying each side's position (stride 0 where broadcast).
  std::vector<int64_t> x_stride(rank, 0), y_stride(rank, 0);
  for (int64_t d = rank - 1, xs = 1, ys = 1; d >= 0; --d) {
    x_stride[d] = x_dims[d] == 1 ? 0 : xs;
    y_stride[d] = y_dims[d] == 1 ? 0 : ys;
    xs *= x_dims[d];
    ys *= y_dims[d];
  }
  std::vector<int64_t> position(rank, 0);
  int64_t x_at = 0, y_at = 0;
  for (int64_t b = 0; b < count; ++b) {
    index->x_matrix[b] = x_at;
    index->y_matrix[b] = y_at;
    for (int d = rank - 1; d >= 0; --d) {
      x_at += x_stride[d];
      y_at += y_stride[d];
      if (++position[d] < index->batch.dim_size(d)) break;
      x_at -= x_stride[d] * position[d];
      y_at -= y_stride[d] * position[d];
      position[d] = 0;
    }
  }
  return true;
}

// The products the tiles take, by their matrices (x [M, K] by y [K, N], after any adjoint): y's matrix at most
// this many values (256 KiB, which stays in L2 while the row tiles reread it) and at least one AVX vector of
// columns (narrower ones run mostly masked lanes). In bench/bench_batch_matmul.py the tiles ran at 1.1-5.5x
// TensorFlow's kernel at such shapes but one (2 x [128, 128] by [128, 128], 0.92x); a [512, 512] y ran at
// 0.36x, an N of 1 at 0.65-0.79x.
constexpr int64_t kMaxYValues = 65536;
constexpr int64_t kMinColumns = 8;

class RetfBatchMatMulOp : public OpKernel {
 public:
  explicit RetfBatchMatMulOp(OpKernelConstruction* ctx) : OpKernel(ctx), product_(BestProduct()) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("adj_x", &adj_x_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("adj_y", &adj_y_));
    // TensorFlow's own kernel for this node: the one its registry gives the node without the label.
    NodeDef unlabelled = def();
    unlabelled.mutable_attr()->erase("_kernel");
    Status status;
    tensorflow_kernel_ = CreateOpKernel(DEVICE_CPU, ctx->device(), ctx->device()->GetAllocator(AllocatorAttributes()),
                                        unlabelled, ctx->graph_def_version(), &status);
    OP_REQUIRES_OK(ctx, status);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    BatchIndex index;
    if (!TakesTiles(x.shape(), y.shape(), &index)) {  // TensorFlow's products, and its errors
      tensorflow_kernel_->Compute(ctx);
      return;
    }
    const int64_t x_rows = x.dim_size(x.dims() - 2), x_cols = x.dim_size(x.dims() - 1);
    const int64_t y_rows = y.dim_size(y.dims() - 2), y_cols = y.dim_size(y.dims() - 1);
    const int64_t m = adj_x_ ? x_cols : x_rows, k_size = adj_x_ ? x_rows : x_cols;
    const int64_t n = adj_y_ ? y_rows : y_cols;
    TensorShape out_shape = index.batch;
    out_shape.AddDim(m);
    out_shape.AddDim(n);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    if (out->NumElements() == 0) return;
    float* const out_data = out->flat<float>().data();
    if (k_size == 0) {
      std::fill(out_data, out_data + out->NumElements(), 0.0f);
      return;
    }
    const float* const x_data = x.flat<float>().data();
    const float* const y_data = y.flat<float>().data();
    const int64_t x_size = x_rows * x_cols, y_size = y_rows * y_cols, out_size = m * n;
    // x's [i, k]: row-major [M, K], or [K, M] read down its columns for adj_x.
    const int64_t x_row = adj_x_ ? 1 : k_size, x_col = adj_x_ ? m : 1;
    const Product product = product_;
    const bool adj_y = adj_y_;
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> y_t(adj_y ? k_size * n : 0);
      for (int64_t b = begin; b < end; ++b) {
        const float* y_b = y_data + index.y_matrix[b] * y_size;
        if (adj_y) {  // [N, K] into row-major [K, N]
          for (int64_t j = 0; j < n; ++j)
            for (int64_t k = 0; k < k_size; ++k) y_t[k * n + j] = y_b[j * k_size + k];
          y_b = y_t.data();
        }
        product(x_data + index.x_matrix[b] * x_size, x_row, x_col, y_b, m, n, k_size, out_data + b * out_size);
      }
    };
    const auto* threads = ctx->device()->tensorflow_cpu_worker_threads();
    Shard(threads->num_threads, threads->workers, index.batch.num_elements(), 2 * m * n * k_size + x_size + y_size,
          work);
  }

 private:
  // Whether this call's product is one for the tiles: valid (matrices that multiply, batches that broadcast;
  // TensorFlow's kernel words what is not, as the running version does) and small (kMaxYValues, kMinColumns).
  // Fills index for it.
  bool TakesTiles(const TensorShape& x, const TensorShape& y, BatchIndex* index) const {
    if (x.dims() < 2 || y.dims() < 2) return false;
    const int64_t k_size = x.dim_size(x.dims() - (adj_x_ ? 2 : 1));
    const int64_t y_k = y.dim_size(y.dims() - (adj_y_ ? 1 : 2)), n = y.dim_size(y.dims() - (adj_y_ ? 2 : 1));
    if (k_size != y_k || n < kMinColumns || y_k * n > kMaxYValues) return false;
    return IndexBatches(x, y, index);
  }

  bool adj_x_ = false;
  bool adj_y_ = false;
  const Product product_;
  std::unique_ptr<OpKernel> tensorflow_kernel_;
};

REGISTER_KERNEL_BUILDER(Name("BatchMatMulV2").Device(DEVICE_CPU).TypeConstraint<float>("T").Label("retf"),
                        RetfBatchMatMulOp);

}  // namespace
}  // namespace tensorflow
