/* OpKernels of the EmbeddingVariable: its storage, lookups, fused sparse updates, eviction, export and import. */

#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "embedding_variable.h"
#include "sparse_apply_adam_kernels.h"
#include "sparse_apply_rows.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/util/tensor_bundle/tensor_bundle.h"

namespace retf {

using tensorflow::mutex_lock;
using tensorflow::tf_shared_lock;

// DeepRec's L2WeightEvict measures a row as TensorFlow's l2_loss does: half the sum of squares.
static float L2Weight(const float* value, int64_t dim) {
  float sum = 0;
  for (int64_t j = 0; j < dim; ++j) sum += value[j] * value[j];
  return sum * 0.5f;
}

void StampVersion(EVEntry* entry, int64_t step) {
  int64_t seen = entry->version.load(std::memory_order_relaxed);
  while (step > seen && !entry->version.compare_exchange_weak(seen, step, std::memory_order_relaxed)) {
  }
}

void EVStorage::Clear() {
  chunks_.clear();
  next_row_ = 0;
  free_rows_.clear();
  table_.clear();
}

void EVStorage::Configure(const float* defaults, int64_t default_rows, const EVConfig& config) {
  mutex_lock lock(mu_);
  defaults_.assign(defaults, defaults + default_rows * dim_);
  default_rows_ = default_rows;
  config_ = config;
  Clear();
}

int EVStorage::RegisterSlot(const std::string& name, const float* initial, int64_t width) {
  mutex_lock lock(mu_);
  for (size_t k = 1; k < columns_.size(); ++k) {
    if (columns_[k].name == name) return columns_[k].width == width ? static_cast<int>(k) : -1;
  }
  columns_.push_back(EVColumn{name, row_width_, width, std::vector<float>(initial, initial + width)});
  const int64_t old_width = row_width_;
  row_width_ += width;
  if (!chunks_.empty()) {  // widen every row: the old columns copied, the new one at its initial value
    std::vector<std::unique_ptr<float[]>> wider;
    for (auto& chunk : chunks_) {
      std::unique_ptr<float[]> grown(new float[kChunkRows * row_width_]);
      for (int64_t r = 0; r < kChunkRows; ++r) {
        std::memcpy(grown.get() + r * row_width_, chunk.get() + r * old_width, old_width * sizeof(float));
        std::memcpy(grown.get() + r * row_width_ + old_width, initial, width * sizeof(float));
      }
      wider.push_back(std::move(grown));
    }
    chunks_ = std::move(wider);
  }
  return static_cast<int>(columns_.size() - 1);
}

void EVStorage::ResetColumn(int column) {
  mutex_lock lock(mu_);
  const EVColumn& c = columns_[column];
  for (auto& item : table_) {
    if (item.second.row >= 0) {
      std::memcpy(RowPointer(item.second.row) + c.offset, c.initial.data(), c.width * sizeof(float));
    }
  }
}

EVEntry* EVStorage::FindEntry(int64_t key) {
  auto found = table_.find(key);
  return found == table_.end() ? nullptr : &found->second;
}

void EVStorage::Admit(int64_t key, EVEntry* entry) {
  int64_t row;
  if (!free_rows_.empty()) {
    row = free_rows_.back();
    free_rows_.pop_back();
  } else {
    row = next_row_++;
    if (row / kChunkRows >= static_cast<int64_t>(chunks_.size())) {
      chunks_.emplace_back(new float[kChunkRows * row_width_]);
    }
  }
  float* target = RowPointer(row);
  if (default_rows_ > 0) {
    std::memcpy(target, defaults_.data() + FloorMod(key, default_rows_) * dim_, dim_ * sizeof(float));
  } else {  // a slot restored before its variable: the variable's import sets the value
    std::fill(target, target + dim_, 0.0f);
  }
  for (size_t k = 1; k < columns_.size(); ++k) {
    std::memcpy(target + columns_[k].offset, columns_[k].initial.data(), columns_[k].width * sizeof(float));
  }
  entry->row = row;
}

void EVStorage::Gather(const int64_t* keys, int64_t n, bool count, float* out) {
  const size_t bytes = dim_ * sizeof(float);
  std::vector<int64_t> pending;
  {
    tf_shared_lock lock(mu_);
    for (int64_t i = 0; i < n; ++i) {
      EVEntry* entry = FindEntry(keys[i]);
      if (entry == nullptr || entry->row < 0) {
        pending.push_back(i);
        continue;
      }
      std::memcpy(out + i * dim_, RowPointer(entry->row), bytes);
      if (count) entry->freq.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (pending.empty()) return;
  mutex_lock lock(mu_);
  for (int64_t i : pending) {
    float* target = out + i * dim_;
    if (!count) {  // a lookup that does not train reads what a new key would start from, and keeps nothing
      EVEntry* entry = FindEntry(keys[i]);
      if (entry != nullptr && entry->row >= 0) {
        std::memcpy(target, RowPointer(entry->row), bytes);
      } else if (config_.filter_freq <= 1) {
        std::memcpy(target, defaults_.data() + FloorMod(keys[i], default_rows_) * dim_, bytes);
      } else {
        std::fill(target, target + dim_, config_.no_permission_value);
      }
      continue;
    }
    EVEntry& entry = table_[keys[i]];
    entry.freq.fetch_add(1, std::memory_order_relaxed);
    if (entry.row < 0 && entry.freq.load(std::memory_order_relaxed) >= config_.filter_freq) Admit(keys[i], &entry);
    if (entry.row >= 0) {
      std::memcpy(target, RowPointer(entry.row), bytes);
    } else {
      std::fill(target, target + dim_, config_.no_permission_value);
    }
  }
}

void EVStorage::ReadColumn(int column, const int64_t* keys, int64_t n, float* out) {
  tf_shared_lock lock(mu_);
  const EVColumn& c = columns_[column];
  for (int64_t i = 0; i < n; ++i) {
    EVEntry* entry = FindEntry(keys[i]);
    float* target = out + i * c.width;
    if (entry != nullptr && entry->row >= 0) {
      std::memcpy(target, RowPointer(entry->row) + c.offset, c.width * sizeof(float));
    } else if (column > 0) {
      std::memcpy(target, c.initial.data(), c.width * sizeof(float));
    } else {
      std::fill(target, target + c.width, config_.no_permission_value);
    }
  }
}

int64_t EVStorage::Evict(int64_t step) {
  mutex_lock lock(mu_);
  int64_t dropped = 0;
  for (auto item = table_.begin(); item != table_.end();) {
    EVEntry& entry = item->second;
    bool drop = false;
    if (config_.steps_to_live > 0) {
      if (entry.version.load() == -1) {
        entry.version.store(step);
      } else {
        drop = step - entry.version.load() > config_.steps_to_live;
      }
    }
    if (!drop && config_.l2_threshold > 0 && entry.row >= 0) {
      drop = L2Weight(RowPointer(entry.row), dim_) < config_.l2_threshold;
    }
    if (!drop) {
      ++item;
      continue;
    }
    if (entry.row >= 0) free_rows_.push_back(entry.row);
    item = table_.erase(item);
    ++dropped;
  }
  return dropped;
}

// Keys ordered by (bucket, key), and the offsets where each bucket starts.
static std::vector<int32_t> BucketOrder(std::vector<std::pair<int64_t, const EVEntry*>>* keys) {
  std::sort(keys->begin(), keys->end(), [](const std::pair<int64_t, const EVEntry*>& a,
                                           const std::pair<int64_t, const EVEntry*>& b) {
    const int64_t bucket_a = FloorMod(a.first, kBuckets), bucket_b = FloorMod(b.first, kBuckets);
    return bucket_a != bucket_b ? bucket_a < bucket_b : a.first < b.first;
  });
  std::vector<int32_t> offsets(kBuckets + 1, 0);
  for (const auto& item : *keys) ++offsets[FloorMod(item.first, kBuckets) + 1];
  for (int64_t b = 0; b < kBuckets; ++b) offsets[b + 1] += offsets[b];
  return offsets;
}

EVStorage::Export EVStorage::Snapshot(int column) {
  tf_shared_lock lock(mu_);
  const EVColumn& c = columns_[column];
  std::vector<std::pair<int64_t, const EVEntry*>> admitted, filtered;
  for (const auto& item : table_) {
    if (item.second.row >= 0) {
      admitted.emplace_back(item.first, &item.second);
    } else if (column == 0) {
      filtered.emplace_back(item.first, &item.second);
    }
  }
  Export out;
  out.offsets = BucketOrder(&admitted);
  out.filtered_offsets = BucketOrder(&filtered);
  out.values.resize(admitted.size() * c.width);
  for (size_t i = 0; i < admitted.size(); ++i) {
    out.keys.push_back(admitted[i].first);
    out.freqs.push_back(admitted[i].second->freq.load());
    out.versions.push_back(admitted[i].second->version.load());
    std::memcpy(out.values.data() + i * c.width, RowPointer(admitted[i].second->row) + c.offset,
                c.width * sizeof(float));
  }
  for (const auto& item : filtered) {
    out.filtered_keys.push_back(item.first);
    out.filtered_freqs.push_back(item.second->freq.load());
    out.filtered_versions.push_back(item.second->version.load());
  }
  return out;
}

void EVStorage::Import(int column, int64_t key, const float* value, int64_t freq, int64_t version) {
  EVEntry& entry = table_[key];
  if (entry.row < 0) Admit(key, &entry);
  const EVColumn& c = columns_[column];
  std::memcpy(RowPointer(entry.row) + c.offset, value, c.width * sizeof(float));
  if (freq >= 0) {
    entry.freq.store(std::max(freq, config_.filter_freq));
    entry.version.store(version);
  }
}

void EVStorage::ImportFiltered(int64_t key, int64_t freq, int64_t version) {
  EVEntry& entry = table_[key];
  if (entry.row >= 0) return;
  entry.freq.store(freq);
  entry.version.store(version);
}

std::string EVResource::DebugString() const {
  return "EmbeddingVariable of " + std::to_string(storage_->dim()) + " floats a row, column " +
         std::to_string(column_);
}

}  // namespace retf

namespace tensorflow {
namespace {

using retf::EVResource;
using retf::EVStorage;

// A default Status is OK in every TF 2.x: Status::OK() is gone from TF 2.13, where Status is absl::Status.

Status NotInitialized(const ResourceHandle& handle) {
  return errors::FailedPrecondition("EmbeddingVariable ", handle.name(),
                                    " is not initialized: run its initializer (tf.global_variables_initializer()) "
                                    "or restore it from a checkpoint first");
}

Status GetEV(OpKernelContext* ctx, int input, core::RefCountPtr<EVResource>* resource) {
  const ResourceHandle& handle = HandleFromInput(ctx, input);
  if (!LookupResource(ctx, handle, resource).ok()) return NotInitialized(handle);
  if ((*resource)->column() == 0 && !(*resource)->storage()->configured()) return NotInitialized(handle);
  return Status();
}

// The variable's resource at handle input `input`, created (unconfigured, `dim` floats a row) if new.
Status GetOrCreateEV(OpKernelContext* ctx, int input, int64 dim, core::RefCountPtr<EVResource>* resource) {
  TF_RETURN_IF_ERROR(LookupOrCreateResource<EVResource>(ctx, HandleFromInput(ctx, input), resource,
                                                        [dim](EVResource** created) {
                                                          *created = new EVResource(
                                                              std::make_shared<EVStorage>(dim), 0);
                                                          return Status();
                                                        }));
  if ((*resource)->storage()->dim() != dim) {
    return errors::InvalidArgument("EmbeddingVariable ", HandleFromInput(ctx, input).name(), " has rows of ",
                                   (*resource)->storage()->dim(), " values, not ", dim);
  }
  return Status();
}

// The slot resource at `input` pointing at column `column` of storage.
Status SetSlot(OpKernelContext* ctx, int input, const std::shared_ptr<EVStorage>& storage, int column) {
  core::RefCountPtr<EVResource> slot;
  TF_RETURN_IF_ERROR(LookupOrCreateResource<EVResource>(ctx, HandleFromInput(ctx, input), &slot,
                                                        [&](EVResource** created) {
                                                          *created = new EVResource(storage, column);
                                                          return Status();
                                                        }));
  slot->Reset(storage, column);
  return Status();
}

// Registers the slot at handle input 0 (initial: its first row, any width) as a column of storage.
Status RegisterSlot(OpKernelContext* ctx, const std::shared_ptr<EVStorage>& storage, const Tensor& initial) {
  const std::string& name = HandleFromInput(ctx, 0).name();
  const int column = storage->RegisterSlot(name, initial.flat<float>().data(), initial.NumElements());
  if (column < 0) {
    return errors::InvalidArgument("slot ", name, " was set up with another width than ", initial.NumElements());
  }
  storage->ResetColumn(column);
  return SetSlot(ctx, 0, storage, column);
}

Status ConfigFromAttrs(OpKernelConstruction* ctx, retf::EVConfig* config) {
  int64 filter_freq = 0, steps_to_live = 0;
  TF_RETURN_IF_ERROR(ctx->GetAttr("filter_freq", &filter_freq));
  TF_RETURN_IF_ERROR(ctx->GetAttr("steps_to_live", &steps_to_live));
  TF_RETURN_IF_ERROR(ctx->GetAttr("l2_threshold", &config->l2_threshold));
  TF_RETURN_IF_ERROR(ctx->GetAttr("no_permission_value", &config->no_permission_value));
  config->filter_freq = filter_freq;
  config->steps_to_live = steps_to_live;
  return Status();
}

class EVInitializeOp : public OpKernel {
 public:
  explicit EVInitializeOp(OpKernelConstruction* ctx) : OpKernel(ctx) { OP_REQUIRES_OK(ctx, ConfigFromAttrs(ctx, &config_)); }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& defaults = ctx->input(1);
    OP_REQUIRES(ctx, defaults.dims() == 2 && defaults.dim_size(0) > 0,
                errors::InvalidArgument("default values must be [rows, dim] with rows > 0, got ",
                                        defaults.shape().DebugString()));
    core::RefCountPtr<EVResource> resource;
    OP_REQUIRES_OK(ctx, GetOrCreateEV(ctx, 0, defaults.dim_size(1), &resource));
    resource->storage()->Configure(defaults.flat<float>().data(), defaults.dim_size(0), config_);
  }

 private:
  retf::EVConfig config_;
};

class EVSlotInitializeOp : public OpKernel {
 public:
  explicit EVSlotInitializeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dim", &dim_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& initial = ctx->input(2);
    OP_REQUIRES(ctx, initial.dims() == 1 && initial.NumElements() > 0,
                errors::InvalidArgument("a slot's initial row must be 1-D, got ", initial.shape().DebugString()));
    core::RefCountPtr<EVResource> primary;
    OP_REQUIRES_OK(ctx, GetOrCreateEV(ctx, 1, dim_, &primary));
    OP_REQUIRES_OK(ctx, RegisterSlot(ctx, primary->storage(), initial));
  }

 private:
  int64 dim_ = 0;
};

class EVIsInitializedOp : public OpKernel {
 public:
  explicit EVIsInitializedOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    core::RefCountPtr<EVResource> resource;
    out->scalar<bool>()() = GetEV(ctx, 0, &resource).ok();
  }
};

// values = the rows of keys (any shape; values is keys' shape + [width]).
class EVGatherOp : public OpKernel {
 public:
  explicit EVGatherOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("count", &count_));
  }

  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<EVResource> resource;
    OP_REQUIRES_OK(ctx, GetEV(ctx, 0, &resource));
    const Tensor& keys = ctx->input(1);
    EVStorage* storage = resource->storage().get();
    TensorShape shape = keys.shape();
    shape.AddDim(storage->column(resource->column()).width);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, shape, &out));
    const int64_t* key_data = reinterpret_cast<const int64_t*>(keys.flat<int64>().data());
    if (resource->column() > 0) {
      storage->ReadColumn(resource->column(), key_data, keys.NumElements(), out->flat<float>().data());
    } else {
      storage->Gather(key_data, keys.NumElements(), count_, out->flat<float>().data());
    }
  }

 private:
  bool count_ = true;
};

