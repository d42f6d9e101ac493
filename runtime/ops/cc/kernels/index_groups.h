/* Grouping of equal indices, shared by the sparse Adam update and the embedding gradient. */

#ifndef RETF_OPS_CC_KERNELS_INDEX_GROUPS_H_
#define RETF_OPS_CC_KERNELS_INDEX_GROUPS_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
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

  int64_t size() const { return static_cast<int64_t>(unique.size()); }
  int64_t count(int64_t u) const { return offsets[u + 1] - offsets[u]; }
};

namespace internal {

// An index and its position in one word, index in the high half: ordering the words orders
// by index, then by position, which is exactly the grouping order.
using Packed = uint64_t;
constexpr int kPositionBits = 32;
constexpr uint64_t kPositionMask = (uint64_t{1} << kPositionBits) - 1;

// Reused between calls on one thread: fresh multi-megabyte buffers on every step cost a page
// fault per 4 KiB.
struct Scratch {
  std::vector<Packed> keys;
  std::vector<Packed> swap;
  std::vector<int32_t> counts;
};

inline Scratch& ThreadScratch() {
  static thread_local Scratch scratch;
  return scratch;
}

inline int BitWidth(uint64_t x) {
  int bits = 0;
  while (x >> bits) ++bits;
  return bits;
}

// Below this many indices a comparison sort beats the radix passes' counts.
constexpr int64_t kMinRadixIndices = 512;
constexpr int kMaxDigitBits = 11;

// The digits of a radix sort over key_bits bits: at most 11 bits each, so one pass's counts
// (8 KiB) stay in L1; two passes cover up to 2^22 rows.
struct Digits {
  int passes;
  int bits;
  int64_t radix() const { return int64_t{1} << bits; }
  uint64_t mask() const { return static_cast<uint64_t>(radix() - 1); }
};

inline Digits MakeDigits(int key_bits) {
  const int passes = (key_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  return Digits{passes, (key_bits + passes - 1) / passes};
}

// Sorts keys[0 .. n) by the index bits above kPositionBits, stably, so positions stay
// ascending within an index: least significant digit first, one scatter pass per digit.
// count[p * radix + d] holds how many keys have digit d in pass p. Uses swap as the other
// buffer; the result ends in keys.
inline void RadixSortByIndex(std::vector<Packed>* keys, std::vector<Packed>* swap, int64_t n, const Digits& digits,
                             int32_t* count) {
  const int64_t radix = digits.radix();
  const uint64_t mask = digits.mask();
  swap->resize(n);
  Packed* src = keys->data();
  Packed* dst = swap->data();
  for (int p = 0; p < digits.passes; ++p) {
    int32_t* start = count + p * radix;
    int32_t sum = 0;
    for (int64_t d = 0; d < radix; ++d) {
      const int32_t c = start[d];
      start[d] = sum;
      sum += c;
    }
    const int shift = kPositionBits + p * digits.bits;
    for (int64_t i = 0; i < n; ++i) dst[start[(src[i] >> shift) & mask]++] = src[i];
    std::swap(src, dst);
  }
  if (src != keys->data()) keys->swap(*swap);
}

// Groups by sorting whole (index, position) pairs; for index ranges too wide to pack.
template <typename Tindex>
void GroupIndicesBySort(const Tindex* indices, int64_t n, IndexGroups<Tindex>* groups) {
  std::vector<std::pair<int64_t, int32_t>> pairs(n);
  for (int64_t i = 0; i < n; ++i) pairs[i] = {static_cast<int64_t>(indices[i]), static_cast<int32_t>(i)};
  std::sort(pairs.begin(), pairs.end());
  groups->positions.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    if (k == 0 || pairs[k].first != pairs[k - 1].first) {
      groups->unique.push_back(static_cast<Tindex>(pairs[k].first));
      groups->offsets.push_back(static_cast<int32_t>(k));
    }
    groups->positions[k] = pairs[k].second;
  }
  groups->offsets.push_back(static_cast<int32_t>(n));
}

}  // namespace internal

