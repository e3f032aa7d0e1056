// The launcher: starts the ranks of one node of a data-parallel job as child
// processes, in the spirit of torchrun. Each rank gets the torchrun
// environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE) and per-rank thread limits
// (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS). The launcher
// streams the ranks' output line by line, and when one rank fails it stops
// the others.
//
// The `launch` binary (launcher_main.cc) is the command-line front end; other
// code (benchmarks, end-to-end tests) may call Launch() directly.

#ifndef STRATA_LAUNCH_LAUNCHER_H_
#define STRATA_LAUNCH_LAUNCHER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // allowed with nnodes == 1, since other nodes could not learn the port.
  int master_port = 29500;
  // OMP/OpenBLAS/MKL threads per rank. 0: an even share of this process's
  // CPUs (sched_getaffinity), at least 1.
  int num_threads_per_rank = 0;
  // When a rank fails (or the launcher gets SIGINT/SIGTERM), the surviving
  // ranks get a signal and, after this long, SIGKILL.
  absl::Duration stop_grace = absl::Seconds(10);
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
absl::Status ValidateLauncherOptions(const LauncherOptions& options);

// Spawns options.nproc_per_node ranks for this node, each in its own process
// group, forwards their stdout/stderr to this process's fd 1/2 (whole lines,
// optionally prefixed) and waits for all of them. Returns OK iff every rank
// exits with status 0.
//
// If a rank fails (non-zero exit or killed by a signal), the others get
// SIGTERM and, after options.stop_grace, SIGKILL; the returned error names the
// first failing rank, e.g. "rank 1 (local rank 1, pid 4242) was killed by
// signal 9 (Killed)" or "rank 0 (local rank 0, pid 17) exited with status 3".
// SIGINT/SIGTERM received by this process while Launch runs are forwarded to
// the ranks (a second one sends SIGKILL). ExitCodeFromStatus() maps the
// result to a shell exit code.
//
// Ranks read stdin from /dev/null (in their own process group, reading a
// terminal would stop them), and get SIGTERM if the launcher dies without
// stopping them (PR_SET_PDEATHSIG).
//
// Blocks until every rank has exited. At most one Launch may run in a process
// at a time (it owns the SIGINT/SIGTERM handlers while it runs); it is safe
// to call from any thread otherwise.
absl::Status Launch(const LauncherOptions& options);

// The exit code a command-line front end should return for Launch's result:
// 0 for OK, the failing rank's exit status if it exited non-zero, 128 +
// signal if it was killed by a signal, and 1 for any other error.
int ExitCodeFromStatus(const absl::Status& status);

// Options that re-launch the running binary (/proc/self/exe) as `nproc`
// ranks of a one-node job with `args` (its own command-line arguments, without
// argv[0]) on a free port: how a binary started by hand becomes a
// multi-process job ("train --nproc=2 ..."). Errors: the binary cannot be
// found, or nproc < 1 (naming --nproc).
absl::StatusOr<LauncherOptions> SelfLaunchOptions(
    int nproc, const std::vector<std::string>& args);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_LAUNCHER_H_
