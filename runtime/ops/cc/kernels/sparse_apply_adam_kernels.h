/* Lazy Adam on the touched rows of a variable: the functor behind Retf>SparseApplyAdam. */

#ifndef RETF_OPS_CC_KERNELS_SPARSE_APPLY_ADAM_KERNELS_H_
#define RETF_OPS_CC_KERNELS_SPARSE_APPLY_ADAM_KERNELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "group_rows.h"
#include "index_groups.h"
#include "tensorflow/core/framework/tensor_types.h"
#include "tensorflow/core/platform/threadpool.h"
#include "third_party/eigen3/Eigen/Core"

#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#endif

namespace retf {
namespace functor {

template <typename T>
struct AdamCoefficients {
  T lr;  // bias-corrected: lr * sqrt(1 - beta2_power) / (1 - beta1_power)
  T beta1;
  T beta2;
  T epsilon;
};

// Adam over n elements in a single pass: m = m * beta1 + g * (1 - beta1),
// v = v * beta2 + g^2 * (1 - beta2), var -= (m * lr) / (sqrt(v) + epsilon), each product, sum,
// quotient and square root rounded once, in that order (no fused multiply-add). Without a
// gradient (kHasGrad false) the moments only decay, m = m * beta1 and v = v * beta2, as
// TensorFlow's dense Adam leaves rows a sparse gradient does not name.
//
// The general form runs on Eigen's packets. Eigen's float packet square root is an approximation
// (rsqrt and one Newton step) while its scalar one is exact, and Eigen runs packets from the
// destination's first packet-aligned element on, so the packet range here is var's: an element's
// rounding depends on its address, never on how the rows were split.
template <typename T, bool kHasGrad>
struct ElementUpdate {
  static void Run(T* var, T* m, T* v, const T* g, int64_t n, const AdamCoefficients<T>& k, T one_minus_beta1,
                  T one_minus_beta2) {
    using Packet = typename Eigen::internal::packet_traits<T>::type;
    constexpr int64_t kSize = Eigen::internal::packet_traits<T>::size;
    constexpr int kAlignment = kSize * sizeof(T);  // SSE and AVX packets align to their size
    auto scalar = [&](int64_t j) {
      const T m_j = kHasGrad ? m[j] * k.beta1 + g[j] * one_minus_beta1 : m[j] * k.beta1;
      const T v_j = kHasGrad ? v[j] * k.beta2 + (g[j] * g[j]) * one_minus_beta2 : v[j] * k.beta2;
      m[j] = m_j;
      v[j] = v_j;
      var[j] -= (m_j * k.lr) / (Eigen::numext::sqrt(v_j) + k.epsilon);
    };
    const int64_t first = kSize > 1 ? Eigen::internal::first_aligned<kAlignment>(var, n) : n;
    const int64_t last = first + (n - first) / kSize * kSize;
    for (int64_t j = 0; j < first; ++j) scalar(j);
    namespace e = Eigen::internal;
    const Packet beta1 = e::pset1<Packet>(k.beta1), beta2 = e::pset1<Packet>(k.beta2);
    const Packet c1 = e::pset1<Packet>(one_minus_beta1), c2 = e::pset1<Packet>(one_minus_beta2);
    const Packet lr = e::pset1<Packet>(k.lr), epsilon = e::pset1<Packet>(k.epsilon);
    for (int64_t j = first; j < last; j += kSize) {
      Packet m_j = e::pmul(e::ploadu<Packet>(m + j), beta1);
      Packet v_j = e::pmul(e::ploadu<Packet>(v + j), beta2);
      if (kHasGrad) {
        const Packet g_j = e::ploadu<Packet>(g + j);
        m_j = e::padd(m_j, e::pmul(g_j, c1));
        v_j = e::padd(v_j, e::pmul(e::pmul(g_j, g_j), c2));
      }
      e::pstoreu(m + j, m_j);
      e::pstoreu(v + j, v_j);
      const Packet step = e::pdiv(e::pmul(m_j, lr), e::padd(e::psqrt(v_j), epsilon));
      e::pstore(var + j, e::psub(e::pload<Packet>(var + j), step));
    }
    for (int64_t j = last; j < n; ++j) scalar(j);
  }
};

#if defined(__x86_64__) && defined(__SSE2__)
// float on x86-64: the square root instruction in every lane, so packets and the scalar tail
// round alike (exactly), and 8-float AVX packets where the CPU has AVX (checked at run time; the
// library is built for the baseline). Half the arithmetic of 4-float packets, which matters: on
// rows already prefetched the arithmetic is about a third of the update's time. The two bodies
// stay apart: AVX intrinsics may only be called from a function built for AVX, so a template
// shared with the baseline body cannot hold them.
namespace x86 {

inline void ScalarStep(float* var, float* m, float* v, const float* g, int64_t j, bool has_grad,
                        const AdamCoefficients<float>& k, float one_minus_beta1, float one_minus_beta2) {
  const float m_j = has_grad ? m[j] * k.beta1 + g[j] * one_minus_beta1 : m[j] * k.beta1;
  const float v_j = has_grad ? v[j] * k.beta2 + (g[j] * g[j]) * one_minus_beta2 : v[j] * k.beta2;
  m[j] = m_j;
  v[j] = v_j;
  var[j] -= (m_j * k.lr) / (std::sqrt(v_j) + k.epsilon);
}

template <bool kHasGrad>
__attribute__((target("avx"))) void UpdateFloatsAvx(float* var, float* m, float* v, const float* g, int64_t n,
                                                    const AdamCoefficients<float>& k, float one_minus_beta1,
                                                    float one_minus_beta2) {
  const __m256 beta1 = _mm256_set1_ps(k.beta1), beta2 = _mm256_set1_ps(k.beta2);
  const __m256 c1 = _mm256_set1_ps(one_minus_beta1), c2 = _mm256_set1_ps(one_minus_beta2);
  const __m256 lr = _mm256_set1_ps(k.lr), epsilon = _mm256_set1_ps(k.epsilon);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 m_j = _mm256_mul_ps(_mm256_loadu_ps(m + j), beta1);
    __m256 v_j = _mm256_mul_ps(_mm256_loadu_ps(v + j), beta2);
    if (kHasGrad) {
      const __m256 g_j = _mm256_loadu_ps(g + j);
      m_j = _mm256_add_ps(m_j, _mm256_mul_ps(g_j, c1));
      v_j = _mm256_add_ps(v_j, _mm256_mul_ps(_mm256_mul_ps(g_j, g_j), c2));
    }
    _mm256_storeu_ps(m + j, m_j);
    _mm256_storeu_ps(v + j, v_j);
    const __m256 step = _mm256_div_ps(_mm256_mul_ps(m_j, lr), _mm256_add_ps(_mm256_sqrt_ps(v_j), epsilon));
    _mm256_storeu_ps(var + j, _mm256_sub_ps(_mm256_loadu_ps(var + j), step));
  }
  for (; j < n; ++j) ScalarStep(var, m, v, g, j, kHasGrad, k, one_minus_beta1, one_minus_beta2);
}

template <bool kHasGrad>
void UpdateFloatsSse(float* var, float* m, float* v, const float* g, int64_t n, const AdamCoefficients<float>& k,
                     float one_minus_beta1, float one_minus_beta2) {
  const __m128 beta1 = _mm_set1_ps(k.beta1), beta2 = _mm_set1_ps(k.beta2);
  const __m128 c1 = _mm_set1_ps(one_minus_beta1), c2 = _mm_set1_ps(one_minus_beta2);
  const __m128 lr = _mm_set1_ps(k.lr), epsilon = _mm_set1_ps(k.epsilon);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m128 m_j = _mm_mul_ps(_mm_loadu_ps(m + j), beta1);
    __m128 v_j = _mm_mul_ps(_mm_loadu_ps(v + j), beta2);
    if (kHasGrad) {
      const __m128 g_j = _mm_loadu_ps(g + j);
      m_j = _mm_add_ps(m_j, _mm_mul_ps(g_j, c1));
      v_j = _mm_add_ps(v_j, _mm_mul_ps(_mm_mul_ps(g_j, g_j), c2));
    }
    _mm_storeu_ps(m + j, m_j);
    _mm_storeu_ps(v + j, v_j);
    const __m128 step = _mm_div_ps(_mm_mul_ps(m_j, lr), _mm_add_ps(_mm_sqrt_ps(v_j), epsilon));
    _mm_storeu_ps(var + j, _mm_sub_ps(_mm_loadu_ps(var + j), step));
  }
  for (; j < n; ++j) ScalarStep(var, m, v, g, j, kHasGrad, k, one_minus_beta1, one_minus_beta2);
}

inline bool CpuHasAvx() {
  static const bool has_avx = __builtin_cpu_supports("avx");
  return has_avx;
}

}  // namespace x86

