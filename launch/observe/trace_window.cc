#include "launch/observe/trace_window.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata::launch {

absl::StatusOr<std::optional<TraceWindow>> ParseTraceSteps(
    absl::string_view value) {
  if (value.empty()) return std::nullopt;
  const auto error = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace_steps: expected FIRST:LAST, two step numbers "
                     "with 1 <= FIRST <= LAST (steps count from 1, both "
                     "traced), got '",
                     value, "'", why.empty() ? "" : ": ", why));
  };
  const std::vector<absl::string_view> parts = absl::StrSplit(value, ':');
  TraceWindow window;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &window.first_step) ||
      !absl::SimpleAtoi(parts[1], &window.last_step)) {
    return error("");
  }
  if (window.first_step < 1) return error("FIRST must be >= 1");
  if (window.last_step < window.first_step) {
    return error("LAST is before FIRST");
  }
  return window;
}

absl::Status ValidateTraceFlags(absl::string_view trace_steps,
                                absl::string_view trace_dir) {
  const absl::StatusOr<std::optional<TraceWindow>> window =
      ParseTraceSteps(trace_steps);
  if (!window.ok()) return window.status();
  if (window->has_value() && trace_dir.empty()) {
    return absl::InvalidArgumentError(
        "--trace_dir: required with --trace_steps (the directory for "
        "trace.json)");
  }
  if (!window->has_value() && !trace_dir.empty()) {
    return absl::InvalidArgumentError(
        "--trace_steps: required with --trace_dir (which steps to record, "
        "FIRST:LAST)");
  }
  return absl::OkStatus();
}

}  // namespace strata::launch
