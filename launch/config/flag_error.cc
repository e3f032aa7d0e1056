#include "launch/config/flag_error.h"

#include "absl/strings/str_cat.h"

namespace strata::launch {

absl::Status FlagError(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", what));
}

}  // namespace strata::launch