template <bool kHasGrad>
struct ElementUpdate<float, kHasGrad> {
  static void Run(float* var, float* m, float* v, const float* g, int64_t n, const AdamCoefficients<float>& k,
                  float one_minus_beta1, float one_minus_beta2) {
    if (x86::CpuHasAvx()) {
      x86::UpdateFloatsAvx<kHasGrad>(var, m, v, g, n, k, one_minus_beta1, one_minus_beta2);
    } else {
      x86::UpdateFloatsSse<kHasGrad>(var, m, v, g, n, k, one_minus_beta1, one_minus_beta2);
    }
  }
};
#endif

template <typename T, bool kHasGrad>
inline void UpdateElements(T* var, T* m, T* v, const T* g, int64_t n, const AdamCoefficients<T>& k,
                           T one_minus_beta1, T one_minus_beta2) {
  ElementUpdate<T, kHasGrad>::Run(var, m, v, g, n, k, one_minus_beta1, one_minus_beta2);
}

template <typename T>
inline void UpdateRow(T* var, T* m, T* v, const T* g, int64_t n, const AdamCoefficients<T>& k,
                      T one_minus_beta1, T one_minus_beta2) {
  UpdateElements<T, true>(var, m, v, g, n, k, one_minus_beta1, one_minus_beta2);
}

