// The one form of a bad-flag error: InvalidArgument "--<flag>: <what>", so
// that every binary names the flag it refuses the same way (the train
// binary's options, its test-fault flags, strata_plan, strata_generate).
// Pure; callable from any thread.
#ifndef STRATA_LAUNCH_CONFIG_FLAG_ERROR_H_
#define STRATA_LAUNCH_CONFIG_FLAG_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace strata::launch {

// InvalidArgument "--<flag>: <what>"; `flag` without its dashes.
absl::Status FlagError(absl::string_view flag, absl::string_view what);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_CONFIG_FLAG_ERROR_H_
