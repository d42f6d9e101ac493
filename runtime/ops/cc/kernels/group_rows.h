/* The row walk shared by the fused sparse optimizers: group, sum duplicates, update each row once. */

#ifndef RETF_OPS_CC_KERNELS_GROUP_ROWS_H_
#define RETF_OPS_CC_KERNELS_GROUP_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "column_blocks.h"
#include "index_groups.h"
#include "tensorflow/core/platform/threadpool.h"

namespace retf {
namespace functor {

// Touched rows are scattered over tables far larger than the caches, so each row costs a TLB
// and cache miss; asking for the rows a few groups ahead overlaps those misses. The distance
// is counted in bytes, so wide rows and groups with many duplicates do not flood the core's
// few outstanding-miss slots with requests it would have to stall on.
constexpr int64_t kPrefetchBytes = 4096;
constexpr int64_t kCacheLine = 64;

// A prefetch has no effect a compiler must keep: GCC marks a function whose only statements are
// prefetches as one without effects and deletes the calls to it, unless the function is inlined
// before that happens. The prefetch helpers, and the lambdas calling them, are therefore always
// inlined (tests/test_real_tensorflow.py looks for the prefetches in the built library).
#if defined(__GNUC__) || defined(__clang__)
#define RETF_ALWAYS_INLINE __attribute__((always_inline))
#else
#define RETF_ALWAYS_INLINE
#endif

RETF_ALWAYS_INLINE inline void PrefetchRowForWrite(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t offset = 0; offset < bytes; offset += kCacheLine) __builtin_prefetch(p + offset, 1, 3);
}

RETF_ALWAYS_INLINE inline void PrefetchRowForRead(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t offset = 0; offset < bytes; offset += kCacheLine) __builtin_prefetch(p + offset, 0, 3);
}

// Sums the gradient rows of group u, from zero and in position order (what
// unsorted_segment_sum computes), into sum; returns the row to use: grad's own when the group
// has one position.
template <typename T, typename Tindex>
inline const T* GroupGradient(const T* grad, int64_t row_size, const IndexGroups<Tindex>& groups, int64_t u,
                              T* sum) {
  const int32_t* positions = groups.positions.data();
  const int32_t begin = groups.offsets[u], end = groups.offsets[u + 1];
  const T* g = grad + positions[begin] * row_size;
  if (end - begin == 1) return g;
  ForEachColumnBlock<T>(row_size, [&](int64_t c, auto width) {
    constexpr int W = decltype(width)::value;
    T block[W];
    for (int k = 0; k < W; ++k) block[k] = T(0) + g[c + k];
    for (int32_t i = begin + 1; i < end; ++i) {
      const T* g_i = grad + positions[i] * row_size + c;
      for (int k = 0; k < W; ++k) block[k] += g_i[k];
    }
    for (int k = 0; k < W; ++k) sum[c + k] = block[k];
  });
  return sum;
}

// Rows further apart than this, on average, share no page with their neighbours: walking them in
// ascending order buys no locality in the tables.
constexpr int64_t kPageBytes = 4096;

// Calls update(row, g) once for every distinct row in groups, with g the row's gradient: grad's
// own row when the index appears once, else the sum of its gradient rows in position order
// (from zero, what unsorted_segment_sum computes before TensorFlow's sparse apply ops run).
// Work is split over the pool, each row updated by one thread; tables[0 .. num_tables) are the
// row-major tables update touches at row (var and its slots), prefetched a few rows ahead with
// the gradient rows. The result does not depend on the split.
//
// The walk takes the rows in ascending order, so a table is read in address order, except where
// that buys nothing and costs a random read of every gradient row: when no index repeats and the
// rows lie more than a page apart on average, it takes them in the gradient's own order, reading
// the gradient sequentially. Without repeats every row has one update whatever the order, so the
// result is the same.
template <typename T, typename Tindex, typename Update>
void ForEachGroupRow(tensorflow::thread::ThreadPool* pool, T* const* tables, int num_tables, const T* grad,
                     int64_t row_size, const IndexGroups<Tindex>& groups, Update&& update) {
  const int64_t num_groups = groups.size();
  if (num_groups == 0 || row_size == 0) return;
  const int64_t num_positions = static_cast<int64_t>(groups.positions.size());
  const bool has_duplicates = num_positions > num_groups;
  const Tindex* unique = groups.unique.data();
  const int32_t* offsets = groups.offsets.data();
  const int32_t* positions = groups.positions.data();
  const int64_t row_bytes = row_size * static_cast<int64_t>(sizeof(T));
  const int64_t group_bytes = row_bytes * (num_tables + num_positions / num_groups);
  const int64_t distance = std::max<int64_t>(1, kPrefetchBytes / group_bytes);
  // Bytes moved per group: the tables' rows read and written, the gradient rows read.
  const int64_t cost = (group_bytes + num_tables * row_bytes) / static_cast<int64_t>(sizeof(T)) * 4;

  const int64_t span = static_cast<int64_t>(unique[num_groups - 1]) - static_cast<int64_t>(unique[0]) + 1;
  if (!has_duplicates && span / num_groups * row_bytes > kPageBytes) {
    static thread_local std::vector<Tindex> rows_by_position;
    rows_by_position.resize(num_positions);
    for (int64_t u = 0; u < num_groups; ++u) rows_by_position[positions[u]] = unique[u];
    const Tindex* rows = rows_by_position.data();
    auto work = [&](int64_t begin, int64_t end) {
      auto prefetch = [&](int64_t p) RETF_ALWAYS_INLINE {
        const int64_t offset = static_cast<int64_t>(rows[p]) * row_size;
        for (int t = 0; t < num_tables; ++t) PrefetchRowForWrite(tables[t] + offset, row_bytes);
      };
      for (int64_t p = begin; p < std::min(end, begin + distance); ++p) prefetch(p);
      for (int64_t p = begin; p < end; ++p) {
        if (p + distance < end) prefetch(p + distance);
        update(static_cast<int64_t>(rows[p]), grad + p * row_size);
      }
    };
    pool->ParallelFor(num_positions, cost, work);
    return;
  }

  auto work = [&](int64_t begin, int64_t end) {
    static thread_local std::vector<T> sum;
    if (has_duplicates) sum.resize(row_size);
    auto prefetch = [&](int64_t u) RETF_ALWAYS_INLINE {
      const int64_t offset = static_cast<int64_t>(unique[u]) * row_size;
      for (int t = 0; t < num_tables; ++t) PrefetchRowForWrite(tables[t] + offset, row_bytes);
      for (int32_t i = offsets[u]; i < offsets[u + 1]; ++i) {
        PrefetchRowForRead(grad + positions[i] * row_size, row_bytes);
      }
    };
    for (int64_t u = begin; u < std::min(end, begin + distance); ++u) prefetch(u);
    for (int64_t u = begin; u < end; ++u) {
      if (u + distance < end) prefetch(u + distance);
      update(static_cast<int64_t>(unique[u]), GroupGradient(grad, row_size, groups, u, sum.data()));
    }
  };
  pool->ParallelFor(num_groups, cost, work);
}

}  // namespace functor
}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_GROUP_ROWS_H_
