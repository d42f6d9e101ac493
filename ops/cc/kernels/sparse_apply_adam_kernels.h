/* Lazy Adam on the touched rows of a variable: the functor behind Retf>SparseApplyAdam. */

#ifndef RETF_OPS_CC_KERNELS_SPARSE_APPLY_ADAM_KERNELS_H_
#define RETF_OPS_CC_KERNELS_SPARSE_APPLY_ADAM_KERNELS_H_

#include <algorithm>
#include <vector>

#include "index_groups.h"
#include "tensorflow/core/framework/tensor_types.h"
#include "tensorflow/core/platform/threadpool.h"
#include "third_party/eigen3/Eigen/Core"

namespace retf {
namespace functor {

template <typename T>
struct AdamCoefficients {
  T lr;  // bias-corrected: lr * sqrt(1 - beta2_power) / (1 - beta1_power)
  T beta1;
  T beta2;
  T epsilon;
};

// Updates var, m and v (row-major, rows of row_size elements) at the rows in groups.
// grad holds one row per position of the original index vector; each group's rows are summed
// in position order before the update. Groups are split over the pool, one thread per group.
// Touched rows are scattered over tables far larger than the caches, so each row costs a TLB
// and cache miss; asking for the rows a few groups ahead overlaps those misses.
// Four groups ahead is ~64 cache lines in flight for 64-float rows, past what a core tracks.
constexpr int64_t kPrefetchDistance = 4;
constexpr int64_t kCacheLine = 64;

inline void PrefetchRow(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t offset = 0; offset < bytes; offset += kCacheLine) __builtin_prefetch(p + offset, 1, 3);
}

template <typename T, typename Tindex>
void PrefetchGroup(const T* var, const T* m, const T* v, const T* grad, int64_t row_size,
                   const IndexGroups<Tindex>& groups, int64_t u) {
  const int64_t offset = static_cast<int64_t>(groups.unique[u]) * row_size;
  const int64_t bytes = row_size * static_cast<int64_t>(sizeof(T));
  PrefetchRow(var + offset, bytes);
  PrefetchRow(m + offset, bytes);
  PrefetchRow(v + offset, bytes);
  PrefetchRow(grad + groups.positions[groups.offsets[u]] * row_size, bytes);
}

template <typename T, typename Tindex>
struct SparseApplyAdam {
  void operator()(tensorflow::thread::ThreadPool* pool, T* var, T* m, T* v,
                  const T* grad, int64_t row_size, const IndexGroups<Tindex>& groups,
                  const AdamCoefficients<T>& k) const {
    using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
    using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
    const T one_minus_beta1 = T(1) - k.beta1;
    const T one_minus_beta2 = T(1) - k.beta2;
    auto update = [&](int64_t begin, int64_t end) {
      std::vector<T> summed;
      for (int64_t u = begin; u < std::min(end, begin + kPrefetchDistance); ++u) {
        PrefetchGroup(var, m, v, grad, row_size, groups, u);
      }
      for (int64_t u = begin; u < end; ++u) {
        if (u + kPrefetchDistance < end) PrefetchGroup(var, m, v, grad, row_size, groups, u + kPrefetchDistance);
        const int32_t* position = groups.positions.data() + groups.offsets[u];
        const int64_t count = groups.count(u);
        const T* g = grad + position[0] * row_size;
        if (count > 1) {
          summed.assign(g, g + row_size);
          Row sum(summed.data(), row_size);
          for (int64_t i = 1; i < count; ++i) sum += ConstRow(grad + position[i] * row_size, row_size);
          g = summed.data();
        }
        const int64_t offset = static_cast<int64_t>(groups.unique[u]) * row_size;
        ConstRow g_row(g, row_size);
        Row m_row(m + offset, row_size);
        Row v_row(v + offset, row_size);
        Row var_row(var + offset, row_size);
        m_row = m_row * k.beta1 + g_row * one_minus_beta1;
        v_row = v_row * k.beta2 + g_row.square() * one_minus_beta2;
        var_row -= (m_row * k.lr) / (v_row.sqrt() + k.epsilon);
      }
    };
    const int64_t num_groups = groups.size();
    if (num_groups == 0 || row_size == 0) return;
    // Bytes moved per group dominate: 3 rows read and written plus the gradient rows.
    const int64_t positions_per_group = (groups.positions.size() + num_groups - 1) / num_groups;
    const int64_t cost = row_size * (8 + 2 * positions_per_group);
    pool->ParallelFor(num_groups, cost, update);
  }
};

}  // namespace functor
}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_SPARSE_APPLY_ADAM_KERNELS_H_