// What every update checks and prepares: the variable (input 0) and its slots (1 .. num_tables) name columns
// of one storage; grad is [N, dim] with keys [N] and the global step after them; duplicate keys' gradients are
// summed in position order.
struct EVUpdate {
  std::shared_ptr<EVStorage> storage;
  std::vector<int64_t> offsets;  // of the variable and each slot in a row
  std::vector<int64_t> keys;     // unique, in order of first appearance
  std::vector<float> grads;      // [keys, dim], summed
  int64_t step = 0;
};

Status PrepareEVUpdate(OpKernelContext* ctx, std::initializer_list<int64_t> widths, int grad_input,
                       EVUpdate* update) {
  int i = 0;
  for (int64_t width : widths) {
    core::RefCountPtr<EVResource> resource;
    TF_RETURN_IF_ERROR(GetEV(ctx, i, &resource));
    if (i == 0) {
      if (resource->column() != 0) {
        return errors::InvalidArgument(HandleFromInput(ctx, 0).name(), " is a slot, not an EmbeddingVariable");
      }
      update->storage = resource->storage();
    } else if (resource->storage() != update->storage) {
      return errors::InvalidArgument(HandleFromInput(ctx, i).name(), " is not a slot of ",
                                     HandleFromInput(ctx, 0).name());
    }
    const retf::EVColumn& column = update->storage->column(resource->column());
    const int64_t expected = width > 0 ? width : update->storage->dim();
    if (column.width != expected) {
      return errors::InvalidArgument(HandleFromInput(ctx, i).name(), " holds ", column.width, " values a key, not ",
                                     expected);
    }
    update->offsets.push_back(column.offset);
    ++i;
  }
  const int64 dim = update->storage->dim();
  const Tensor& grad = ctx->input(grad_input);
  const Tensor& keys = ctx->input(grad_input + 1);
  const Tensor& step = ctx->input(grad_input + 2);
  if (!TensorShapeUtils::IsVector(keys.shape()) || grad.dims() != 2 || grad.dim_size(0) != keys.dim_size(0) ||
      grad.dim_size(1) != dim) {
    return errors::InvalidArgument("grad must be [N, ", dim, "] with keys [N], got grad ", grad.shape().DebugString(),
                                   " and keys ", keys.shape().DebugString());
  }
  if (!TensorShapeUtils::IsScalar(step.shape())) {
    return errors::InvalidArgument("the global step must be a scalar, got ", step.shape().DebugString());
  }
  update->step = step.scalar<int64>()();
  const int64_t* key_data = reinterpret_cast<const int64_t*>(keys.flat<int64>().data());
  const float* grad_data = grad.flat<float>().data();
  std::unordered_map<int64_t, int64_t> position;
  position.reserve(keys.dim_size(0));
  for (int64 n = 0; n < keys.dim_size(0); ++n) {
    auto inserted = position.emplace(key_data[n], static_cast<int64_t>(update->keys.size()));
    const float* g = grad_data + n * dim;
    if (inserted.second) {
      update->keys.push_back(key_data[n]);
      update->grads.insert(update->grads.end(), g, g + dim);
    } else {
      float* sum = update->grads.data() + inserted.first->second * dim;
      for (int64 j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
  return Status();
}

float ScalarInput(OpKernelContext* ctx, int input) { return ctx->input(input).scalar<float>()(); }

// Stamps each updated key with the global step and runs rule(row, g, dim) on the rows of the admitted ones,
// under the storage's shared lock; keys without a row (not admitted by a filter, evicted, never looked up)
// are not updated.
template <typename Rule>
void ForEachUpdatedRow(EVUpdate* update, Rule rule) {
  EVStorage* storage = update->storage.get();
  const int64_t dim = storage->dim();
  tf_shared_lock lock(*storage->mu());
  for (size_t u = 0; u < update->keys.size(); ++u) {
    retf::EVEntry* entry = storage->FindEntry(update->keys[u]);
    if (entry == nullptr) continue;
    retf::StampVersion(entry, update->step);
    if (entry->row >= 0) rule(storage->RowPointer(entry->row), update->grads.data() + u * dim, dim);
  }
}

class EVApplyGradientDescentOp : public OpKernel {
 public:
  explicit EVApplyGradientDescentOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    EVUpdate update;
    OP_REQUIRES_OK(ctx, PrepareEVUpdate(ctx, {0}, 2, &update));
    const float lr = ScalarInput(ctx, 1);
    ForEachUpdatedRow(&update, [&](float* row, const float* g, int64_t dim) {
      for (int64_t j = 0; j < dim; ++j) row[j] -= g[j] * lr;
    });
  }
};

class EVApplyAdagradOp : public OpKernel {
 public:
  explicit EVApplyAdagradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    EVUpdate update;
    OP_REQUIRES_OK(ctx, PrepareEVUpdate(ctx, {0, 0}, 3, &update));
    const retf::functor::AdagradRow<float, false> adagrad{ScalarInput(ctx, 2), 0.0f, true};
    const int64_t accum = update.offsets[1];
    ForEachUpdatedRow(&update, [&](float* row, const float* g, int64_t dim) { adagrad(row, row + accum, g, dim); });
  }
};

// DeepRec's AdagradDecay on the named rows: the key's decay count (a slot of one value) is behind
// (global_step + 1) / decay_step, so accum = max(accum * decay_rate, baseline) and the count goes up by one; then
// Adagrad's accum += g * g and var -= (lr * g) * rsqrt(accum).
class EVApplyAdagradDecayOp : public OpKernel {
 public:
  explicit EVApplyAdagradDecayOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    EVUpdate update;
    OP_REQUIRES_OK(ctx, PrepareEVUpdate(ctx, {0, 0, 1}, 7, &update));
    const retf::functor::AdagradDecayRow<float> rule{ScalarInput(ctx, 3), ScalarInput(ctx, 5), ScalarInput(ctx, 6)};
    const int64 decay_step = ctx->input(4).scalar<int64>()();
    OP_REQUIRES(ctx, decay_step > 0, errors::InvalidArgument("decay_step must be positive, got ", decay_step));
    const float period = static_cast<float>((update.step + 1) / decay_step);
    const int64_t accum = update.offsets[1], count = update.offsets[2];
    ForEachUpdatedRow(&update, [&](float* row, const float* g, int64_t dim) {
      const bool decay = period > row[count];
      if (decay) row[count] += 1.0f;
      rule(row, row + accum, g, dim, decay);
    });
  }
};