// Updates var, m and v (row-major, rows of row_size elements) at the rows in groups, each row
// once with its summed gradient (ForEachGroupRow: split over the pool, ascending rows or the
// gradient's order; the sums do not depend on the split).
template <typename T, typename Tindex>
struct SparseApplyAdam {
  void operator()(tensorflow::thread::ThreadPool* pool, T* var, T* m, T* v,
                  const T* grad, int64_t row_size, const IndexGroups<Tindex>& groups,
                  const AdamCoefficients<T>& k) const {
    const T one_minus_beta1 = T(1) - k.beta1;
    const T one_minus_beta2 = T(1) - k.beta2;
    T* const tables[] = {var, m, v};
    ForEachGroupRow(pool, tables, 3, grad, row_size, groups, [&](int64_t row, const T* g) {
      const int64_t offset = row * row_size;
      UpdateRow(var + offset, m + offset, v + offset, g, row_size, k, one_minus_beta1, one_minus_beta2);
    });
  }
};


// TensorFlow's dense Adam for a sparse gradient (tf.compat.v1.train.AdamOptimizer's sparse
// path) in one pass over var, m and v: every row's moments decay, the rows in groups add their
// summed gradient, and every row of var moves. TensorFlow computes the same thing with a
// table-sized temporary per elementwise op and about a dozen passes over the table.
//
// Rows are split over the pool in chunks whose first element is packet-aligned, so where packet
// and scalar square roots differ (ElementUpdate's Eigen form) an element takes one or the other
// by its address alone: results do not depend on the number of threads. A var that is not
// aligned to a packet (never so for TensorFlow's own buffers) is updated by one thread.
template <typename T, typename Tindex>
struct SparseApplyAdamDense {
  void operator()(tensorflow::thread::ThreadPool* pool, T* var, T* m, T* v, const T* grad, int64_t num_rows,
                  int64_t row_size, const IndexGroups<Tindex>& groups, const AdamCoefficients<T>& k) const {
    if (num_rows == 0 || row_size == 0) return;
    constexpr int64_t kAlignment = Eigen::internal::packet_traits<T>::size * sizeof(T);
    const int64_t row_bytes = row_size * static_cast<int64_t>(sizeof(T));
    // The fewest rows whose bytes are a whole number of packets.
    int64_t chunk_rows = 1;
    while ((chunk_rows * row_bytes) % kAlignment != 0) ++chunk_rows;
    const bool aligned = reinterpret_cast<uintptr_t>(var) % kAlignment == 0;
    const int64_t num_chunks = aligned ? (num_rows + chunk_rows - 1) / chunk_rows : 1;
    if (!aligned) chunk_rows = num_rows;

    const Tindex* unique = groups.unique.data();
    const int64_t num_groups = groups.size();
    const T one_minus_beta1 = T(1) - k.beta1;
    const T one_minus_beta2 = T(1) - k.beta2;
    auto update = [&](int64_t chunk_begin, int64_t chunk_end) {
      static thread_local std::vector<T> sum;
      sum.resize(row_size);
      const int64_t end = std::min(num_rows, chunk_end * chunk_rows);
      int64_t row = chunk_begin * chunk_rows;
      int64_t u = std::lower_bound(unique, unique + num_groups, static_cast<Tindex>(row)) - unique;
      while (row < end) {
        const int64_t touched = u < num_groups ? std::min<int64_t>(unique[u], end) : end;
        if (touched > row) {  // untouched rows: one contiguous run of elements
          const int64_t offset = row * row_size;
          UpdateElements<T, false>(var + offset, m + offset, v + offset, nullptr, (touched - row) * row_size, k,
                                   one_minus_beta1, one_minus_beta2);
        }
        if (touched == end) break;
        const int64_t offset = touched * row_size;
        const T* g = GroupGradient(grad, row_size, groups, u, sum.data());
        UpdateRow(var + offset, m + offset, v + offset, g, row_size, k, one_minus_beta1, one_minus_beta2);
        row = touched + 1;
        ++u;
      }
    };
    // Per chunk: var, m and v read and written.
    pool->ParallelFor(num_chunks, 6 * chunk_rows * row_bytes, update);
  }
};

