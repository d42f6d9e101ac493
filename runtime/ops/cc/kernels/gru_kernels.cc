/* OpKernels of Retf>GRURecurrence and Retf>GRURecurrenceGrad: a GRU's recurrence over whole sequences, each
   row of the batch on one thread from its first step to its last.

   What tf.nn.dynamic_rnn runs as a while loop of a dozen ops a step (and its gradient as a second loop fed by
   stacks) is here one pass per row: the step's products are a row times a small matrix that stays in the
   cache, the activations Eigen's (TensorFlow's own Sigmoid and Tanh arithmetic). Rows are independent, so
   the results do not depend on the threads; the weights' gradients are summed by retf's transposed product,
   whose order does not either. */

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transposed_matmul_kernels.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/util/work_sharder.h"
#include "unsupported/Eigen/CXX11/Tensor"

// glibc 2.27 gave expf a new symbol version (the same function without the SVID error handling), which Eigen's
// scalar sigmoid and tanh call: a library compiled against a newer glibc would need it and not load on the glibc
// (2.17 to 2.27) users have. Bind the calls to its first version, which every glibc has (as sparse_apply_rows.h
// does for pow).
#if defined(__GLIBC__) && defined(__x86_64__)
__asm__(".symver expf,expf@GLIBC_2.2.5");
#elif defined(__GLIBC__) && defined(__aarch64__)
__asm__(".symver expf,expf@GLIBC_2.17");
#endif

