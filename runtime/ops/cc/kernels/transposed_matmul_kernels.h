/* a^T b for the weight gradient of a dense layer: a [K, M] (the layer's input), b [K, N] (the
   gradient of its output), K (the batch) long and M x N (the weight) small. */

#ifndef RETF_OPS_CC_KERNELS_TRANSPOSED_MATMUL_KERNELS_H_
#define RETF_OPS_CC_KERNELS_TRANSPOSED_MATMUL_KERNELS_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensorflow/core/platform/threadpool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace retf {
namespace functor {

#if defined(__x86_64__)
namespace tm_avx {
#define RETF_TM_TARGET "avx"
#define RETF_TM_MULADD(acc, x, y) _mm256_add_ps(acc, _mm256_mul_ps(x, y))
#include "transposed_matmul_tile.inc"
#undef RETF_TM_MULADD
#undef RETF_TM_TARGET
}  // namespace tm_avx

namespace tm_fma {
#define RETF_TM_TARGET "avx,fma"
#define RETF_TM_MULADD(acc, x, y) _mm256_fmadd_ps(x, y, acc)
#include "transposed_matmul_tile.inc"
#undef RETF_TM_MULADD
#undef RETF_TM_TARGET
}  // namespace tm_fma

namespace tm_avx512 {
#include "transposed_matmul_tile512.inc"
}  // namespace tm_avx512
#endif

// Which kernel a float product runs: 16-float AVX-512 tiles where the CPU has them, else 8-float AVX
// tiles with FMA where it has that (as TensorFlow's own MatMul fuses where the CPU can), without it on
// AVX alone, else plain loops. The AVX-512 and FMA tiles give the same bits. The environment variable
// RETF_TRANSPOSED_MATMUL_ISA=avx512|fma|avx|plain caps the choice (the checks compare the paths on one
// CPU); it is read once.
enum class TransposedMatMulPath { kPlain, kAvx, kFma, kAvx512 };

inline TransposedMatMulPath CpuTransposedMatMulPath() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return TransposedMatMulPath::kAvx512;
  if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx")) return TransposedMatMulPath::kFma;
  if (__builtin_cpu_supports("avx")) return TransposedMatMulPath::kAvx;
#endif
  return TransposedMatMulPath::kPlain;
}

inline TransposedMatMulPath BestTransposedMatMulPath() {
  static const TransposedMatMulPath path = [] {
    const TransposedMatMulPath cpu = CpuTransposedMatMulPath();
    const char* isa = std::getenv("RETF_TRANSPOSED_MATMUL_ISA");
    if (isa == nullptr) return cpu;
    const std::string cap(isa);
    const TransposedMatMulPath asked = cap == "avx512" ? TransposedMatMulPath::kAvx512
                                       : cap == "fma"  ? TransposedMatMulPath::kFma
                                       : cap == "avx"  ? TransposedMatMulPath::kAvx
                                       : cap == "plain" ? TransposedMatMulPath::kPlain
                                                        : cpu;
    return std::min(asked, cpu);
  }();
  return path;
}

// out = a[0 .. kc)^T b[0 .. kc) in plain loops, the sum over k in order.
template <typename T>
void PlainChunk(const T* a, const T* b, int64_t m_size, int64_t n_size, int64_t kc, T* out) {
  std::fill(out, out + m_size * n_size, T(0));
  for (int64_t k = 0; k < kc; ++k) {
    const T* a_k = a + k * m_size;
    const T* b_k = b + k * n_size;
    for (int64_t m = 0; m < m_size; ++m) {
      T* out_m = out + m * n_size;
      const T a_km = a_k[m];
      for (int64_t n = 0; n < n_size; ++n) out_m[n] += a_km * b_k[n];
    }
  }
}

template <typename T>
inline void ChunkProduct(TransposedMatMulPath path, const T* a, const T* b, int64_t m_size, int64_t n_size,
                         int64_t kc, T* out) {
  PlainChunk(a, b, m_size, n_size, kc, out);
}

