// The command-line flags of //launch/train:train and their translation into
// TrainOptions. Only the train binary and its tests link this library. The
// flags of TrainOptions are registered from the table
// launch/config/train_flag_table.h (one line per option: name, field, help;
// the default is the field's) through launch/config/train_gflags.h; the
// binary's own flags (--nproc, --deepspeed_config, ...) are defined here.
// Besides these two libraries only the binaries' *_main.cc files define
// gflags.
//
// Flags only tests use (the table's TestHook lines, e.g.
// --ckpt_test_pause_ms) get gflags' kStrippedFlagHelp, so that
// `train --help` does not list them.
#ifndef STRATA_LAUNCH_TRAIN_TRAIN_FLAGS_H_
#define STRATA_LAUNCH_TRAIN_TRAIN_FLAGS_H_

#include <gflags/gflags.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/environment.h"
#include "launch/config/train_options.h"

// Flags of the binary itself rather than of TrainOptions.
DECLARE_int32(nproc);
DECLARE_int32(max_restarts);
DECLARE_double(heartbeat_timeout_s);
DECLARE_double(heartbeat_startup_timeout_s);
DECLARE_int32(collective_timeout_s);
DECLARE_bool(debug_collectives);

namespace strata::launch {

// TrainOptions from the current flag values; call after gflags parsed the
// command line. --threads=0 resolves through OMP_NUM_THREADS in `env` (else
// this process's CPU affinity), an empty --output_dir to out/train under
// BUILD_WORKING_DIRECTORY in `env` (where `bazel run` was started; else the
// working directory). With --deepspeed_config, the file is read (a relative
// path from the working directory, else from BUILD_WORKING_DIRECTORY),
// parsed and applied for the world of the rank environment in `env` (else
// --nproc ranks), flags given explicitly winning
// (launch/deepspeed/deepspeed_options.h); what it set and overrode is appended
// to `notes` (may be null), one line each, for the caller to log. Errors: an
// enumerated or dtype flag (--data, --strategy, --optimizer, --lr_schedule,
// --ckpt_format, --precision, --fsdp_sharding, --fsdp_backward_prefetch,
// --param_dtype, ...) with a value it does not
// accept, naming the flag and the accepted values; a DeepSpeed config that
// is missing, unreadable or rejected, naming --deepspeed_config, the path
// and the key. Other checks are ValidateTrainOptions'.
absl::StatusOr<TrainOptions> TrainOptionsFromFlags(
    const comm::EnvLookup& env, std::vector<std::string>* notes = nullptr);

// " --<name>=<value>" for every flag defined in train_flags.cc (test hooks
// included), in name order, doubles as %g: the start-up "flags:" line.
std::string TrainFlagsSummary();

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_TRAIN_FLAGS_H_