// Lazy Adam on the named rows (DeepRec's Adam on an EmbeddingVariable), with
// lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power) rounded left to right.
class EVApplyAdamOp : public OpKernel {
 public:
  explicit EVApplyAdamOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    EVUpdate update;
    OP_REQUIRES_OK(ctx, PrepareEVUpdate(ctx, {0, 0, 0}, 9, &update));
    const float beta1_power = ScalarInput(ctx, 3), beta2_power = ScalarInput(ctx, 4);
    retf::functor::AdamCoefficients<float> k;
    k.lr = ScalarInput(ctx, 5) * std::sqrt(1.0f - beta2_power) / (1.0f - beta1_power);
    k.beta1 = ScalarInput(ctx, 6);
    k.beta2 = ScalarInput(ctx, 7);
    k.epsilon = ScalarInput(ctx, 8);
    const float one_minus_beta1 = 1.0f - k.beta1, one_minus_beta2 = 1.0f - k.beta2;
    const int64_t m = update.offsets[1], v = update.offsets[2];
    ForEachUpdatedRow(&update, [&](float* row, const float* g, int64_t dim) {
      retf::functor::UpdateRow<float>(row, row + m, row + v, g, dim, k, one_minus_beta1, one_minus_beta2);
    });
  }
};

// DeepRec's AdamAsync on an EmbeddingVariable: Adam with beta1_power and beta2_power per key (slots of one
// value), each advanced by beta1 and beta2 after the key's update.
class EVApplyAdamAsyncOp : public OpKernel {
 public:
  explicit EVApplyAdamAsyncOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    EVUpdate update;
    OP_REQUIRES_OK(ctx, PrepareEVUpdate(ctx, {0, 0, 0, 1, 1}, 9, &update));
    const float lr = ScalarInput(ctx, 5), beta1 = ScalarInput(ctx, 6), beta2 = ScalarInput(ctx, 7);
    const float epsilon = ScalarInput(ctx, 8);
    const float one_minus_beta1 = 1.0f - beta1, one_minus_beta2 = 1.0f - beta2;
    const int64_t m = update.offsets[1], v = update.offsets[2];
    const int64_t beta1_power = update.offsets[3], beta2_power = update.offsets[4];
    ForEachUpdatedRow(&update, [&](float* row, const float* g, int64_t dim) {
      retf::functor::AdamCoefficients<float> k;
      k.lr = lr * std::sqrt(1.0f - row[beta2_power]) / (1.0f - row[beta1_power]);
      k.beta1 = beta1;
      k.beta2 = beta2;
      k.epsilon = epsilon;
      retf::functor::UpdateRow<float>(row, row + m, row + v, g, dim, k, one_minus_beta1, one_minus_beta2);
      row[beta1_power] *= beta1;
      row[beta2_power] *= beta2;
    });
  }
};