// The untouched rows of SparseApplyAdamDense alone: the moments of every row not in unique
// (ascending) decay and its var moves, each run of untouched rows as SparseApplyAdamDense runs it,
// so the two agree bit for bit. On the calling thread: the pass is bound by memory bandwidth (a
// second thread gains little here), and it is made to run beside the step's arithmetic.
template <typename T, typename Tindex>
struct AdamDecayUntouched {
  void operator()(T* var, T* m, T* v, int64_t num_rows, int64_t row_size, const Tindex* unique, int64_t num_unique,
                  const AdamCoefficients<T>& k) const {
    const T one_minus_beta1 = T(1) - k.beta1;
    const T one_minus_beta2 = T(1) - k.beta2;
    int64_t row = 0;
    for (int64_t u = 0; u <= num_unique; ++u) {
      const int64_t touched = u < num_unique ? static_cast<int64_t>(unique[u]) : num_rows;
      if (touched > row) {
        const int64_t offset = row * row_size;
        UpdateElements<T, false>(var + offset, m + offset, v + offset, nullptr, (touched - row) * row_size, k,
                                 one_minus_beta1, one_minus_beta2);
      }
      row = touched + 1;
    }
  }
};

}  // namespace functor
}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_SPARSE_APPLY_ADAM_KERNELS_H_
