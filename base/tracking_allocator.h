// A CPU allocator for LibTorch that counts the live bytes of tensor storage
// and their peak, for the whole process and per *memory tag*, so that memory
// figures are measured rather than estimated (PyTorch's
// torch.cuda.max_memory_allocated, for CPU tensors).
//
// The tag is a thread-local label set by an RAII MemoryTagScope: ranks that
// run as threads of one process (comm/testing/multi_rank.h) each open a scope
// with their own tag ("rank0", "rank1") and get their own live/peak figures.
// An allocation is charged to the tag current on the allocating thread (the
// default tag "" outside every scope) and credited back to that same tag when
// it is freed, whatever thread frees it.
//
// What is counted: exactly the bytes LibTorch asked the CPU allocator for
// (StorageImpl::nbytes() of a storage it allocated; at::empty({n}, kFloat)
// asks for 4 n bytes). Not counted: the allocator's own alignment and malloc
// overhead, the 64-byte header this allocator adds in front of each block,
// storages allocated before Install() (they are freed by the allocator that
// made them), tensors wrapping foreign memory (from_blob), and memory that is
// not tensor storage (Gloo's internal buffers, glibc). A zero-byte
// allocation counts as an allocation of 0 bytes. Temporaries that LibTorch or a
// library allocates on its own worker threads (intra-op threads, Gloo's worker
// threads) are charged to the default tag of those threads.
//
// Storage released through StorageImpl::reset() (FSDP's freeing of gathered
// parameters) is credited when released; storage given back to a StorageImpl
// with set_data_ptr_noswap(c10::GetCPUAllocator()->allocate(n)) is charged
// again.
//
// Usage:
//   CHECK_OK(strata::TrackingAllocator::Install());   // once, early in main
//   {
//     strata::MemoryTagScope scope("rank0");
//     strata::TrackingAllocator::ResetPeak("rank0");
//     ... train ...
//     MemoryStats s = strata::TrackingAllocator::Stats("rank0");
//   }
#ifndef STRATA_BASE_TRACKING_ALLOCATOR_H_
#define STRATA_BASE_TRACKING_ALLOCATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace strata {

struct MemoryStats {
  // Bytes of storage allocated through the tracking allocator and not yet
  // freed.
  int64_t live_bytes = 0;
  // The maximum of live_bytes since Install() or the last ResetPeak.
  int64_t peak_bytes = 0;
  // Allocations counted so far (never reset); frees do not decrease it.
  int64_t num_allocations = 0;
};

class TrackingAllocator {
 public:
  // Makes the tracking allocator LibTorch's CPU allocator (c10::SetCPUAllocator
  // at the highest priority), wrapping the allocator that was current.
  // Idempotent and thread-safe; call it explicitly (never from a static
  // initialiser), before the allocations to be counted. It is never
  // uninstalled. Fails if LibTorch keeps another allocator.
  static absl::Status Install();
  static bool installed();

  // Figures over every tag.
  static MemoryStats Total();
  // Figures of `tag`; all zero for a tag never used.
  static MemoryStats Stats(absl::string_view tag);
  // Every tag used so far ("" is the default tag), in creation order.
  static std::vector<std::string> Tags();

  // Sets the peak to the current live bytes, of `tag` or of the total. Any
  // thread may call them at any time; an allocation racing with the reset may
  // or may not be included in the new peak.
  static void ResetPeak(absl::string_view tag);
  static void ResetTotalPeak();

  // The tag that allocations on this thread are charged to now.
  static std::string CurrentTag();
};

// Charges this thread's allocations to `tag` for the scope's lifetime, then
// restores the previous tag. Scopes nest; destroy them in reverse order, on
// the thread that created them. A tag's first scope on each thread takes a
// mutex; later scopes, allocations and frees are lock-free (atomics).
class MemoryTagScope {
 public:
  explicit MemoryTagScope(absl::string_view tag);
  ~MemoryTagScope();
  MemoryTagScope(const MemoryTagScope&) = delete;
  MemoryTagScope& operator=(const MemoryTagScope&) = delete;

 private:
  void* previous_;  // The previous tag's counters (internal type).
};

}  // namespace strata

#endif  // STRATA_BASE_TRACKING_ALLOCATOR_H_