class EVApplyFtrlOp : public OpKernel {
 public:
  explicit EVApplyFtrlOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    EVUpdate update;
    OP_REQUIRES_OK(ctx, PrepareEVUpdate(ctx, {0, 0, 0}, 8, &update));
    const float lr = ScalarInput(ctx, 3), l1 = ScalarInput(ctx, 4), l2 = ScalarInput(ctx, 5);
    const float shrinkage = ScalarInput(ctx, 6), lr_power = ScalarInput(ctx, 7);
    const int64_t accum = update.offsets[1], linear = update.offsets[2];
    if (shrinkage > 0) {
      const retf::functor::FtrlRow<float, true> ftrl{lr, l1, l2, shrinkage, lr_power};
      ForEachUpdatedRow(&update, [&](float* row, const float* g, int64_t dim) {
        ftrl(row, row + accum, row + linear, g, dim);
      });
    } else {
      const retf::functor::FtrlRow<float, false> ftrl{lr, l1, l2, 0.0f, lr_power};
      ForEachUpdatedRow(&update, [&](float* row, const float* g, int64_t dim) {
        ftrl(row, row + accum, row + linear, g, dim);
      });
    }
  }
};

class EVEvictOp : public OpKernel {
 public:
  explicit EVEvictOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<EVResource> resource;
    OP_REQUIRES_OK(ctx, GetEV(ctx, 0, &resource));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<int64>()() = resource->column() == 0 ? resource->storage()->Evict(ctx->input(1).scalar<int64>()()) : 0;
  }
};

