// The options of one node's launcher (launch/launcher.h) and their checks.
#ifndef STRATA_LAUNCH_LAUNCHER_OPTIONS_H_
#define STRATA_LAUNCH_LAUNCHER_OPTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace strata::launch {

struct LauncherOptions {
  // Ranks started on this node.
  int nproc_per_node = 1;
  // Nodes in the job; every node runs its own launcher with its node_rank.
  int nnodes = 1;
  // This node's index in [0, nnodes).
  int node_rank = 0;
  // Address and port of the rendezvous (rank 0's store), exported to ranks.
  std::string master_addr = "127.0.0.1";
  // 0: pick a free port on this machine (bind port 0, read it back). Only
  // allowed with nnodes == 1, since other nodes could not learn the port,
  // or with the agent store (UsesAgentStore), where node 0 picks it each
  // round and the others read it there.
  int master_port = 29500;
  // OMP/OpenBLAS/MKL threads per rank. 0: an even share of this process's
  // CPUs (sched_getaffinity), at least 1.
  int num_threads_per_rank = 0;
  // When a rank fails (or the launcher gets SIGINT/SIGTERM), the surviving
  // ranks get a signal and, after this long, SIGKILL.
  absl::Duration stop_grace = absl::Seconds(10);
  // When positive, every rank gets a heartbeat pipe (STRATA_HEARTBEAT_FD,
  // STRATA_HEARTBEAT_INTERVAL_MS = a quarter of this) to beat on
  // (base/heartbeat.h); a rank that sends no beat for this long — stopped,
  // frozen, or a program that does not beat — is reported, gets SIGKILL and
  // the job stops. Zero: no heartbeat.
  absl::Duration heartbeat_timeout = absl::ZeroDuration();
  // With heartbeat_timeout: how long a rank may take from its start to its
  // first beat (loading LibTorch and the data takes a while).
  absl::Duration heartbeat_startup_timeout = absl::Seconds(120);
  // torchrun's --max_restarts: when a rank fails, the launcher stops the
  // others and starts every rank again (a new rendezvous round, with
  // TORCHELASTIC_RESTART_COUNT set to the round), up to this many times.
  // 0: the first failure ends the job.
  int max_restarts = 0;
  // With nnodes > 1 and max_restarts > 0 (UsesAgentStore), the launchers
  // agree on restart rounds through an agent c10d TCPStore that node 0's
  // launcher serves at rdzv_host:rdzv_port (torchrun's --rdzv_endpoint;
  // launch/node_rounds.h). Empty host: master_addr; port 0: master_port + 1.
  std::string rdzv_host;
  int rdzv_port = 0;
  // How long a launcher waits for the agent store and for every node to
  // join a round (or finish one); a node missing then is named.
  absl::Duration rdzv_join_timeout = absl::Seconds(120);
  // Prefix each output line with "[rank<global rank>]: ".
  bool prefix_output = true;
  // Program and its arguments; the program is searched on PATH if it has no
  // '/'.
  std::vector<std::string> command;
  // Exported to every rank after the thread limits, so it may override
  // OMP_NUM_THREADS and friends, but not the rendezvous variables.
  std::vector<std::pair<std::string, std::string>> extra_env;
};

// Checks `options` without side effects. Error messages name the option by
// the `launch` binary's flag, e.g. "--nproc_per_node must be >= 1, got 0".
// Sets options->heartbeat_timeout and heartbeat_startup_timeout from the
// flags --heartbeat_timeout_s (finite, >= 0; 0: no heartbeat) and
// --heartbeat_startup_timeout_s (finite, > 0), shared by `launch` and
// `train --nproc`; InvalidArgument naming the flag otherwise (NaN too).
absl::Status SetHeartbeatFromFlags(double heartbeat_timeout_s,
                                   double heartbeat_startup_timeout_s,
                                   LauncherOptions* options);

absl::Status ValidateLauncherOptions(const LauncherOptions& options);

// Whether the launchers of this job agree on rounds through the agent store:
// nnodes > 1 and max_restarts > 0.
bool UsesAgentStore(const LauncherOptions& options);

// The agent store's host and port after the defaults (see rdzv_host).
std::string AgentStoreHost(const LauncherOptions& options);
int AgentStorePort(const LauncherOptions& options);

// Sets options->rdzv_host and rdzv_port from --rdzv_endpoint "host:port"
// ("" keeps the defaults); InvalidArgument naming the flag otherwise.
absl::Status SetRdzvEndpointFromFlag(const std::string& endpoint,
                                     LauncherOptions* options);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_LAUNCHER_OPTIONS_H_