#if defined(__x86_64__)
template <>
inline void ChunkProduct<float>(TransposedMatMulPath path, const float* a, const float* b, int64_t m_size,
                                int64_t n_size, int64_t kc, float* out) {
  if (path == TransposedMatMulPath::kAvx512) {
    tm_avx512::Chunk(a, b, m_size, n_size, kc, out);
  } else if (path == TransposedMatMulPath::kFma) {
    tm_fma::Chunk(a, b, m_size, n_size, kc, out);
  } else if (path == TransposedMatMulPath::kAvx) {
    tm_avx::Chunk(a, b, m_size, n_size, kc, out);
  } else {
    PlainChunk(a, b, m_size, n_size, kc, out);
  }
}
#endif

// The rows of a chunk: from the shapes alone (never from the number of threads), so the sum's order,
// and with it every bit of the result, is the same however the pool splits the work. 512 rows of a
// [K, 144] input and a [K, 80] gradient (450 KiB) stay in L2 while a chunk's tiles reread them;
// shorter K gets up to 4 chunks of at least 128 rows to share out (shorter chunks spend more on
// storing their tiles and on the partial sums than they save), and a chunk holds at least 2^20
// multiply-adds (tens of microseconds, against the pool's few microseconds to hand one out), so a
// small product (a recurrent cell's weights at batch 128, a [429, 1] weight vector) is one chunk on
// the calling thread. The chunks' partial products are capped at 8M values (32 MiB for float); a
// thread keeps its buffer between calls up to 1M values (4 MiB for float: DIN's attention needs
// 576K), so a one-off large product does not stay allocated on every thread that ran one.
constexpr int64_t kMaxChunkRows = 512;
constexpr int64_t kMinChunkRows = 128;
constexpr int64_t kMinChunkMultiplyAdds = int64_t{1} << 20;
constexpr int64_t kMaxPartialValues = int64_t{8} << 20;
constexpr int64_t kMaxKeptPartialValues = int64_t{1} << 20;

inline int64_t TransposedMatMulChunkRows(int64_t k_size, int64_t m_size, int64_t n_size) {
  const int64_t values = std::max<int64_t>(1, m_size * n_size);
  int64_t rows = std::min(kMaxChunkRows, std::max(kMinChunkRows, (k_size + 3) / 4));
  rows = std::max(rows, (kMinChunkMultiplyAdds + values - 1) / values);
  const int64_t max_chunks = std::max<int64_t>(1, kMaxPartialValues / values);
  if ((k_size + rows - 1) / rows > max_chunks) rows = (k_size + max_chunks - 1) / max_chunks;
  return std::max<int64_t>(1, std::min(rows, std::max<int64_t>(1, k_size)));
}

// out [M, N] = a^T b, a [K, M] and b [K, N] row-major: each chunk of rows summed on one thread
// into a partial product, the partial products then added in chunk order.
template <typename T>
struct TransposedMatMul {
  void operator()(tensorflow::thread::ThreadPool* pool, const T* a, const T* b, int64_t k_size, int64_t m_size,
                  int64_t n_size, T* out, TransposedMatMulPath path) const {
    const int64_t values = m_size * n_size;
    if (values == 0) return;
    if (k_size == 0) {
      std::fill(out, out + values, T(0));
      return;
    }
    const int64_t rows = TransposedMatMulChunkRows(k_size, m_size, n_size);
    const int64_t chunks = (k_size + rows - 1) / rows;
    if (chunks == 1) {
      ChunkProduct<T>(path, a, b, m_size, n_size, k_size, out);
      return;
    }
    // Reused between calls on one thread: a fresh buffer of megabytes costs a page fault per 4 KiB.
    // The workers reach it through this pointer (inside their lambdas the name is their own thread's).
    static thread_local std::vector<T> kept;
    std::vector<T> once;
    std::vector<T>& scratch = chunks * values <= kMaxKeptPartialValues ? kept : once;
    scratch.resize(chunks * values);
    T* const partial = scratch.data();
    pool->ParallelFor(chunks, 2 * rows * values, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const int64_t k0 = c * rows, kc = std::min(k_size, k0 + rows) - k0;
        ChunkProduct<T>(path, a + k0 * m_size, b + k0 * n_size, m_size, n_size, kc, partial + c * values);
      }
    });
    pool->ParallelFor(values, 2 * chunks, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        T sum = partial[i];
        for (int64_t c = 1; c < chunks; ++c) sum += partial[c * values + i];
        out[i] = sum;
      }
    });
  }
};

}  // namespace functor
}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_TRANSPOSED_MATMUL_KERNELS_H_
