/* A CPU allocator for TensorFlow that keeps large blocks for reuse.

   TensorFlow's default CPU allocator takes every tensor from malloc. glibc serves a block of 32 MiB
   or more (its largest dynamic mmap threshold) with fresh pages from the kernel each time, and
   returns them on free: a page fault and a zeroed page for each 4 KiB, every step, for each such
   tensor (DIN's attention at a batch of 2048: [102400, 144] floats). This allocator passes blocks
   under 1 MiB to the same aligned malloc and keeps freed blocks of 1 MiB or more, by size class,
   for the next allocation of that class or a little smaller, up to a quarter of the memory the
   process may use (the machine's, or its cgroup's limit where lower). TensorFlow's BFC
   allocator keeps memory too, but serves every small allocation through its bins under one lock.

   RetfInstallLargeBlockAllocator() registers it in TensorFlow's allocator registry, above
   TensorFlow's own, if TensorFlow has not chosen its CPU allocator yet (the registry chooses once,
   on the first CPU allocation of the process). */

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorflow/core/framework/allocator.h"
#include "tensorflow/core/platform/macros.h"
#include "tensorflow/core/platform/mem.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/platform/numa.h"
#include "tensorflow/core/public/version.h"
// The registry has no public way to ask whether it has chosen its allocator, nor to add a factory
// without aborting the process when it has: its members are read under its own lock instead.
#define private public
#define protected public
#include "tensorflow/core/framework/allocator_registry.h"
#undef protected
#undef private

namespace retf {
namespace {

constexpr size_t kLargeBlock = size_t{1} << 20;

// 8 classes per doubling: at most 1/8 of a block unused.
size_t SizeClass(size_t bytes) {
  const int top = 63 - __builtin_clzll(bytes);
  const size_t step = size_t{1} << (top - 3);
  return (bytes + step - 1) / step * step;
}

// The memory limit of the process's cgroup (v2, then v1), 0 when none is set or readable: a container's
// limit is often far below the machine's memory.
size_t CgroupLimit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    FILE* file = std::fopen(path, "r");
    if (file == nullptr) continue;
    unsigned long long bytes = 0;
    const bool number = std::fscanf(file, "%llu", &bytes) == 1;  // "max" (no limit) is not a number
    std::fclose(file);
    if (number && bytes > 0) return static_cast<size_t>(bytes);
  }
  return 0;
}

size_t KeptLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  size_t memory = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{4} << 30;
  const size_t cgroup = CgroupLimit();
  if (cgroup != 0 && cgroup < memory) memory = cgroup;
  return memory / 4;
}

// The addresses of the large blocks this allocator holds (handed out or kept): open addressing over
// atomics, so that freeing a small block (most frees) asks without a lock. Inserts and erases run
// under the allocator's lock; an address leaves the set before its memory goes back to malloc, so a
// small block malloc puts there later is never taken for a large one.
class BlockSet {
 public:
  static constexpr size_t kSlots = 8192;  // at most half of them used
  static constexpr uintptr_t kEmpty = 0, kErased = 1;

  BlockSet() {
    for (auto& slot : slots_) slot.store(kEmpty, std::memory_order_relaxed);
  }

  bool Contains(const void* ptr) const {
    const uintptr_t key = reinterpret_cast<uintptr_t>(ptr);
    for (size_t i = Hash(key), n = 0; n < kSlots; i = (i + 1) % kSlots, ++n) {
      const uintptr_t slot = slots_[i].load(std::memory_order_acquire);
      if (slot == key) return true;
      if (slot == kEmpty) return false;
    }
    return false;
  }

  // False once half the slots hold addresses or erasures (a probe then stays short): the block is then
  // malloc's alone, not kept.
  bool Insert(const void* ptr) {
    if (used_ + erased_ >= kSlots / 2) return false;
    const uintptr_t key = reinterpret_cast<uintptr_t>(ptr);
    for (size_t i = Hash(key);; i = (i + 1) % kSlots) {
      const uintptr_t slot = slots_[i].load(std::memory_order_relaxed);
      if (slot == kEmpty || slot == kErased) {
        if (slot == kErased) --erased_;
        slots_[i].store(key, std::memory_order_release);
        ++used_;
        return true;
      }
    }
  }

  void Erase(const void* ptr) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(ptr);
    for (size_t i = Hash(key), n = 0; n < kSlots; i = (i + 1) % kSlots, ++n) {
      const uintptr_t slot = slots_[i].load(std::memory_order_relaxed);
      if (slot == key) {
        slots_[i].store(kErased, std::memory_order_release);  // probes go on past it
        --used_;
        ++erased_;
        return;
      }
      if (slot == kEmpty) return;
    }
  }

 private:
  static size_t Hash(uintptr_t key) { return static_cast<size_t>((key >> 12) * 0x9E3779B97F4A7C15ULL >> 51); }

  std::atomic<uintptr_t> slots_[kSlots];
  size_t used_ = 0, erased_ = 0;
};

class LargeBlockAllocator : public tensorflow::Allocator {
 public:
  std::string Name() override { return "retf_large_block_cpu"; }

