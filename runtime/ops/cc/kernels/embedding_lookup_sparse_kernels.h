/* Fused sparse embedding combine and its gradient: the functors behind
   Retf>EmbeddingLookupSparse and Retf>EmbeddingLookupSparseGrad. */

#ifndef RETF_OPS_CC_KERNELS_EMBEDDING_LOOKUP_SPARSE_KERNELS_H_
#define RETF_OPS_CC_KERNELS_EMBEDDING_LOOKUP_SPARSE_KERNELS_H_

#include <cmath>
#include <vector>

#include "column_blocks.h"
#include "index_groups.h"
#include "tensorflow/core/platform/threadpool.h"

namespace retf {

enum class Combiner { kSum, kMean, kSqrtN };

// segment_starts[s] .. segment_starts[s + 1] are the entries of segment s (ids sorted by
// segment); scale[s] is what the combiner multiplies that segment's weighted sum by.
template <typename T>
struct Segments {
  std::vector<int64_t> starts;
  std::vector<T> scale;
  int64_t size() const { return static_cast<int64_t>(starts.size()) - 1; }
};

// The first j whose segment id is negative or smaller than its predecessor's, or -1.
template <typename Tseg>
int64_t FirstUnsortedSegment(const Tseg* segment_ids, int64_t nnz) {
  for (int64_t j = 0; j < nnz; ++j) {
    if (segment_ids[j] < 0 || (j > 0 && segment_ids[j] < segment_ids[j - 1])) return j;
  }
  return -1;
}

// Fills segments for num_segments = max(segment_ids) + 1 (the last id, when they are sorted) in
// one pass that also checks the ids are ascending and non-negative. Returns -1, or
// FirstUnsortedSegment when they are not (segments is then incomplete).
// Matches tf.compat.v1.nn.embedding_lookup_sparse: weighted mean/sqrtn divide with div_no_nan
// (zero total -> zero row), unweighted ones by the entry count (empty segment -> zero row).
template <typename T, typename Tseg>
int64_t MakeSegments(const Tseg* segment_ids, const T* weights, int64_t nnz, int64_t num_segments,
                     Combiner combiner, Segments<T>* segments) {
  std::vector<int64_t>& starts = segments->starts;
  starts.resize(num_segments + 1);
  // Ascending ids from a non-negative first one that never pass the last are all in
  // [0, num_segments): one comparison each catches a negative, a descent or a wrong count.
  int64_t next = 0;
  int64_t previous = 0;
  for (int64_t j = 0; j < nnz; ++j) {
    const int64_t s = static_cast<int64_t>(segment_ids[j]);
    if (static_cast<uint64_t>(s) - static_cast<uint64_t>(previous) >=
        static_cast<uint64_t>(num_segments) - static_cast<uint64_t>(previous)) {
      return FirstUnsortedSegment(segment_ids, nnz);
    }
    while (next <= s) starts[next++] = j;
    previous = s;
  }
  while (next <= num_segments) starts[next++] = nnz;
  segments->scale.assign(num_segments, T(1));
  if (combiner == Combiner::kSum) return -1;
  T* scale = segments->scale.data();
  if (weights == nullptr) {
    // The total of unit weights is the entry count, exact in T.
    for (int64_t s = 0; s < num_segments; ++s) {
      const T count = static_cast<T>(starts[s + 1] - starts[s]);
      const T total = combiner == Combiner::kSqrtN ? std::sqrt(count) : count;
      scale[s] = total == T(0) ? T(0) : T(1) / total;
    }
    return -1;
  }
  for (int64_t s = 0; s < num_segments; ++s) {
    T total = T(0);
    if (combiner == Combiner::kMean) {
      for (int64_t j = starts[s]; j < starts[s + 1]; ++j) total += weights[j];
    } else {
      for (int64_t j = starts[s]; j < starts[s + 1]; ++j) total += weights[j] * weights[j];
      total = std::sqrt(total);
    }
    scale[s] = total == T(0) ? T(0) : T(1) / total;
  }
  return -1;
}

// The entries of a safe lookup that it keeps, in row order (stable within a row): ids, rows and
// weights (empty when unweighted) point at the input's own arrays when every entry is kept and the
// rows ascend, at the buffers otherwise.
template <typename T, typename Tidx, typename Tseg>
struct KeptEntries {
  const Tidx* ids = nullptr;
  const Tseg* rows = nullptr;
  const T* weights = nullptr;
  int64_t size = 0;
  std::vector<Tidx> id_buffer;
  std::vector<Tseg> row_buffer;
  std::vector<T> weight_buffer;
  std::vector<int64_t> cursor;
};

// Keeps entry j unless ids[j] < 0 or, with prune_weights, weights[j] <= 0 (weights null: unweighted),
// grouped by row with a counting pass when the rows do not already ascend. Returns -1, or the first
// j whose row is not in [0, num_rows).
template <typename T, typename Tidx, typename Tseg>
int64_t KeepEntries(const Tidx* ids, const Tseg* rows, const T* weights, int64_t nnz, int64_t num_rows,
                    bool prune_weights, KeptEntries<T, Tidx, Tseg>* kept) {
  const bool prune = prune_weights && weights != nullptr;
  auto keeps = [&](int64_t j) { return ids[j] >= 0 && (!prune || weights[j] > T(0)); };
  bool in_place = true;
  for (int64_t j = 0; j < nnz; ++j) {
    const int64_t r = static_cast<int64_t>(rows[j]);
    if (r < 0 || r >= num_rows) return j;
    if (!keeps(j) || (j > 0 && r < static_cast<int64_t>(rows[j - 1]))) in_place = false;
  }
  if (in_place) {
    kept->ids = ids;
    kept->rows = rows;
    kept->weights = weights;
    kept->size = nnz;
    return -1;
  }
  std::vector<int64_t>& cursor = kept->cursor;
  cursor.assign(num_rows + 1, 0);
  for (int64_t j = 0; j < nnz; ++j) {
    if (keeps(j)) ++cursor[static_cast<int64_t>(rows[j]) + 1];
  }
  for (int64_t r = 0; r < num_rows; ++r) cursor[r + 1] += cursor[r];
  const int64_t size = cursor[num_rows];
  kept->id_buffer.resize(size);
  kept->row_buffer.resize(size);
  kept->weight_buffer.resize(weights == nullptr ? 0 : size);
  for (int64_t j = 0; j < nnz; ++j) {
    if (!keeps(j)) continue;
    const int64_t k = cursor[static_cast<int64_t>(rows[j])]++;
    kept->id_buffer[k] = ids[j];
    kept->row_buffer[k] = rows[j];
    if (weights != nullptr) kept->weight_buffer[k] = weights[j];
  }
  kept->ids = kept->id_buffer.data();
  kept->rows = kept->row_buffer.data();
  kept->weights = weights == nullptr ? nullptr : kept->weight_buffer.data();
  kept->size = size;
  return -1;
}

namespace functor {

// output[s] = scale[s] * sum_j weights[j] * params[ids[j]] over the entries of segment s.
template <typename T, typename Tidx>
struct EmbeddingLookupSparse {
  void operator()(tensorflow::thread::ThreadPool* pool, const T* params, int64_t dim,
                  const Tidx* ids, const T* weights, const Segments<T>& segments, T* output) const {
    auto combine = [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        const int64_t first = segments.starts[s];
        const int64_t last = segments.starts[s + 1];
        const T scale = segments.scale[s];
        T* out = output + s * dim;
        ForEachColumnBlock<T>(dim, [&](int64_t c, auto width) {
          constexpr int W = decltype(width)::value;
          T sum[W];
          for (int k = 0; k < W; ++k) sum[k] = T(0);
          if (weights == nullptr) {
            for (int64_t j = first; j < last; ++j) {
              const T* row = params + static_cast<int64_t>(ids[j]) * dim + c;
              for (int k = 0; k < W; ++k) sum[k] += row[k];
            }
          } else {
            for (int64_t j = first; j < last; ++j) {
              const T* row = params + static_cast<int64_t>(ids[j]) * dim + c;
              const T w = weights[j];
              for (int k = 0; k < W; ++k) sum[k] += w * row[k];
            }
          }
          if (scale != T(1)) {
            for (int k = 0; k < W; ++k) sum[k] *= scale;
          }
          for (int k = 0; k < W; ++k) out[c + k] = sum[k];
        });
      }
    };
    const int64_t num_segments = segments.size();
    if (num_segments == 0) return;
    const int64_t per_segment = segments.starts[num_segments] / num_segments + 1;
    pool->ParallelFor(num_segments, dim * (2 * per_segment + 1) + 8, combine);
  }
};

// values[u] = sum over the entries j of id unique[u] of
//   weights[j] * scale[segment_ids[j]] * grad[segment_ids[j]].
template <typename T, typename Tidx, typename Tseg>
struct EmbeddingLookupSparseGrad {
  void operator()(tensorflow::thread::ThreadPool* pool, const T* grad, int64_t dim,
                  const Tseg* segment_ids, const T* weights, const Segments<T>& segments,
                  const IndexGroups<Tidx>& groups, T* values) const {
    const int64_t num_groups = groups.size();
    if (num_groups == 0) return;
    const int32_t* offsets = groups.offsets.data();
    const int32_t* positions = groups.positions.data();
    const T* scale = segments.scale.data();
    // Each entry's segment row and coefficient in grouped order, gathered first in a loop of
    // independent loads: the accumulation then streams them instead of waiting on the chain
    // position -> segment id -> scale for every entry.
    const int64_t n = offsets[num_groups];
    // Kept per calling thread so the buffers are reused from step to step.
    static thread_local std::vector<const T*> row_buffer;
    static thread_local std::vector<T> coefficient_buffer;
    if (static_cast<int64_t>(row_buffer.size()) < n) {
      row_buffer.resize(n);
      coefficient_buffer.resize(n);
    }
    const T** rows = row_buffer.data();
    T* coefficients = coefficient_buffer.data();
    auto accumulate = [&](int64_t begin, int64_t end) {
      for (int32_t k = offsets[begin]; k < offsets[end]; ++k) {
        const int64_t j = positions[k];
        const int64_t s = static_cast<int64_t>(segment_ids[j]);
        rows[k] = grad + s * dim;
        coefficients[k] = weights == nullptr ? scale[s] : weights[j] * scale[s];
      }
      // Not blocked like the forward: most groups hold one or two entries, too few for sums
      // kept in registers to pay for a pass per block (it ran 1.1-1.6x slower).
      for (int64_t u = begin; u < end; ++u) {
        T* out = values + u * dim;
        const int32_t first = offsets[u];
        const int32_t last = offsets[u + 1];
        {
          const T c = coefficients[first];
          const T* g = rows[first];
          for (int64_t d = 0; d < dim; ++d) out[d] = T(0) + c * g[d];
        }
        for (int32_t k = first + 1; k < last; ++k) {
          const T c = coefficients[k];
          const T* g = rows[k];
          for (int64_t d = 0; d < dim; ++d) out[d] += c * g[d];
        }
      }
    };
    const int64_t per_group = n / num_groups + 1;
    pool->ParallelFor(num_groups, dim * (2 * per_group + 1) + 8, accumulate);
  }
};

}  // namespace functor
}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_EMBEDDING_LOOKUP_SPARSE_KERNELS_H_
