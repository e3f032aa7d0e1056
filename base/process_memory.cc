#include "base/process_memory.h"

#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace strata {

absl::StatusOr<int64_t> ProcStatusBytes(absl::string_view field) {
  std::ifstream in("/proc/self/status");
  if (!in) {
    return absl::NotFoundError(
        "cannot open /proc/self/status (no procfs?) to read " +
        std::string(field));
  }
  const std::string prefix = absl::StrCat(field, ":");
  for (std::string line; std::getline(in, line);) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, prefix)) continue;
    rest = absl::StripAsciiWhitespace(rest);
    if (!absl::ConsumeSuffix(&rest, " kB")) {
      return absl::InternalError(
          absl::StrCat("/proc/self/status: ", field, " is not in kB: ", line));
    }
    int64_t kb = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kb)) {
      return absl::InternalError(
          absl::StrCat("/proc/self/status: unreadable ", field, ": ", line));
    }
    return kb * 1024;
  }
  return absl::NotFoundError(
      absl::StrCat("/proc/self/status has no ", field, " line"));
}

absl::Status ResetPeakResident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  if (!out) {
    return absl::InternalError(
        "cannot write 5 to /proc/self/clear_refs to reset the peak resident "
        "set (VmHWM): no procfs, or a kernel before 4.0?");
  }
  return absl::OkStatus();
}

absl::Status SetMallocMmapThreshold(int64_t bytes) {
  constexpr int64_t kMax = int64_t{32} << 20;  // glibc's HEAP_MAX / 2.
  if (bytes < 0 || bytes > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("malloc mmap threshold: must be in [0, ", kMax,
                     "] bytes, got ", bytes));
  }
#if defined(__GLIBC__)
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes)) != 1) {
    // glibc's own mallopt accepts every threshold in range; an allocator
    // that replaces glibc's malloc (a sanitizer's: AddressSanitizer's
    // mallopt does nothing and returns 0) refuses it.
    return absl::FailedPreconditionError(absl::StrCat(
        "malloc mmap threshold: mallopt(M_MMAP_THRESHOLD, ", bytes,
        ") failed: this process's allocator (e.g. a sanitizer's) does not "
        "support mallopt"));
  }
  return absl::OkStatus();
#else
  return absl::UnimplementedError(
      "malloc mmap threshold: only glibc's malloc is tuned");
#endif
}

}  // namespace strata
