/* An EmbeddingVariable's rows (DeepRec's semantics): keys of any int64 value map to rows created on first
   admission from the initializer's default values, each row holding the value and every optimizer slot. */

#ifndef RETF_OPS_CC_KERNELS_EMBEDDING_VARIABLE_H_
#define RETF_OPS_CC_KERNELS_EMBEDDING_VARIABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/platform/mutex.h"

namespace retf {

// What an EmbeddingVariable does beside storing rows: DeepRec's EmbeddingVariableOption, as its ops carry it.
struct EVConfig {
  int64_t filter_freq = 0;          // CounterFilter / CBFFilter: a key is admitted at its filter_freq-th sighting
  int64_t steps_to_live = 0;        // GlobalStepEvict: at save, rows not updated for more steps are dropped (0: off)
  float l2_threshold = 0;           // L2WeightEvict: at save, rows whose value's L2 norm is below it are dropped
  float no_permission_value = 0;    // what a key not admitted yet reads
};

// A key's bookkeeping: its row (-1 until admitted), how often training looked it up, and the global step of
// its last update (-1: none yet).
struct EVEntry {
  int64_t row = -1;
  std::atomic<int64_t> freq{0};
  std::atomic<int64_t> version{-1};
};

// Raises the entry's version to step (the global step of an update).
void StampVersion(EVEntry* entry, int64_t step);

// A column of the rows: the value (column 0, `dim` floats) or an optimizer slot (`width` floats: `dim`, or 1
// for a number per key such as AdamAsync's beta powers).
struct EVColumn {
  std::string name;
  int64_t offset = 0;
  int64_t width = 0;
  std::vector<float> initial;  // a slot's start (width floats); the value starts from the default values
};

// One EmbeddingVariable and its slots. Column 0 of a row is the value, column k the k-th slot. Rows live in chunks that never move (except when a slot is added to a variable that
// holds rows), so a row pointer stays valid while the shared lock is held. Lookups and updates of rows
// that exist take the shared lock; creating, evicting, importing and adding slots take it exclusively.
class EVStorage {
 public:
  explicit EVStorage(int64_t dim) : dim_(dim), row_width_(dim) { columns_.push_back(EVColumn{"", 0, dim, {}}); }

  int64_t dim() const { return dim_; }
  const EVColumn& column(int k) const { return columns_[k]; }
  tensorflow::mutex* mu() { return &mu_; }

  // The initializer's rows ([rows, dim]) and the options; drops every row (an initializer run again starts over).
  void Configure(const float* defaults, int64_t default_rows, const EVConfig& config);
  bool configured() const { return default_rows_ > 0; }
  const EVConfig& config() const { return config_; }

  // The column of the slot called name, added (`width` floats, every row's set to initial) if new; -1 if a slot
  // of that name has another width.
  int RegisterSlot(const std::string& name, const float* initial, int64_t width);
  // Sets column `column` of every row to its initial value.
  void ResetColumn(int column);

  // Writes the value of each key ([n, dim]) to out: its row, created on admission, or the no-permission value
  // for a key not admitted; with count (training), each sighting counts towards admission.
  void Gather(const int64_t* keys, int64_t n, bool count, float* out);
  // Writes column `column` of each key's row ([n, width]); keys without a row read the column's initial value.
  void ReadColumn(int column, const int64_t* keys, int64_t n, float* out);

  // Key's bookkeeping, or nullptr for a key never seen (or evicted). Needs the shared lock.
  EVEntry* FindEntry(int64_t key);
  float* RowPointer(int64_t row) { return chunks_[row / kChunkRows].get() + (row % kChunkRows) * row_width_; }

  // Drops the keys GlobalStepEvict and L2WeightEvict name at global step `step` (a key never updated is stamped
  // with step and kept); the number dropped.
  int64_t Evict(int64_t step);

  // DeepRec's checkpoint layout: admitted keys with column `column`, freqs and versions, and the keys seen but
  // not admitted with theirs; each list ordered by bucket (key mod 1000), then key, with each bucket's start
  // in the offsets ([1001]).
  struct Export {
    std::vector<int64_t> keys, freqs, versions;
    std::vector<float> values;
    std::vector<int64_t> filtered_keys, filtered_freqs, filtered_versions;
    std::vector<int32_t> offsets, filtered_offsets;
  };
  Export Snapshot(int column);

  // Sets column `column` of key's row to value, admitting the key (from the default values) if needed;
  // with freq >= 0 also its freq and version (the value column's import). Needs the exclusive lock.
  void Import(int column, int64_t key, const float* value, int64_t freq, int64_t version);
  // Records a key seen but not admitted. Needs the exclusive lock.
  void ImportFiltered(int64_t key, int64_t freq, int64_t version);

 private:
  static constexpr int64_t kChunkRows = 1024;

  void Admit(int64_t key, EVEntry* entry);  // exclusive lock
  void Clear();

  const int64_t dim_;
  tensorflow::mutex mu_;
  EVConfig config_;
  std::vector<float> defaults_;
  int64_t default_rows_ = 0;
  std::vector<EVColumn> columns_;
  int64_t row_width_;  // the columns' widths summed
  std::vector<std::unique_ptr<float[]>> chunks_;
  int64_t next_row_ = 0;
  std::vector<int64_t> free_rows_;
  std::unordered_map<int64_t, EVEntry> table_;
};

// What a handle names: a variable's storage and the column it reads (0: the variable; k: its k-th slot).
class EVResource : public tensorflow::ResourceBase {
 public:
  EVResource(std::shared_ptr<EVStorage> storage, int column) : storage_(std::move(storage)), column_(column) {}
  std::string DebugString() const override;
  const std::shared_ptr<EVStorage>& storage() const { return storage_; }
  int column() const { return column_; }
  void Reset(std::shared_ptr<EVStorage> storage, int column) {
    storage_ = std::move(storage);
    column_ = column;
  }

 private:
  std::shared_ptr<EVStorage> storage_;
  int column_;
};

// key modulo n, never negative.
inline int64_t FloorMod(int64_t key, int64_t n) { return ((key % n) + n) % n; }

// DeepRec's checkpoint buckets: a key's bucket is key mod 1000; a partitioned variable's part is its bucket mod parts.
constexpr int64_t kBuckets = 1000;
inline int64_t PartitionOf(int64_t key, int64_t parts) { return FloorMod(key, kBuckets) % parts; }

}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_EMBEDDING_VARIABLE_H_
