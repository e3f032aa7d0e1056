#include "launch/observe/tensor_memory.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "base/tracking_allocator.h"

namespace strata::launch {

std::optional<int64_t> TrackedLiveBytes() {
  if (!TrackingAllocator::installed()) return std::nullopt;
  return TrackingAllocator::Total().live_bytes;
}

void ResetTrackedPeak() {
  if (TrackingAllocator::installed()) TrackingAllocator::ResetTotalPeak();
}

std::optional<int64_t> TrackedPeakAbove(std::optional<int64_t> baseline_bytes) {
  if (!baseline_bytes.has_value() || !TrackingAllocator::installed()) {
    return std::nullopt;
  }
  return TrackingAllocator::Total().peak_bytes - *baseline_bytes;
}

absl::StatusOr<std::vector<int64_t>> WorldTensorPeakBytes(
    comm::Group* group, std::optional<int64_t> baseline_bytes) {
  const std::optional<int64_t> mine = TrackedPeakAbove(baseline_bytes);
  if (!mine.has_value()) return std::vector<int64_t>();
  if (group == nullptr || group->size() == 1) {
    return std::vector<int64_t>{*mine};
  }
  const at::Tensor local = at::full({1}, *mine, at::kLong);
  at::Tensor all = at::empty({group->size()}, at::kLong);
  STRATA_RETURN_IF_ERROR(group->AllGather(local, all));
  const int64_t* data = all.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + group->size());
}

}  // namespace strata::launch