// data into output `index`, a tensor of TensorFlow's type T (whose int64 is long long in some versions, where
// int64_t is long: same width, another C++ type).
template <typename T, typename E>
Status OutputVector(OpKernelContext* ctx, int index, const std::vector<E>& data, TensorShape shape) {
  static_assert(sizeof(T) == sizeof(E), "an output's element width");
  Tensor* out = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(index, shape, &out));
  if (!data.empty()) std::memcpy(out->flat<T>().data(), data.data(), data.size() * sizeof(E));
  return Status();
}

class EVExportOp : public OpKernel {
 public:
  explicit EVExportOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<EVResource> resource;
    OP_REQUIRES_OK(ctx, GetEV(ctx, 0, &resource));
    const EVStorage::Export out = resource->storage()->Snapshot(resource->column());
    const int64 n = out.keys.size(), filtered = out.filtered_keys.size();
    const int64 width = resource->storage()->column(resource->column()).width;
    OP_REQUIRES_OK(ctx, OutputVector<int64>(ctx, 0, out.keys, TensorShape({n})));
    OP_REQUIRES_OK(ctx, OutputVector<float>(ctx, 1, out.values, TensorShape({n, width})));
    OP_REQUIRES_OK(ctx, OutputVector<int64>(ctx, 2, out.freqs, TensorShape({n})));
    OP_REQUIRES_OK(ctx, OutputVector<int64>(ctx, 3, out.versions, TensorShape({n})));
    OP_REQUIRES_OK(ctx, OutputVector<int64>(ctx, 4, out.filtered_keys, TensorShape({filtered})));
    OP_REQUIRES_OK(ctx, OutputVector<int64>(ctx, 5, out.filtered_freqs, TensorShape({filtered})));
    OP_REQUIRES_OK(ctx, OutputVector<int64>(ctx, 6, out.filtered_versions, TensorShape({filtered})));
    OP_REQUIRES_OK(ctx, OutputVector<int32>(ctx, 7, out.offsets, TensorShape({retf::kBuckets + 1})));
    OP_REQUIRES_OK(ctx, OutputVector<int32>(ctx, 8, out.filtered_offsets, TensorShape({retf::kBuckets + 1})));
  }
};