namespace tensorflow {
namespace {

// acc[0, n) += v[0, k) w[k, n) for a row-major w, over w's rows in order.
#define RETF_GRU_ROW_TIMES_MATRIX                                   \
  for (int64_t i = 0; i < k; ++i) {                                 \
    const float vi = v[i];                                          \
    const float* __restrict wi = w + i * n;                         \
    for (int64_t j = 0; j < n; ++j) acc[j] += vi * wi[j];           \
  }

void RowTimesMatrixPlain(const float* __restrict v, const float* __restrict w, int64_t k, int64_t n,
                         float* __restrict acc) {
  RETF_GRU_ROW_TIMES_MATRIX
}

#if defined(__x86_64__)
__attribute__((target("avx"))) void RowTimesMatrixAvx(const float* __restrict v, const float* __restrict w,
                                                      int64_t k, int64_t n, float* __restrict acc) {
  RETF_GRU_ROW_TIMES_MATRIX
}
#endif
#undef RETF_GRU_ROW_TIMES_MATRIX

using RowTimesMatrix = void (*)(const float*, const float*, int64_t, int64_t, float*);

RowTimesMatrix BestRowTimesMatrix() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx")) return RowTimesMatrixAvx;
#endif
  return RowTimesMatrixPlain;
}

using Vector = Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor>, Eigen::Unaligned>;

void SigmoidInPlace(float* x, int64_t n) {
  Vector v(x, n);
  v = v.sigmoid();
}

void TanhInPlace(float* x, int64_t n) {
  Vector v(x, n);
  v = v.tanh();
}

// w [rows, cols] row-major, transposed into out [cols, rows].
void Transpose(const float* w, int64_t rows, int64_t cols, float* out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = w[i * cols + j];
}

// What both kernels check of the inputs they share; sets batch, steps and units.
Status CheckShapes(const Tensor& lengths, const Tensor& w_ru_h, const Tensor& w_c_h, const TensorShape& sequence,
                   int64_t* batch, int64_t* steps, int64_t* units) {
  if (sequence.dims() != 3) return errors::InvalidArgument("expected [steps, batch, units], got ", sequence.DebugString());
  *steps = sequence.dim_size(0);
  *batch = sequence.dim_size(1);
  *units = w_c_h.dims() == 2 ? w_c_h.dim_size(0) : -1;
  if (!TensorShapeUtils::IsSquareMatrix(w_c_h.shape()))
    return errors::InvalidArgument("w_c_h must be a square matrix, got ", w_c_h.shape().DebugString());
  if (w_ru_h.shape() != TensorShape({*units, 2 * *units}))
    return errors::InvalidArgument("w_ru_h must be [", *units, ", ", 2 * *units, "], got ", w_ru_h.shape().DebugString());
  if (lengths.shape() != TensorShape({*batch}))
    return errors::InvalidArgument("lengths must be [", *batch, "], got ", lengths.shape().DebugString());
  return Status();
}

int64_t RowCost(int64_t steps, int64_t units) { return 8 * steps * units * units + 1; }

class GRURecurrenceOp : public OpKernel {
 public:
  explicit GRURecurrenceOp(OpKernelConstruction* ctx) : OpKernel(ctx), row_times_matrix_(BestRowTimesMatrix()) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x_ru = ctx->input(0);
    const Tensor& x_c = ctx->input(1);
    const Tensor& h0 = ctx->input(2);
    const Tensor& lengths = ctx->input(3);
    const Tensor& w_ru_h = ctx->input(4);
    const Tensor& w_c_h = ctx->input(5);
    int64_t batch, steps, units;
    OP_REQUIRES_OK(ctx, CheckShapes(lengths, w_ru_h, w_c_h, x_c.shape(), &batch, &steps, &units));
    OP_REQUIRES(ctx, x_c.dim_size(2) == units,
                errors::InvalidArgument("x_c must be [steps, batch, ", units, "], got ", x_c.shape().DebugString()));
    OP_REQUIRES(ctx, x_ru.shape() == TensorShape({steps, batch, 2 * units}),
                errors::InvalidArgument("x_ru must be [", steps, ", ", batch, ", ", 2 * units, "], got ",
                                        x_ru.shape().DebugString()));
    OP_REQUIRES(ctx, h0.shape() == TensorShape({batch, units}),
                errors::InvalidArgument("h0 must be [", batch, ", ", units, "], got ", h0.shape().DebugString()));
    Tensor *outputs, *final, *gates, *h_prev;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({steps, batch, units}), &outputs));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({batch, units}), &final));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({steps, batch, 3 * units}), &gates));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({steps, batch, units}), &h_prev));
    const float* xru = x_ru.flat<float>().data();
    const float* xc = x_c.flat<float>().data();
    const float* start = h0.flat<float>().data();
    const int32* length = lengths.flat<int32>().data();
    const float* wru = w_ru_h.flat<float>().data();
    const float* wc = w_c_h.flat<float>().data();
    float* out = outputs->flat<float>().data();
    float* last = final->flat<float>().data();
    float* g = gates->flat<float>().data();
    float* hp = h_prev->flat<float>().data();
    const int64_t H = units;
    const RowTimesMatrix row_times_matrix = row_times_matrix_;
    auto rows = [&](int64_t begin, int64_t end) {
      std::vector<float> h(H), rh(H);
      for (int64_t b = begin; b < end; ++b) {
        std::copy(start + b * H, start + (b + 1) * H, h.begin());
        const int64_t len = std::min<int64_t>(std::max<int32>(length[b], 0), steps);
        for (int64_t t = 0; t < len; ++t) {
          const int64_t at = t * batch + b;
          float* ru = g + at * 3 * H;  // r, u, then c
          float* c = ru + 2 * H;
          std::copy(xru + at * 2 * H, xru + (at + 1) * 2 * H, ru);
          row_times_matrix(h.data(), wru, H, 2 * H, ru);
          SigmoidInPlace(ru, 2 * H);
          const float* u = ru + H;
          for (int64_t i = 0; i < H; ++i) rh[i] = ru[i] * h[i];
          std::copy(xc + at * H, xc + (at + 1) * H, c);
          row_times_matrix(rh.data(), wc, H, H, c);
          TanhInPlace(c, H);
          std::copy(h.begin(), h.end(), hp + at * H);
          for (int64_t i = 0; i < H; ++i) h[i] = u[i] * h[i] + (1.0f - u[i]) * c[i];
          std::copy(h.begin(), h.end(), out + at * H);
        }
        for (int64_t t = len; t < steps; ++t) {
          const int64_t at = t * batch + b;
          std::fill(out + at * H, out + (at + 1) * H, 0.0f);
          std::fill(hp + at * H, hp + (at + 1) * H, 0.0f);
          std::fill(g + at * 3 * H, g + (at + 1) * 3 * H, 0.0f);
        }
        std::copy(h.begin(), h.end(), last + b * H);
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    Shard(workers->num_threads, workers->workers, batch, RowCost(steps, units), rows);
  }

 private:
  const RowTimesMatrix row_times_matrix_;
};

