#include "base/process_memory.h"

#include <cstdlib>
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

}  // namespace strata
