// The train binary's measured tensor memory: the tracking allocator's
// (base/tracking_allocator.h) peak of tensor storage during the training
// steps, per rank, against which the planner's prediction
// (launch/plan/plan.h) is compared at the end of a run
// (launch/plan/plan_train.h PlanEndLine) and which
// metrics.jsonl records ("tensor_peak_bytes").
//
// What counts: the process-wide peak of live tensor storage from just before
// the first step to now, less the storage that was live before the model was
// built (the data: the Markov corpus or a token file's tensors, which the
// planner does not model). So the strategy's state (parameters, gradients,
// optimizer state, buffers) counts, as in launch/plan/plan_validation_test.cc.
// Everything runs on the calling thread; nothing here is a collective except
// WorldTensorPeakBytes.
#ifndef STRATA_LAUNCH_OBSERVE_TENSOR_MEMORY_H_
#define STRATA_LAUNCH_OBSERVE_TENSOR_MEMORY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/group.h"

namespace strata::launch {

// Tensor storage live now (all threads of this process), or nullopt when
// the tracking allocator is not installed (train --track_tensor_memory=false,
// or a test calling Train directly).
std::optional<int64_t> TrackedLiveBytes();

// Starts a window: the peak so far is forgotten (set to the live bytes).
// No-op when the allocator is not installed.
void ResetTrackedPeak();

// The peak since ResetTrackedPeak less `baseline_bytes` (TrackedLiveBytes
// before the model was built); nullopt when either is unknown.
std::optional<int64_t> TrackedPeakAbove(std::optional<int64_t> baseline_bytes);

// Every rank's TrackedPeakAbove(baseline_bytes), rank order: one all-gather
// of one int64 over `group` (null: one process) that every rank joins, or
// empty, without communicating, when this process does not track (every rank
// runs the same flags, so every rank takes the same branch).
absl::StatusOr<std::vector<int64_t>> WorldTensorPeakBytes(
    comm::Group* group, std::optional<int64_t> baseline_bytes);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_OBSERVE_TENSOR_MEMORY_H_
