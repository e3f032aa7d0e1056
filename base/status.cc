#include "base/status.h"

#include <c10/util/Exception.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace strata {

absl::Status StatusFromException(absl::string_view context,
                                 const std::exception& e) {
  std::string what;
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    what = c10_error->what_without_backtrace();
  } else {
    what = e.what();
  }
  absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(what);
  if (context.empty()) return absl::InternalError(trimmed);
  return absl::InternalError(absl::StrCat(context, ": ", trimmed));
}

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok() || context.empty()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

}  // namespace strata
