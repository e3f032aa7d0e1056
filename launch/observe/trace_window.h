// train --trace_steps=A:B and --trace_dir: which steps the timeline trace
// records (launch/observe/trace_session.h).
#ifndef STRATA_LAUNCH_OBSERVE_TRACE_WINDOW_H_
#define STRATA_LAUNCH_OBSERVE_TRACE_WINDOW_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::launch {

// Steps first..last, inclusive, numbered from 1 as the progress lines
// number them.
struct TraceWindow {
  int64_t first_step = 0;
  int64_t last_step = 0;
};

// "" -> no window; "A:B" with 1 <= A <= B -> the window. Anything else is
// InvalidArgument naming --trace_steps and the expected form.
absl::StatusOr<std::optional<TraceWindow>> ParseTraceSteps(
    absl::string_view value);

// Both flags or neither: a window needs a directory and a directory needs a
// window. Errors name the flag.
absl::Status ValidateTraceFlags(absl::string_view trace_steps,
                                absl::string_view trace_dir);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_OBSERVE_TRACE_WINDOW_H_
