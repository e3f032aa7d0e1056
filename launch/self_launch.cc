#include "launch/self_launch.h"

#include <glog/logging.h>

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace strata::launch {

absl::StatusOr<LauncherOptions> SelfLaunchOptions(
    int nproc, const std::vector<std::string>& args) {
  if (nproc < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nproc must be >= 1, got ", nproc));
  }
  std::error_code error;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(absl::StrCat(
        "cannot find this binary via /proc/self/exe: ", error.message()));
  }
  LauncherOptions options;
  options.nproc_per_node = nproc;
  options.master_port = 0;  // A free port.
  options.command.push_back(self.string());
  options.command.insert(options.command.end(), args.begin(), args.end());
  return options;
}

bool ShouldSelfLaunch(const comm::RendezvousInfo& world, int nproc) {
  return world.source == "single-process" && nproc > 1;
}

int LaunchSelf(const SelfLaunchSpec& spec) {
  absl::StatusOr<LauncherOptions> options =
      SelfLaunchOptions(spec.nproc, spec.args);
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 1;
  }
  options->prefix_output = spec.prefix_output;
  options->num_threads_per_rank = spec.num_threads_per_rank;
  options->max_restarts = spec.max_restarts;
  if (absl::Status s =
          SetHeartbeatFromFlags(spec.heartbeat_timeout_s,
                                spec.heartbeat_startup_timeout_s, &*options);
      !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }
  LOG(INFO) << "starting " << spec.nproc << " ranks through the launcher"
            << (spec.prefix_output ? " (rank output prefixed [rankN]:)" : "");
  const absl::Status status = Launch(*options);
  if (!status.ok()) LOG(ERROR) << status.message();
  return ExitCodeFromStatus(status);
}

int RunSelfLaunchedOrRank(const comm::RendezvousInfo& world,
                          const SelfLaunchSpec& spec,
                          const RankMain& run_rank) {
  if (ShouldSelfLaunch(world, spec.nproc)) return LaunchSelf(spec);
  return run_rank(world);
}

int RunSelfLaunchedOrRank(const SelfLaunchSpec& spec,
                          const RankMain& run_rank) {
  const absl::StatusOr<comm::RendezvousInfo> world =
      comm::RendezvousInfoFromEnv(comm::ProcessEnv());
  if (!world.ok()) {
    LOG(ERROR) << world.status().message();
    return 1;
  }
  return RunSelfLaunchedOrRank(*world, spec, run_rank);
}

}  // namespace strata::launch