  void* AllocateRaw(size_t alignment, size_t num_bytes) override {
    if (num_bytes < kLargeBlock || alignment > kAlignment) {
      return tensorflow::port::AlignedMalloc(num_bytes, static_cast<int>(alignment));
    }
    const size_t size_class = SizeClass(num_bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The smallest kept block of this class or up to half again as large (a sequence's length moves
      // from batch to batch, and with it its tensors' sizes).
      for (auto it = kept_.lower_bound(size_class); it != kept_.end() && it->first <= size_class + size_class / 2;
           ++it) {
        if (it->second.empty()) continue;
        void* block = it->second.back();
        it->second.pop_back();
        kept_bytes_ -= it->first;
        return block;
      }
    }
    void* block = tensorflow::port::AlignedMalloc(size_class, static_cast<int>(kAlignment));
    if (block == nullptr && ReleaseKept()) {  // out of memory while holding kept blocks: give them back first
      block = tensorflow::port::AlignedMalloc(size_class, static_cast<int>(kAlignment));
    }
    if (block == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (blocks_.Insert(block)) sizes_[block] = size_class;
    return block;
  }

  void DeallocateRaw(void* ptr) override {
    if (ptr == nullptr) return;
    if (blocks_.Contains(ptr)) {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t size_class = sizes_.at(ptr);  // inserted with the address, under this lock
      if (kept_bytes_ + size_class <= limit_) {
        kept_[size_class].push_back(ptr);
        kept_bytes_ += size_class;
        return;
      }
      blocks_.Erase(ptr);
      sizes_.erase(ptr);
    }
    tensorflow::port::AlignedFree(ptr);
  }

 private:
  static constexpr size_t kAlignment = tensorflow::Allocator::kAllocatorAlignment;

  // Frees every kept block; whether there was any.
  bool ReleaseKept() {
    std::vector<void*> freed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& entry : kept_) {
        for (void* block : entry.second) {
          blocks_.Erase(block);
          sizes_.erase(block);
          freed.push_back(block);
        }
      }
      kept_.clear();
      kept_bytes_ = 0;
    }
    for (void* block : freed) tensorflow::port::AlignedFree(block);
    return !freed.empty();
  }

  std::mutex mu_;
  BlockSet blocks_;                              // inserts and erases under mu_
  std::unordered_map<void*, size_t> sizes_;      // under mu_: each large block's class
  std::map<size_t, std::vector<void*>> kept_;    // under mu_: free blocks by class
  size_t kept_bytes_ = 0;
  const size_t limit_ = KeptLimit();
};

// For allocators built on a SubAllocator (none on TensorFlow's CPU-only path): plain aligned malloc.
class MallocSubAllocator : public tensorflow::SubAllocator {
 public:
  MallocSubAllocator() : tensorflow::SubAllocator({}, {}) {}
#if TF_MAJOR_VERSION == 2 && TF_MINOR_VERSION < 5
  void* Alloc(size_t alignment, size_t num_bytes) override {
    void* ptr = tensorflow::port::AlignedMalloc(num_bytes, static_cast<int>(alignment));
    VisitAlloc(ptr, tensorflow::port::kNUMANoAffinity, num_bytes);
    return ptr;
  }
#else
  void* Alloc(size_t alignment, size_t num_bytes, size_t* bytes_received) override {
    *bytes_received = num_bytes;
    void* ptr = tensorflow::port::AlignedMalloc(num_bytes, static_cast<int>(alignment));
    VisitAlloc(ptr, tensorflow::port::kNUMANoAffinity, num_bytes);
    return ptr;
  }
  bool SupportsCoalescing() const override { return false; }
#endif
  void Free(void* ptr, size_t num_bytes) override {
    VisitFree(ptr, tensorflow::port::kNUMANoAffinity, num_bytes);
    tensorflow::port::AlignedFree(ptr);
  }
};

class LargeBlockAllocatorFactory : public tensorflow::AllocatorFactory {
 public:
  tensorflow::Allocator* CreateAllocator() override { return new LargeBlockAllocator; }
  tensorflow::SubAllocator* CreateSubAllocator(int numa_node) override { return new MallocSubAllocator; }
};

// Above TensorFlow's own CPU allocator.
constexpr int kTensorFlowPriority = 100;
constexpr int kPriority = 150;

}  // namespace
}  // namespace retf

// 1: registered (or already); 0: TensorFlow had already chosen its CPU allocator, which stays; -1: the
// build registers an allocator of its own above TensorFlow's default, which stays.
extern "C" int RetfInstallLargeBlockAllocator() {
  static std::mutex once;
  std::lock_guard<std::mutex> guard(once);
  static bool installed = false;
  if (installed) return 1;
  tensorflow::AllocatorFactoryRegistry* registry = tensorflow::AllocatorFactoryRegistry::singleton();
  tensorflow::mutex_lock lock(registry->mu_);
  for (const auto& entry : registry->factories_) {
    if (entry.priority > retf::kTensorFlowPriority) return -1;  // a build's own allocator (intel-tensorflow's MKL one)
  }
  if (registry->first_alloc_made_) return 0;
  tensorflow::AllocatorFactoryRegistry::FactoryEntry entry;
  entry.source_file = __FILE__;
  entry.source_line = __LINE__;
  entry.name = "RetfLargeBlockCPUAllocator";
  entry.priority = retf::kPriority;
  entry.factory.reset(new retf::LargeBlockAllocatorFactory);
  registry->factories_.push_back(std::move(entry));
  installed = true;
  return 1;
}
