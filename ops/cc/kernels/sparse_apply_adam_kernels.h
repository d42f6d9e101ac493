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

// Touched rows are scattered over tables far larger than the caches, so each row costs a TLB
// and cache miss; asking for the rows a few groups ahead overlaps those misses.
// Four groups ahead is ~64 cache lines in flight for 64-float rows, past what a core tracks.
constexpr int64_t kPrefetchDistance = 4;
constexpr int64_t kCacheLine = 64;

inline void PrefetchRow(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t offset = 0; offset < bytes; offset += kCacheLine) __builtin_prefetch(p + offset, 1, 3);
}

// Sums the gradient rows of each group into summed[u] (U x row_size), reading grad in position
// order: sequential reads and writes into a buffer that stays in cache, where gathering each
// group's rows would jump around grad. Each of `parts` workers owns a range of groups and
// adds in position order, so the sums do not depend on the split.
template <typename T, typename Tindex>
void SumDuplicates(tensorflow::thread::ThreadPool* pool, const T* grad, int64_t row_size,
                   const IndexGroups<Tindex>& groups, T* summed) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const int64_t num_groups = groups.size();
  const int64_t n = static_cast<int64_t>(groups.group_of.size());
  const int64_t parts = std::max(1, std::min<int>(pool->NumThreads(), static_cast<int>(num_groups)));
  auto sum_part = [&](int64_t first_part, int64_t end_part) {
    for (int64_t part = first_part; part < end_part; ++part) {
      const int32_t begin = static_cast<int32_t>(num_groups * part / parts);
      const int32_t end = static_cast<int32_t>(num_groups * (part + 1) / parts);
      std::fill(summed + begin * row_size, summed + end * row_size, T(0));
      for (int64_t i = 0; i < n; ++i) {
        const int32_t u = groups.group_of[i];
        if (u < begin || u >= end) continue;
        Row(summed + u * row_size, row_size) += ConstRow(grad + i * row_size, row_size);
      }
    }
  };
  pool->ParallelFor(parts, n * row_size * 4, sum_part);
}

// Updates var, m and v (row-major, rows of row_size elements) at the rows in groups.
// grad holds one row per position of the original index vector; rows named more than once
// are summed first. Groups are split over the pool, one thread per group.
template <typename T, typename Tindex>
struct SparseApplyAdam {
  void operator()(tensorflow::thread::ThreadPool* pool, T* var, T* m, T* v,
                  const T* grad, int64_t row_size, const IndexGroups<Tindex>& groups,
                  const AdamCoefficients<T>& k) const {
    using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
    using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
    const int64_t num_groups = groups.size();
    if (num_groups == 0 || row_size == 0) return;
    // With duplicates, group u's gradient is summed[u]; without, the row at its one position.
    const bool has_duplicates = static_cast<int64_t>(groups.positions.size()) > num_groups;
    static thread_local std::vector<T> summed;
    if (has_duplicates) {
      summed.resize(num_groups * row_size);
      SumDuplicates(pool, grad, row_size, groups, summed.data());
    }
    const T* group_grad = has_duplicates ? summed.data() : grad;
    const int32_t* grad_row = has_duplicates ? nullptr : groups.positions.data();

    const T one_minus_beta1 = T(1) - k.beta1;
    const T one_minus_beta2 = T(1) - k.beta2;
    auto update = [&](int64_t begin, int64_t end) {
      auto prefetch = [&](int64_t u) {
        const int64_t offset = static_cast<int64_t>(groups.unique[u]) * row_size;
        const int64_t bytes = row_size * static_cast<int64_t>(sizeof(T));
        PrefetchRow(var + offset, bytes);
        PrefetchRow(m + offset, bytes);
        PrefetchRow(v + offset, bytes);
        PrefetchRow(group_grad + (grad_row ? grad_row[u] : u) * row_size, bytes);
      };
      for (int64_t u = begin; u < std::min(end, begin + kPrefetchDistance); ++u) prefetch(u);
      for (int64_t u = begin; u < end; ++u) {
        if (u + kPrefetchDistance < end) prefetch(u + kPrefetchDistance);
        const int64_t offset = static_cast<int64_t>(groups.unique[u]) * row_size;
        ConstRow g_row(group_grad + (grad_row ? grad_row[u] : u) * row_size, row_size);
        Row m_row(m + offset, row_size);
        Row v_row(v + offset, row_size);
        Row var_row(var + offset, row_size);
        m_row = m_row * k.beta1 + g_row * one_minus_beta1;
        v_row = v_row * k.beta2 + g_row.square() * one_minus_beta2;
        var_row -= (m_row * k.lr) / (v_row.sqrt() + k.epsilon);
      }
    };
    // Bytes moved per group dominate: var, m and v rows read and written, one gradient row read.
    pool->ParallelFor(num_groups, row_size * 16, update);
  }
};

}  // namespace functor
}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_SPARSE_APPLY_ADAM_KERNELS_H_
