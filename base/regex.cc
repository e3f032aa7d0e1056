#include "base/regex.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace strata {

absl::StatusOr<std::regex> CompileRegex(const std::string& pattern) {
  try {
    return std::regex(pattern);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", pattern, "' is not a valid regex: ", e.what()));
  }
}

}  // namespace strata