// Groups indices[0 .. n), all in [0, max_index], n <= kMaxGroupedIndices. Packs each index
// with its position into one word and sorts the words with a radix sort on the index bits (two
// passes up to 2^22 rows): a few sequential passes with no data-dependent branches, about 8 ns
// per index here against 27 for bucketing plus insertion sort. Serial: at 65,536 indices the
// whole grouping takes about half a millisecond, less than handing it to a busy pool costs.
// Strictly ascending indices skip the sort.
template <typename Tindex>
void GroupIndices(const Tindex* indices, int64_t n, int64_t max_index, IndexGroups<Tindex>* groups) {
  groups->unique.clear();
  groups->offsets.assign(1, 0);
  groups->positions.clear();
  if (n == 0) return;
  // Already strictly ascending (what the embedding gradient emits, so what the optimizer gets
  // in training): every index is its own group, found with one read.
  int64_t ascending = 1;
  while (ascending < n && indices[ascending - 1] < indices[ascending]) ++ascending;
  if (ascending == n) {
    groups->unique.assign(indices, indices + n);
    groups->offsets.resize(n + 1);
    groups->positions.resize(n);
    for (int64_t i = 0; i < n; ++i) groups->offsets[i] = groups->positions[i] = static_cast<int32_t>(i);
    groups->offsets[n] = static_cast<int32_t>(n);
    return;
  }

  const int key_bits = std::max(1, internal::BitWidth(static_cast<uint64_t>(max_index)));
  if (key_bits > 64 - internal::kPositionBits) {
    groups->offsets.clear();
    internal::GroupIndicesBySort(indices, n, groups);
    return;
  }

  internal::Scratch& s = internal::ThreadScratch();
  s.keys.resize(n);
  internal::Packed* keys = s.keys.data();
  auto pack = [&](int64_t i) {
    return (static_cast<uint64_t>(indices[i]) << internal::kPositionBits) | static_cast<uint64_t>(i);
  };
  if (n < internal::kMinRadixIndices) {
    for (int64_t i = 0; i < n; ++i) keys[i] = pack(i);
    std::sort(keys, keys + n);
  } else {
    // Packing and counting every pass's digits share one read of the indices.
    const internal::Digits digits = internal::MakeDigits(key_bits);
    const int64_t radix = digits.radix();
    const uint64_t mask = digits.mask();
    s.counts.assign(digits.passes * radix, 0);
    int32_t* count = s.counts.data();
    for (int64_t i = 0; i < n; ++i) {
      keys[i] = pack(i);
      const uint64_t index = static_cast<uint64_t>(indices[i]);
      for (int p = 0; p < digits.passes; ++p) ++count[p * radix + ((index >> (p * digits.bits)) & mask)];
    }
    internal::RadixSortByIndex(&s.keys, &s.swap, n, digits, count);
    keys = s.keys.data();
  }

  // At most n groups: size for that, fill in one pass, then trim (no reallocation).
  groups->unique.resize(n);
  groups->offsets.resize(n + 1);
  groups->positions.resize(n);
  Tindex* unique = groups->unique.data();
  int32_t* offsets = groups->offsets.data();
  int32_t* positions = groups->positions.data();
  int32_t u = 0;
  uint64_t previous = 0;
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t index = keys[k] >> internal::kPositionBits;
    if (k == 0 || index != previous) {
      unique[u] = static_cast<Tindex>(index);
      offsets[u++] = static_cast<int32_t>(k);
      previous = index;
    }
    positions[k] = static_cast<int32_t>(keys[k] & internal::kPositionMask);
  }
  offsets[u] = static_cast<int32_t>(n);
  groups->unique.resize(u);
  groups->offsets.resize(u + 1);
}

}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_INDEX_GROUPS_H_
