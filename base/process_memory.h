// This process's memory as the kernel counts it (/proc/self/status): what a
// user sees in `top`, beside the tracking allocator's figures
// (base/tracking_allocator.h).
#ifndef STRATA_BASE_PROCESS_MEMORY_H_
#define STRATA_BASE_PROCESS_MEMORY_H_

#include <cstdint>

#include "absl/status/status.h"
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

// Resets the peak resident set (VmHWM) to the current resident set (writes
// "5" to /proc/self/clear_refs, Linux >= 4.0), so that the next
// PeakResidentBytes is the peak since now. Internal naming the file when it
// cannot be written.
absl::Status ResetPeakResident();

// Makes the C library serve every allocation of at least `bytes` with its
// own mmap, unmapped when freed (glibc's M_MMAP_THRESHOLD, fixed: this turns
// off glibc's dynamic threshold, which rises to the size of the largest
// block freed, up to 32 MiB, so that freed units' buffers below that size
// stay in the heap and fragment it). Binaries call it (libraries do not: it
// is process-wide). InvalidArgument for bytes outside [0, 32 MiB];
// FailedPrecondition where the allocator does not support mallopt (one
// that replaces glibc's malloc, e.g. AddressSanitizer's); Unimplemented
// where the C library is not glibc.
absl::Status SetMallocMmapThreshold(int64_t bytes);

}  // namespace strata

#endif  // STRATA_BASE_PROCESS_MEMORY_H_
