// Self-launch: how a binary started by hand ("train --nproc=2 ...", a
// benchmark) becomes a multi-process job. Without a rank environment it
// re-runs itself (/proc/self/exe) through the launcher (launch/launcher.h) as
// --nproc ranks of a one-node job on a free port and waits for them; each of
// those ranks, or a process started by the launch binary, torchrun, srun or
// mpirun, reads its place in the world from the environment and runs as a
// rank.
//
//   int main(int argc, char** argv) {
//     const std::vector<std::string> args(argv + 1, argv + argc);
//     gflags::ParseCommandLineFlags(&argc, &argv, true);
//     SelfLaunchSpec spec;
//     spec.nproc = FLAGS_nproc;
//     spec.args = args;
//     return RunSelfLaunchedOrRank(spec, [](const comm::RendezvousInfo& w) {
//       return RunRank(w);  // e.g. comm::ConnectWorld(w, ...), then work.
//     });
//   }
#ifndef STRATA_LAUNCH_SELF_LAUNCH_H_
#define STRATA_LAUNCH_SELF_LAUNCH_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/environment.h"
#include "launch/launcher.h"

namespace strata::launch {

// Options that re-launch the running binary (/proc/self/exe) as `nproc`
// ranks of a one-node job with `args` (its own command-line arguments, without
// argv[0]) on a free port. Errors: the binary cannot be found, or nproc < 1
// (naming --nproc).
absl::StatusOr<LauncherOptions> SelfLaunchOptions(
    int nproc, const std::vector<std::string>& args);

// Whether a process in `world` that was asked for `nproc` ranks starts them
// itself: only without a rank environment (world.source "single-process")
// and with nproc > 1. A process a launcher started never launches again.
bool ShouldSelfLaunch(const comm::RendezvousInfo& world, int nproc);

struct SelfLaunchSpec {
  int nproc = 1;                  // Ranks to start (--nproc).
  std::vector<std::string> args;  // This process's arguments, no argv[0].
  // LauncherOptions' fields of the same names.
  bool prefix_output = true;
  int num_threads_per_rank = 0;
  int max_restarts = 0;
  // --heartbeat_timeout_s / --heartbeat_startup_timeout_s
  // (SetHeartbeatFromFlags); 0: no heartbeat.
  double heartbeat_timeout_s = 0;
  double heartbeat_startup_timeout_s = 120;
};

// Re-launches this binary as spec.nproc ranks with spec.args and waits for
// them. Returns the exit code for main (ExitCodeFromStatus); failures are
// logged (glog ERROR). Blocks; at most one launch per process at a time.
int LaunchSelf(const SelfLaunchSpec& spec);

// A rank's work: returns main's exit code.
using RankMain = std::function<int(const comm::RendezvousInfo& world)>;

// The start of a binary that runs on several ranks. When
// ShouldSelfLaunch(world, spec.nproc), launches itself (LaunchSelf) and
// returns the launcher's exit code; otherwise returns run_rank(world) (a
// single-process world too). Called once, from main, after flag parsing.
int RunSelfLaunchedOrRank(const comm::RendezvousInfo& world,
                          const SelfLaunchSpec& spec, const RankMain& run_rank);

// As above with the world read from this process's rank environment
// (comm::RendezvousInfoFromEnv(comm::ProcessEnv())); an unreadable one is
// logged and returns 1.
int RunSelfLaunchedOrRank(const SelfLaunchSpec& spec, const RankMain& run_rank);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_SELF_LAUNCH_H_