class GRURecurrenceGradOp : public OpKernel {
 public:
  explicit GRURecurrenceGradOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), row_times_matrix_(BestRowTimesMatrix()) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& d_outputs = ctx->input(0);
    const Tensor& d_final = ctx->input(1);
    const Tensor& gates = ctx->input(2);
    const Tensor& h_prev = ctx->input(3);
    const Tensor& lengths = ctx->input(4);
    const Tensor& w_ru_h = ctx->input(5);
    const Tensor& w_c_h = ctx->input(6);
    int64_t batch, steps, units;
    OP_REQUIRES_OK(ctx, CheckShapes(lengths, w_ru_h, w_c_h, h_prev.shape(), &batch, &steps, &units));
    OP_REQUIRES(ctx, h_prev.dim_size(2) == units && d_outputs.shape() == h_prev.shape(),
                errors::InvalidArgument("h_prev and d_outputs must be [steps, batch, ", units, "], got ",
                                        h_prev.shape().DebugString(), " and ", d_outputs.shape().DebugString()));
    OP_REQUIRES(ctx, gates.shape() == TensorShape({steps, batch, 3 * units}),
                errors::InvalidArgument("gates must be [", steps, ", ", batch, ", ", 3 * units, "], got ",
                                        gates.shape().DebugString()));
    OP_REQUIRES(ctx, d_final.shape() == TensorShape({batch, units}),
                errors::InvalidArgument("d_final must be [", batch, ", ", units, "], got ",
                                        d_final.shape().DebugString()));
    Tensor *d_x_ru, *d_x_c, *d_h0, *d_w_ru_h, *d_w_c_h;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({steps, batch, 2 * units}), &d_x_ru));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({steps, batch, units}), &d_x_c));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({batch, units}), &d_h0));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, w_ru_h.shape(), &d_w_ru_h));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, w_c_h.shape(), &d_w_c_h));
    Tensor rh_tensor;  // r * h_prev for every step: the candidate's input for its weight's gradient
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(DT_FLOAT, TensorShape({steps, batch, units}), &rh_tensor));
    const int64_t H = units;
    std::vector<float> wru_t(2 * H * H), wc_t(H * H);  // w^T: the step's products back as rows times matrices
    Transpose(w_ru_h.flat<float>().data(), H, 2 * H, wru_t.data());
    Transpose(w_c_h.flat<float>().data(), H, H, wc_t.data());
    const float* dout = d_outputs.flat<float>().data();
    const float* dlast = d_final.flat<float>().data();
    const float* g = gates.flat<float>().data();
    const float* hp = h_prev.flat<float>().data();
    const int32* length = lengths.flat<int32>().data();
    float* dxru = d_x_ru->flat<float>().data();
    float* dxc = d_x_c->flat<float>().data();
    float* dstart = d_h0->flat<float>().data();
    float* rh = rh_tensor.flat<float>().data();
    const RowTimesMatrix row_times_matrix = row_times_matrix_;
    auto rows = [&](int64_t begin, int64_t end) {
      std::vector<float> dh(H), dhp(H), drh(H);
      for (int64_t b = begin; b < end; ++b) {
        std::copy(dlast + b * H, dlast + (b + 1) * H, dh.begin());
        const int64_t len = std::min<int64_t>(std::max<int32>(length[b], 0), steps);
        for (int64_t t = len; t < steps; ++t) {
          const int64_t at = t * batch + b;
          std::fill(dxru + at * 2 * H, dxru + (at + 1) * 2 * H, 0.0f);
          std::fill(dxc + at * H, dxc + (at + 1) * H, 0.0f);
          std::fill(rh + at * H, rh + (at + 1) * H, 0.0f);
        }
        for (int64_t t = len - 1; t >= 0; --t) {
          const int64_t at = t * batch + b;
          const float* r = g + at * 3 * H;
          const float* u = r + H;
          const float* c = r + 2 * H;
          const float* h = hp + at * H;
          const float* dy = dout + at * H;
          float* dru = dxru + at * 2 * H;  // d(r's pre-activation), then u's
          float* dc = dxc + at * H;        // d(c's pre-activation)
          for (int64_t i = 0; i < H; ++i) {
            const float d = dh[i] + dy[i];
            dc[i] = d * (1.0f - u[i]) * (1.0f - c[i] * c[i]);
            dru[H + i] = d * (h[i] - c[i]) * u[i] * (1.0f - u[i]);
            dhp[i] = d * u[i];
            drh[i] = 0.0f;
            rh[at * H + i] = r[i] * h[i];
          }
          row_times_matrix(dc, wc_t.data(), H, H, drh.data());
          for (int64_t i = 0; i < H; ++i) {
            dru[i] = drh[i] * h[i] * r[i] * (1.0f - r[i]);
            dhp[i] += drh[i] * r[i];
          }
          row_times_matrix(dru, wru_t.data(), 2 * H, H, dhp.data());
          dh.swap(dhp);
        }
        std::copy(dh.begin(), dh.end(), dstart + b * H);
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    Shard(workers->num_threads, workers->workers, batch, RowCost(steps, units), rows);
    const auto path = retf::functor::BestTransposedMatMulPath();
    retf::functor::TransposedMatMul<float>()(workers->workers, hp, dxru, batch * steps, H, 2 * H,
                                             d_w_ru_h->flat<float>().data(), path);
    retf::functor::TransposedMatMul<float>()(workers->workers, rh, dxc, batch * steps, H, H,
                                             d_w_c_h->flat<float>().data(), path);
  }

 private:
  const RowTimesMatrix row_times_matrix_;
};

REGISTER_KERNEL_BUILDER(Name("Retf>GRURecurrence").Device(DEVICE_CPU), GRURecurrenceOp);
REGISTER_KERNEL_BUILDER(Name("Retf>GRURecurrenceGrad").Device(DEVICE_CPU), GRURecurrenceGradOp);

}  // namespace
}  // namespace tensorflow
