#include "launch/train/train_flags.h"

#include <gflags/gflags.h>
#include <sched.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_io.h"
#include "base/status.h"
#include "comm/environment.h"
#include "launch/config/train_gflags.h"
#include "launch/deepspeed/deepspeed_config.h"
#include "launch/deepspeed/deepspeed_options.h"

// The flags of the binary itself; the flags of TrainOptions come from the
// table (launch/config/train_flag_table.h) and are registered below.
DEFINE_int32(collective_timeout_s, 600,
             "How long a collective may wait for the other ranks.");
DEFINE_bool(debug_collectives, false,
            "Check every collective's sizes and dtypes across ranks first "
            "(clear errors instead of Gloo aborts; one extra small "
            "all-gather per collective).");
DEFINE_string(deepspeed_config, "",
              "A DeepSpeed config (JSON) mapped onto these flags, as "
              "mmengine's DeepSpeedStrategy passes it to DeepSpeed: batch "
              "sizes, ZeRO stage -> --strategy, bf16, optimizer, scheduler, "
              "clipping, activation checkpointing, ... (README.md, "
              "\"DeepSpeed configs\"). Flags given explicitly override it "
              "(logged). A relative path is tried from the working "
              "directory, then from where `bazel run` was started.");

DEFINE_int32(nproc, 1,
             "Ranks to train with on this machine. With > 1 and no rank "
             "environment (torchrun, launch, Slurm, Open MPI), train "
             "re-launches itself through the launcher as --nproc ranks "
             "(threads split evenly between them) and waits for them; e.g. "
             "--nproc=2 --strategy=fsdp.");
DEFINE_int32(max_restarts, 0,
             "With --nproc > 1 (train starts its own ranks): when a rank "
             "fails, stop the others and restart all ranks, up to this many "
             "times (torchrun's --max_restarts); pair it with --save_every "
             "and --resume=auto so that each round continues from the newest "
             "valid checkpoint. 0: the first failure ends the run.");

DEFINE_double(heartbeat_timeout_s, 0,
              "With --nproc > 1 (train starts its own ranks): every rank "
              "beats on a pipe; one silent this long (stopped, frozen) is "
              "reported with its process state and the job stops, as "
              "launch's --heartbeat_timeout_s. 0: no heartbeat.");
DEFINE_double(heartbeat_startup_timeout_s, 120,
              "With --heartbeat_timeout_s: seconds a rank may take from its "
              "start to its first heartbeat.");

namespace strata::launch {
namespace {

// The flags of TrainOptions, from the table, as defined in this file (so
// that --help, ExplicitTrainFlags and TrainFlagsSummary list them with the
// binary's own).
const bool kTrainFlagsRegistered = [] {
  RegisterTrainFlags(__FILE__);
  return true;
}();

// --threads=0: OMP_NUM_THREADS when set (the launcher sets it per rank), else
// every CPU this process may run on.
int DefaultThreads(const comm::EnvLookup& env) {
  const std::optional<std::string> omp = env("OMP_NUM_THREADS");
  int from_env = 0;
  if (omp.has_value() && absl::SimpleAtoi(*omp, &from_env) && from_env > 0) {
    return from_env;
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0
             ? std::max(1, CPU_COUNT(&cpus))
             : 1;
}

// An empty --output_dir: under `bazel run` the working directory is the
// runfiles tree; write where the user started.
std::string DefaultOutputDir(const comm::EnvLookup& env) {
  const std::optional<std::string> cwd = env("BUILD_WORKING_DIRECTORY");
  return absl::StrCat(cwd.has_value() ? *cwd : ".", "/",
                      TrainOptions().output_dir);
}

// The flags of this file given on the command line (or in a --flagfile),
// --deepspeed_config aside: the ones that override the config.
std::set<std::string> ExplicitTrainFlags() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::set<std::string> given;
  for (const auto& f : flags) {
    if (f.filename.find("launch/train/train_flags.cc") == std::string::npos)
      continue;
    if (!f.is_default && f.name != "deepspeed_config") given.insert(f.name);
  }
  return given;
}

// The world the run will have: the launcher's (or torchrun's, srun's,
// mpirun's) world size, else --nproc (train re-launches itself as that
// many ranks).
absl::StatusOr<int> WorldSize(const comm::EnvLookup& env) {
  STRATA_ASSIGN_OR_RETURN(const comm::RendezvousInfo world,
                          comm::RendezvousInfoFromEnv(env));
  return world.source == "single-process" ? FLAGS_nproc : world.world_size;
}

// --deepspeed_config's file: as given, else (relative) under the directory
// `bazel run` was started in.
absl::StatusOr<std::string> ReadDeepSpeedConfig(const comm::EnvLookup& env) {
  const std::string& path = FLAGS_deepspeed_config;
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  const std::optional<std::string> cwd = env("BUILD_WORKING_DIRECTORY");
  if (!text.ok() && absl::IsNotFound(text.status()) && !path.empty() &&
      path[0] != '/' && cwd.has_value()) {
    absl::StatusOr<std::string> there =
        ReadWholeFile(absl::StrCat(*cwd, "/", path));
    if (there.ok() || !absl::IsNotFound(there.status())) return there;
    return absl::NotFoundError(absl::StrCat(
        "no such file here or under ", *cwd,
        " (where bazel run was started): ", text.status().message()));
  }
  return text;
}

absl::Status ApplyDeepSpeedFlag(const comm::EnvLookup& env, TrainOptions* o,
                                std::vector<std::string>* notes) {
  STRATA_ASSIGN_OR_RETURN(const std::string text, ReadDeepSpeedConfig(env));
  STRATA_ASSIGN_OR_RETURN(const DeepSpeedConfig config,
                          ParseDeepSpeedConfig(text, FLAGS_deepspeed_config));
  STRATA_ASSIGN_OR_RETURN(const int world_size, WorldSize(env));
  std::vector<std::string> lines;
  STRATA_RETURN_IF_ERROR(ApplyDeepSpeedConfig(config, world_size,
                                              ExplicitTrainFlags(), o, &lines));
  if (notes != nullptr) {
    for (std::string& line : lines) {
      notes->push_back(absl::StrCat("--deepspeed_config: ", line));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainOptions> TrainOptionsFromFlags(
    const comm::EnvLookup& env, std::vector<std::string>* notes) {
  STRATA_ASSIGN_OR_RETURN(TrainOptions o, TrainOptionsFromRegisteredFlags());
  if (o.threads == 0) o.threads = DefaultThreads(env);
  if (o.output_dir.empty()) o.output_dir = DefaultOutputDir(env);
  if (!FLAGS_deepspeed_config.empty()) {
    STRATA_RETURN_IF_ERROR(
        Annotate(ApplyDeepSpeedFlag(env, &o, notes),
                 absl::StrCat("--deepspeed_config=", FLAGS_deepspeed_config)));
  }
  return o;
}

std::string TrainFlagsSummary() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);  // Sorted by file, then name.
  std::string summary;
  for (const auto& f : flags) {
    if (f.filename.find("launch/train/train_flags.cc") == std::string::npos)
      continue;
    std::string value = f.current_value;
    double number = 0;
    if (f.type == "double" && absl::SimpleAtod(value, &number)) {
      value = absl::StrFormat("%g", number);
    }
    absl::StrAppend(&summary, " --", f.name, "=", value);
  }
  return summary;
}

}  // namespace strata::launch
