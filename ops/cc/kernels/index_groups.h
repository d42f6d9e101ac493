/* Grouping of equal indices, shared by the sparse Adam update and the embedding gradient. */

#ifndef RETF_OPS_CC_KERNELS_INDEX_GROUPS_H_
#define RETF_OPS_CC_KERNELS_INDEX_GROUPS_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace retf {

// Index vectors longer than this are refused: positions are stored as int32 to halve the
// memory the grouping moves.
constexpr int64_t kMaxGroupedIndices = std::numeric_limits<int32_t>::max();

// The positions of an index vector grouped by value.
//
// unique holds the distinct values in ascending order, and positions[offsets[u] ..
// offsets[u + 1]) are the positions that hold unique[u], ascending. The result depends only on
// the values, never on the number of threads, so a kernel that gives each group to one thread
// never lets two threads write one row and sums each row's duplicates in the same order however
// the work is split. Ascending rows also keep an update's walk through a large table in
// address order, which on 4 KiB pages is worth several times the arithmetic.
template <typename Tindex>
struct IndexGroups {
  std::vector<Tindex> unique;
  std::vector<int32_t> offsets;
  std::vector<int32_t> positions;
  std::vector<int32_t> group_of;  // the group of each position: positions' inverse

  int64_t size() const { return static_cast<int64_t>(unique.size()); }
  int64_t count(int64_t u) const { return offsets[u + 1] - offsets[u]; }
};

namespace internal {

struct Entry {
  int64_t key;
  int32_t position;
  bool operator<(const Entry& other) const {
    return key < other.key || (key == other.key && position < other.position);
  }
};

// Reused between calls on one thread: fresh multi-megabyte buffers on every step cost a page
// fault per 4 KiB, which dominated the grouping time.
struct Scratch {
  std::vector<Entry> entries;
  std::vector<int32_t> bucket_start;
  std::vector<int32_t> group_base;
};

inline Scratch& ThreadScratch() {
  static thread_local Scratch scratch;
  return scratch;
}

// log2 of the key range of one bucket: about 16 indices per bucket when keys are spread
// evenly over [0, key_bound). A function of n and key_bound only.
inline int BucketShift(int64_t n, int64_t key_bound) {
  int shift = 0;
  while ((key_bound >> shift) > 1 && (key_bound >> shift) * 16 > n) ++shift;
  return shift;
}

inline void SortBucket(Entry* begin, Entry* end) {
  if (end - begin <= 32) {  // the common size: insertion sort beats std::sort's set-up
    for (Entry* i = begin + 1; i < end; ++i) {
      const Entry e = *i;
      Entry* j = i;
      for (; j > begin && e < *(j - 1); --j) *j = *(j - 1);
      *j = e;
    }
  } else {
    std::sort(begin, end);
  }
}

inline int32_t CountKeys(const Entry* begin, const Entry* end) {
  int32_t count = 0;
  for (const Entry* e = begin; e < end; ++e) count += (e == begin || e->key != (e - 1)->key);
  return count;
}

}  // namespace internal

// Groups indices[0 .. n), all in [0, key_bound), n <= kMaxGroupedIndices: a bucket pass by key
// range, then a sort of each small bucket, buckets spread over
// parallel_for(count, cost_per_unit, fn(begin, end)).
template <typename Tindex, typename ParallelFor>
void GroupIndices(const Tindex* indices, int64_t n, int64_t key_bound, IndexGroups<Tindex>* groups,
                  const ParallelFor& parallel_for) {
  groups->unique.clear();
  groups->offsets.assign(1, 0);
  groups->positions.clear();
  groups->group_of.clear();
  if (n == 0) return;

  internal::Scratch& s = internal::ThreadScratch();
  const int shift = internal::BucketShift(n, key_bound);
  const int64_t num_buckets = ((key_bound - 1) >> shift) + 1;
  s.bucket_start.assign(num_buckets + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++s.bucket_start[(static_cast<int64_t>(indices[i]) >> shift) + 1];
  for (int64_t b = 0; b < num_buckets; ++b) s.bucket_start[b + 1] += s.bucket_start[b];
  s.entries.resize(n);
  {
    std::vector<int32_t> cursor(s.bucket_start.begin(), s.bucket_start.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t key = static_cast<int64_t>(indices[i]);
      s.entries[cursor[key >> shift]++] = internal::Entry{key, static_cast<int32_t>(i)};
    }
  }

  internal::Entry* entries = s.entries.data();
  const int32_t* start = s.bucket_start.data();
  s.group_base.assign(num_buckets + 1, 0);
  int32_t* group_base = s.group_base.data();
  const int64_t cost = 8 * (n / num_buckets + 1) * 8;
  parallel_for(num_buckets, cost, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      // With shift 0 a bucket holds one key, its positions already ascending.
      if (shift > 0) internal::SortBucket(entries + start[b], entries + start[b + 1]);
      group_base[b + 1] = internal::CountKeys(entries + start[b], entries + start[b + 1]);
    }
  });
  for (int64_t b = 0; b < num_buckets; ++b) group_base[b + 1] += group_base[b];

  const int32_t num_groups = group_base[num_buckets];
  groups->unique.resize(num_groups);
  groups->offsets.resize(num_groups + 1);
  groups->offsets[num_groups] = static_cast<int32_t>(n);
  groups->positions.resize(n);
  groups->group_of.resize(n);
  Tindex* unique = groups->unique.data();
  int32_t* offsets = groups->offsets.data();
  int32_t* positions = groups->positions.data();
  int32_t* group_of = groups->group_of.data();
  parallel_for(num_buckets, cost / 2, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      int32_t u = group_base[b];
      for (int32_t k = start[b]; k < start[b + 1]; ++k) {
        if (k == start[b] || entries[k].key != entries[k - 1].key) {
          unique[u] = static_cast<Tindex>(entries[k].key);
          offsets[u++] = k;
        }
        positions[k] = entries[k].position;
        group_of[entries[k].position] = u - 1;
      }
    }
  });
}

// Serial grouping, for callers without a thread pool.
template <typename Tindex>
void GroupIndices(const Tindex* indices, int64_t n, int64_t key_bound, IndexGroups<Tindex>* groups) {
  GroupIndices(indices, n, key_bound, groups, [](int64_t count, int64_t, const auto& fn) { fn(0, count); });
}

}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_INDEX_GROUPS_H_
