#include "checkpoint/format.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace strata::checkpoint {

absl::StatusOr<Format> ParseFormat(absl::string_view name,
                                   absl::string_view what) {
  if (name == "full") return Format::kFull;
  if (name == "local") return Format::kLocal;
  if (name == "sharded") return Format::kSharded;
  if (name == "dcp") return Format::kDcp;
  return absl::InvalidArgumentError(absl::StrCat(
      what, " must be full, local, sharded or dcp, got '", name, "'"));
}

absl::string_view FormatName(Format format) {
  switch (format) {
    case Format::kFull:
      return "full";
    case Format::kLocal:
      return "local";
    case Format::kSharded:
      return "sharded";
    case Format::kDcp:
      return "dcp";
  }
  return "unknown";
}

}  // namespace strata::checkpoint
