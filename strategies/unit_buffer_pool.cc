#include "strategies/unit_buffer_pool.h"

#include <c10/core/DeviceGuard.h>
#include <glog/logging.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace strata::strategies {

c10::DataPtr AllocateOn(c10::Device device, int64_t nbytes) {
  CHECK_GE(nbytes, 0);
  std::optional<c10::DeviceGuard> on_device;
  if (!device.is_cpu() && device.has_index()) on_device.emplace(device);
  return c10::GetAllocator(device.type())->allocate(nbytes);
}

void UnitBufferPool::Open() {
  if (!enabled_ || open_) return;
  open_ = true;
  high_water_bytes_ = live_bytes_;
}

void UnitBufferPool::Flush() {
  blocks_.clear();  // Frees them.
  pooled_bytes_ = 0;
}

void UnitBufferPool::Close() {
  Flush();
  high_water_bytes_ = 0;
  open_ = false;
}

c10::DataPtr UnitBufferPool::Take(int64_t nbytes, c10::Device device) {
  CHECK_GE(nbytes, 0);
  // The most recently released block of this size: the likeliest to be
  // still in the caches.
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    if (it->nbytes != nbytes || it->data.device() != device) continue;
    c10::DataPtr data = std::move(it->data);
    blocks_.erase(std::next(it).base());
    pooled_bytes_ -= nbytes;
    live_bytes_ += nbytes;
    ++counters_.reuses;
    return data;
  }
  live_bytes_ += nbytes;
  if (open_) {
    // Without the pool, live_bytes_ would be held now: the bound may rise to
    // it, and the pooled blocks must fit under it with the new one.
    high_water_bytes_ = std::max(high_water_bytes_, live_bytes_);
    while (!blocks_.empty() &&
           live_bytes_ + pooled_bytes_ > high_water_bytes_) {
      pooled_bytes_ -= blocks_.front().nbytes;
      blocks_.pop_front();
      ++counters_.evictions;
    }
  }
  ++counters_.fresh_allocations;
  return AllocateOn(device, nbytes);
}

void UnitBufferPool::Give(c10::DataPtr block, int64_t nbytes) {
  CHECK_GE(live_bytes_, nbytes) << "UnitBufferPool: a block given back that "
                                   "was neither taken nor tracked";
  live_bytes_ -= nbytes;
  if (!open_) return;  // `block` is freed here.
  blocks_.push_back({std::move(block), nbytes});
  pooled_bytes_ += nbytes;
}

void UnitBufferPool::Track(int64_t nbytes) {
  CHECK_GE(nbytes, 0);
  live_bytes_ += nbytes;
  if (open_) high_water_bytes_ = std::max(high_water_bytes_, live_bytes_);
}

}  // namespace strata::strategies
