#include "base/tracking_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/torch_compat.h"
#include "glog/logging.h"

namespace strata {
namespace {

// Live/peak counters of one tag (or of the total). Never destroyed: blocks
// point to them until freed, possibly after every scope of the tag closed.
struct TagCounters {
  explicit TagCounters(std::string tag_name) : name(std::move(tag_name)) {}
  const std::string name;
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int64_t> peak_bytes{0};
  std::atomic<int64_t> num_allocations{0};
};

struct Registry {
  std::mutex mutex;
  // Owns every tag's counters, in creation order; guarded by `mutex`.
  std::vector<std::unique_ptr<TagCounters>> tags;
  std::unordered_map<std::string, TagCounters*> by_name;
  TagCounters total{"<total>"};
  TagCounters* default_tag = nullptr;
};

// Created on first use, never freed (blocks may be freed during exit).
Registry& GetRegistry() {
  static Registry* const registry = [] {
    auto* r = new Registry();
    r->tags.push_back(std::make_unique<TagCounters>(""));
    r->default_tag = r->tags.back().get();
    r->by_name.emplace("", r->default_tag);
    return r;
  }();
  return *registry;
}

TagCounters* FindOrCreateTag(absl::string_view tag) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.by_name.find(std::string(tag));
  if (it != registry.by_name.end()) return it->second;
  registry.tags.push_back(std::make_unique<TagCounters>(std::string(tag)));
  TagCounters* counters = registry.tags.back().get();
  registry.by_name.emplace(std::string(tag), counters);
  return counters;
}

TagCounters* FindTag(absl::string_view tag) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.by_name.find(std::string(tag));
  return it == registry.by_name.end() ? nullptr : it->second;
}

// This thread's tag; null means the default tag.
thread_local TagCounters* t_current_tag = nullptr;

TagCounters* CurrentCounters() {
  return t_current_tag != nullptr ? t_current_tag : GetRegistry().default_tag;
}

void Charge(TagCounters* counters, int64_t nbytes) {
  const int64_t live =
      counters->live_bytes.fetch_add(nbytes, std::memory_order_relaxed) +
      nbytes;
  int64_t peak = counters->peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !counters->peak_bytes.compare_exchange_weak(
                            peak, live, std::memory_order_relaxed)) {
  }
  counters->num_allocations.fetch_add(1, std::memory_order_relaxed);
}

void Credit(TagCounters* counters, int64_t nbytes) {
  counters->live_bytes.fetch_sub(nbytes, std::memory_order_relaxed);
}

MemoryStats StatsOf(const TagCounters& counters) {
  MemoryStats stats;
  stats.live_bytes = counters.live_bytes.load(std::memory_order_relaxed);
  stats.peak_bytes = counters.peak_bytes.load(std::memory_order_relaxed);
  stats.num_allocations =
      counters.num_allocations.load(std::memory_order_relaxed);
  return stats;
}

void ResetPeakOf(TagCounters& counters) {
  counters.peak_bytes.store(counters.live_bytes.load(std::memory_order_relaxed),
                            std::memory_order_relaxed);
}

// Written in front of every block. 64 bytes keep the data as aligned as the
// wrapped allocator's (c10::gAlignment is 64 on x86-64).
struct alignas(64) Header {
  c10::DeleterFnPtr inner_deleter;  // The wrapped allocator's deleter ...
  void* inner_context;              // ... and the context it frees.
  int64_t nbytes;                   // Bytes requested (charged).
  TagCounters* tag;                 // Charged to; credited on free.
};
constexpr size_t kHeaderBytes = sizeof(Header);
static_assert(kHeaderBytes == 64, "header must keep 64-byte alignment");

// Frees a block made by TrackingCpuAllocator::Allocate. Works as a raw
// deleter: data == context.
void DeleteBlock(void* data) {
  if (data == nullptr) return;
  Header* header =
      reinterpret_cast<Header*>(static_cast<char*>(data) - kHeaderBytes);
  Credit(header->tag, header->nbytes);
  Credit(&GetRegistry().total, header->nbytes);
  header->inner_deleter(header->inner_context);
}

class TrackingCpuAllocator final : public torch_compat::AllocatorBase {
 public:
  // `inner` is borrowed; LibTorch's allocators live for the whole process.
  explicit TrackingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr Allocate(size_t nbytes) const override {
    c10::DataPtr block = inner_->allocate(nbytes + kHeaderBytes);
    CHECK(block.get() != nullptr) << "CPU allocator returned null for "
                                  << nbytes + kHeaderBytes << " bytes";
    char* base = static_cast<char*>(block.get());
    Header* header = reinterpret_cast<Header*>(base);
    header->inner_deleter = block.get_deleter();
    header->inner_context = block.release_context();
    header->nbytes = static_cast<int64_t>(nbytes);
    header->tag = CurrentCounters();
    Charge(header->tag, header->nbytes);
    Charge(&GetRegistry().total, header->nbytes);
    void* data = base + kHeaderBytes;
    return c10::DataPtr(data, data, &DeleteBlock, block.device());
  }

  c10::DeleterFnPtr raw_deleter() const override { return &DeleteBlock; }

 private:
  c10::Allocator* inner_;
};

std::mutex g_install_mutex;
TrackingCpuAllocator* g_allocator = nullptr;  // Guarded by g_install_mutex.

}  // namespace

absl::Status TrackingAllocator::Install() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  GetRegistry();
  if (g_allocator == nullptr) {
    c10::Allocator* inner = c10::GetCPUAllocator();
    CHECK(inner != nullptr);
    // Owned by LibTorch's allocator table from here on (never freed).
    g_allocator = new TrackingCpuAllocator(inner);
    c10::SetCPUAllocator(g_allocator, /*priority=*/255);
  }
  if (c10::GetCPUAllocator() != g_allocator) {
    return absl::FailedPreconditionError(
        "TrackingAllocator::Install: LibTorch kept another CPU allocator "
        "(one was set at the highest priority, 255, before or after "
        "installing)");
  }
  return absl::OkStatus();
}

bool TrackingAllocator::installed() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  return g_allocator != nullptr && c10::GetCPUAllocator() == g_allocator;
}

MemoryStats TrackingAllocator::Total() { return StatsOf(GetRegistry().total); }

MemoryStats TrackingAllocator::Stats(absl::string_view tag) {
  const TagCounters* counters = FindTag(tag);
  return counters == nullptr ? MemoryStats() : StatsOf(*counters);
}

std::vector<std::string> TrackingAllocator::Tags() {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& tag : registry.tags) names.push_back(tag->name);
  return names;
}

void TrackingAllocator::ResetPeak(absl::string_view tag) {
  if (TagCounters* counters = FindTag(tag)) ResetPeakOf(*counters);
}

void TrackingAllocator::ResetTotalPeak() { ResetPeakOf(GetRegistry().total); }

std::string TrackingAllocator::CurrentTag() { return CurrentCounters()->name; }

MemoryTagScope::MemoryTagScope(absl::string_view tag)
    : previous_(t_current_tag) {
  // A per-thread cache keeps the registry's mutex to a tag's first scope on
  // each thread.
  thread_local std::unordered_map<std::string, TagCounters*> cache;
  auto it = cache.find(std::string(tag));
  if (it == cache.end()) {
    it = cache.emplace(std::string(tag), FindOrCreateTag(tag)).first;
  }
  t_current_tag = it->second;
}

MemoryTagScope::~MemoryTagScope() {
  t_current_tag = static_cast<TagCounters*>(previous_);
}

}  // namespace strata
