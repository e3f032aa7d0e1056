// launch: starts the ranks of one node of a data-parallel job, like torchrun.
//
//   launch --nproc_per_node=2 -- bazel-bin/launch/train/train --model=gpt2
//
// Flags before the program belong to the launcher; everything from the
// program on is passed to the ranks unchanged ("--" is optional).

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/help_flags.h"
#include "launch/launcher.h"

DEFINE_int32(nproc_per_node, 1,
             "Number of ranks (processes) to start on this node.");
DEFINE_int32(nnodes, 1,
             "Number of nodes in the job; each node runs its own launcher.");
DEFINE_int32(node_rank, 0, "Index of this node, in [0, --nnodes).");
DEFINE_string(master_addr, "127.0.0.1",
              "Address of the node running rank 0, exported as MASTER_ADDR.");
DEFINE_int32(master_port, 29500,
             "Port of the rendezvous on --master_addr, exported as "
             "MASTER_PORT. 0 picks a free port (with --nnodes > 1 only with "
             "--max_restarts > 0: node 0 picks it each round).");
DEFINE_int32(threads_per_rank, 0,
             "OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS of each "
             "rank. 0: an even share of this process's CPUs, at least 1.");
DEFINE_double(stop_grace_s, 10,
              "When a rank fails or the launcher gets SIGINT/SIGTERM, seconds "
              "the other ranks get to exit before SIGKILL.");
DEFINE_double(heartbeat_timeout_s, 0,
              "When > 0, each rank beats on a pipe the launcher watches "
              "(train and the comm test worker do); a rank silent for this "
              "many seconds (stopped, frozen) is reported, gets SIGKILL and "
              "the job stops. 0: no heartbeat.");
DEFINE_double(heartbeat_startup_timeout_s, 120,
              "With --heartbeat_timeout_s: seconds a rank may take from its "
              "start to its first heartbeat.");
DEFINE_int32(max_restarts, 0,
             "As torchrun's: when a rank fails, stop the others and start all "
             "ranks again (TORCHELASTIC_RESTART_COUNT = the round; a fresh "
             "port per round with --master_port=0), up to this many times; "
             "then exit with the failure. 0: the first failure ends the job.");
DEFINE_string(rdzv_endpoint, "",
              "With --nnodes > 1 and --max_restarts > 0: host:port of the "
              "agent store where the nodes' launchers agree on restart rounds "
              "(as torchrun's c10d rendezvous); node 0's launcher serves it. "
              "Empty: --master_addr and --master_port + 1.");
DEFINE_double(rdzv_join_timeout_s, 120,
              "With the agent store (see --rdzv_endpoint): seconds a launcher "
              "waits to reach the store and for every node to join a round "
              "(or finish one); a node still missing then is named and the "
              "job fails.");
DEFINE_bool(prefix_output, true,
            "Prefix every line a rank prints with \"[rank<N>]: \".");

namespace {

constexpr char kUsage[] =
    "Starts the ranks of one node of a data-parallel job (like torchrun).\n"
    "Usage: launch [flags] [--] program [args...]\n"
    "Each rank gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, "
    "TORCHELASTIC_RESTART_COUNT\n"
    "and thread limits.";

// gflags moves positional arguments to the end and keeps parsing flags after
// them, so the program's own flags would be taken for the launcher's. This
// returns argv (null-terminated) with a "--" inserted before the first
// positional argument, which ends gflags' parsing there. A non-bool flag
// written "--name value" consumes the next argument.
std::vector<char*> SeparateCommand(int argc, char** argv) {
  static char kSeparator[] = "--";
  std::vector<char*> args(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') {
      args.insert(args.begin() + i, kSeparator);
      break;
    }
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    if (arg.find('=') != absl::string_view::npos) continue;
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(std::string(arg).c_str(), &info) &&
        info.type != "bool") {
      ++i;
    }
  }
  args.push_back(nullptr);
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;  // A launcher talks to its terminal.
  gflags::SetUsageMessage(kUsage);
  std::vector<char*> args = SeparateCommand(argc, argv);
  int num_args = static_cast<int>(args.size()) - 1;
  ::strata::NarrowHelp("launch/launcher_main", num_args,
                       args.data());  // --helpfull: all.
  char** remaining = args.data();
  gflags::ParseCommandLineFlags(&num_args, &remaining, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);

  // NaN and negative values are both rejected here, with the flag's name.
  if (!(FLAGS_stop_grace_s >= 0)) {
    LOG(ERROR) << "--stop_grace_s must be >= 0, got " << FLAGS_stop_grace_s;
    return 1;
  }
  strata::launch::LauncherOptions options;
  if (absl::Status s = strata::launch::SetHeartbeatFromFlags(
          FLAGS_heartbeat_timeout_s, FLAGS_heartbeat_startup_timeout_s,
          &options);
      !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }
  if (absl::Status s = strata::launch::SetRdzvEndpointFromFlag(
          FLAGS_rdzv_endpoint, &options);
      !s.ok()) {
    LOG(ERROR) << s.message();
    return 1;
  }
  if (!(FLAGS_rdzv_join_timeout_s > 0) ||
      std::isinf(FLAGS_rdzv_join_timeout_s)) {
    LOG(ERROR) << "--rdzv_join_timeout_s must be a finite number > 0, got "
               << FLAGS_rdzv_join_timeout_s;
    return 1;
  }
  options.rdzv_join_timeout = absl::Seconds(FLAGS_rdzv_join_timeout_s);
  options.nproc_per_node = FLAGS_nproc_per_node;
  options.nnodes = FLAGS_nnodes;
  options.node_rank = FLAGS_node_rank;
  options.master_addr = FLAGS_master_addr;
  options.master_port = FLAGS_master_port;
  options.num_threads_per_rank = FLAGS_threads_per_rank;
  options.stop_grace = std::isinf(FLAGS_stop_grace_s)
                           ? absl::InfiniteDuration()
                           : absl::Seconds(FLAGS_stop_grace_s);
  options.prefix_output = FLAGS_prefix_output;
  options.max_restarts = FLAGS_max_restarts;
  options.command.assign(remaining + 1, remaining + num_args);

  absl::Status status = strata::launch::ValidateLauncherOptions(options);
  if (!status.ok()) {
    LOG(ERROR) << status.message();
    return 1;
  }
  status = strata::launch::Launch(options);
  if (!status.ok()) {
    LOG(ERROR) << status.message();
    return strata::launch::ExitCodeFromStatus(status);
  }
  return 0;
}
