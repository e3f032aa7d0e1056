// The train flag table (launch/config/train_flag_table.h) as gflags flags:
// registered from the table and read back into TrainOptions. Only binaries
// that take train's flags link this (//launch/train:train through
// launch/train/train_flags, and //launch/plan:strata_plan), so that one flag
// means one thing in every binary; libraries take TrainOptions.
#ifndef STRATA_LAUNCH_CONFIG_TRAIN_GFLAGS_H_
#define STRATA_LAUNCH_CONFIG_TRAIN_GFLAGS_H_

#include "absl/status/statusor.h"
#include "launch/config/train_options.h"

namespace strata::launch {

// Registers one gflags flag per line of the table, its default the field's in
// TrainFlagDefaults(), recorded as defined in `file` (a source path, e.g.
// __FILE__ of the binary's flags file: gflags' --helpmatch, which --help
// becomes (base/help_flags.h), and flag listings select flags by it). A test
// hook's help is gflags' kStrippedFlagHelp, the marker gflags' usage
// reporting treats as "pretend the flag does not exist": it parses but never
// shows in --help. Call once per process, before gflags parses the command
// line: at static initialisation (as DEFINE_* registers) or first in main().
// Not thread-safe.
void RegisterTrainFlags(const char* file);

// TrainOptions from the current values of the registered flags (after gflags
// parsed the command line). Errors: the first enumerated flag whose value does
// not parse, naming the flag and its accepted values. Nothing is resolved
// (an empty --output_dir stays empty; --threads=0 stays 0). Call after
// RegisterTrainFlags, from one thread at a time.
absl::StatusOr<TrainOptions> TrainOptionsFromRegisteredFlags();

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_CONFIG_TRAIN_GFLAGS_H_