// Restores a variable (is_slot false: configured from init, [rows, dim], every row dropped first) or a slot
// (init: its initial row) from a checkpoint written with any number of partitions: it reads
// head + tail and head/part_<j> + tail for j = 0, 1, ... and keeps the keys of partition `partition` of
// `partitions`. A slot is restored after its variable.
class EVImportOp : public OpKernel {
 public:
  explicit EVImportOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ConfigFromAttrs(ctx, &config_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("head", &head_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("tail", &tail_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("partition", &partition_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("partitions", &partitions_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("is_slot", &is_slot_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dim", &dim_));
    OP_REQUIRES(ctx, partitions_ > 0 && partition_ >= 0 && partition_ < partitions_,
                errors::InvalidArgument("partition ", partition_, " of ", partitions_));
  }

  void Compute(OpKernelContext* ctx) override {
    const std::string prefix(ctx->input(2).scalar<tstring>()());
    const Tensor& init = ctx->input(3);
    core::RefCountPtr<EVResource> primary;
    OP_REQUIRES_OK(ctx, GetOrCreateEV(ctx, 1, dim_, &primary));
    const std::shared_ptr<EVStorage>& storage = primary->storage();
    int column = 0;
    if (is_slot_) {
      OP_REQUIRES(ctx, init.dims() == 1 && init.NumElements() > 0,
                  errors::InvalidArgument("a slot's initial row must be 1-D, got ", init.shape().DebugString()));
      OP_REQUIRES_OK(ctx, RegisterSlot(ctx, storage, init));
      core::RefCountPtr<EVResource> slot;
      OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &slot));
      column = slot->column();
    } else {
      OP_REQUIRES(ctx, init.dims() == 2 && init.dim_size(0) > 0,
                  errors::InvalidArgument("default values must be [rows, dim], got ", init.shape().DebugString()));
      storage->Configure(init.flat<float>().data(), init.dim_size(0), config_);
    }
    BundleReader reader(Env::Default(), prefix);
    OP_REQUIRES_OK(ctx, reader.status());
    std::vector<std::string> names;
    if (reader.Contains(head_ + tail_ + "-keys")) names.push_back(head_ + tail_);
    for (int j = 0;; ++j) {
      const std::string name = head_ + "/part_" + std::to_string(j) + tail_;
      if (!reader.Contains(name + "-keys")) break;
      names.push_back(name);
    }
    OP_REQUIRES(ctx, !names.empty(),
                errors::NotFound("Key ", head_ + tail_, "-keys not found in checkpoint ", prefix,
                                 " (an EmbeddingVariable, saved unpartitioned or as ", head_, "/part_<j>", tail_, ")"));
    mutex_lock lock(*storage->mu());
    for (const std::string& name : names) OP_REQUIRES_OK(ctx, ImportOne(&reader, name, storage.get(), column));
  }

 private:
  // The checkpoint tensor `name` as int64 (keys may be saved as int32) or float.
  Status Read(BundleReader* reader, const std::string& name, DataType dtype, Tensor* out) {
    TF_RETURN_IF_ERROR(reader->Lookup(name, out));
    if (out->dtype() == DT_INT32 && dtype == DT_INT64) {
      Tensor wide(DT_INT64, out->shape());
      for (int64 i = 0; i < out->NumElements(); ++i) wide.flat<int64>()(i) = out->flat<int32>()(i);
      *out = wide;
    }
    if (out->dtype() != dtype) {
      return errors::InvalidArgument("checkpoint tensor ", name, " is ", DataTypeString(out->dtype()), ", not ",
                                     DataTypeString(dtype));
    }
    return Status();
  }

  // freqs and versions where the checkpoint has one per key (DeepRec writes them empty when nothing recorded them);
  // an empty vector where it has none.
  Status ReadCounts(BundleReader* reader, const std::string& name, int64 n, std::vector<int64_t>* out) {
    out->clear();
    if (!reader->Contains(name)) return Status();
    Tensor counts;
    TF_RETURN_IF_ERROR(Read(reader, name, DT_INT64, &counts));
    if (counts.NumElements() == n) {
      const int64_t* data = reinterpret_cast<const int64_t*>(counts.flat<int64>().data());
      out->assign(data, data + n);
    }
    return Status();
  }

  Status ImportOne(BundleReader* reader, const std::string& name, EVStorage* storage, int column) {
    const int64 width = storage->column(column).width;
    Tensor keys, values;
    TF_RETURN_IF_ERROR(Read(reader, name + "-keys", DT_INT64, &keys));
    TF_RETURN_IF_ERROR(Read(reader, name + "-values", DT_FLOAT, &values));
    const int64 n = keys.NumElements();
    if (values.NumElements() != n * width) {
      return errors::InvalidArgument("checkpoint tensor ", name, "-values has shape ", values.shape().DebugString(),
                                     " for ", n, " keys; the variable holds ", width, " values a key");
    }
    std::vector<int64_t> freqs, versions;
    if (column == 0) {
      TF_RETURN_IF_ERROR(ReadCounts(reader, name + "-freqs", n, &freqs));
      TF_RETURN_IF_ERROR(ReadCounts(reader, name + "-versions", n, &versions));
    }
    const int64_t* k = reinterpret_cast<const int64_t*>(keys.flat<int64>().data());
    const float* v = values.flat<float>().data();
    for (int64 i = 0; i < n; ++i) {
      if (retf::PartitionOf(k[i], partitions_) != partition_) continue;
      const int64_t freq = column != 0 ? -1 : freqs.empty() ? 0 : freqs[i];
      storage->Import(column, k[i], v + i * width, freq, versions.empty() ? -1 : versions[i]);
    }
    if (column == 0 && reader->Contains(name + "-keys_filtered")) {
      Tensor filtered_keys;
      TF_RETURN_IF_ERROR(Read(reader, name + "-keys_filtered", DT_INT64, &filtered_keys));
      const int64 m = filtered_keys.NumElements();
      std::vector<int64_t> filtered_freqs, filtered_versions;
      TF_RETURN_IF_ERROR(ReadCounts(reader, name + "-freqs_filtered", m, &filtered_freqs));
      TF_RETURN_IF_ERROR(ReadCounts(reader, name + "-versions_filtered", m, &filtered_versions));
      for (int64 i = 0; i < m; ++i) {
        const int64_t key = filtered_keys.flat<int64>()(i);
        if (retf::PartitionOf(key, partitions_) != partition_) continue;
        storage->ImportFiltered(key, filtered_freqs.empty() ? 0 : filtered_freqs[i],
                                filtered_versions.empty() ? -1 : filtered_versions[i]);
      }
    }
    return Status();
  }

  retf::EVConfig config_;
  std::string head_, tail_;
  int64 partition_ = 0, partitions_ = 1;
  bool is_slot_ = false;
  int64 dim_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("Retf>EVHandle").Device(DEVICE_CPU), ResourceHandleOp<EVResource>);
REGISTER_KERNEL_BUILDER(Name("Retf>EVInitialize").Device(DEVICE_CPU), EVInitializeOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVSlotInitialize").Device(DEVICE_CPU), EVSlotInitializeOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVIsInitialized").Device(DEVICE_CPU), EVIsInitializedOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVGather").Device(DEVICE_CPU), EVGatherOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVApplyGradientDescent").Device(DEVICE_CPU), EVApplyGradientDescentOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVApplyAdagrad").Device(DEVICE_CPU), EVApplyAdagradOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVApplyAdagradDecay").Device(DEVICE_CPU), EVApplyAdagradDecayOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVApplyAdam").Device(DEVICE_CPU), EVApplyAdamOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVApplyAdamAsync").Device(DEVICE_CPU), EVApplyAdamAsyncOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVApplyFtrl").Device(DEVICE_CPU), EVApplyFtrlOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVEvict").Device(DEVICE_CPU), EVEvictOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVExport").Device(DEVICE_CPU), EVExportOp);
REGISTER_KERNEL_BUILDER(Name("Retf>EVImport").Device(DEVICE_CPU), EVImportOp);

}  // namespace
}  // namespace tensorflow
