// This process's memory as the kernel counts it (/proc/self/status): what a
// user sees in `top`, beside the tracking allocator's figures
// (base/tracking_allocator.h).
#ifndef STRATA_BASE_PROCESS_MEMORY_H_
#define STRATA_BASE_PROCESS_MEMORY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

// A kB field of /proc/self/status ("VmRSS", "VmHWM", ...) in bytes.
// NotFound naming the field when the file has no such line (or no
// /proc); Internal when it cannot be read.
absl::StatusOr<int64_t> ProcStatusBytes(absl::string_view field);

// The peak resident set size (VmHWM) in bytes.
inline absl::StatusOr<int64_t> PeakResidentBytes() {
  return ProcStatusBytes("VmHWM");
}

}  // namespace strata

#endif  // STRATA_BASE_PROCESS_MEMORY_H_
