// The launcher: starts the ranks of one node of a data-parallel job as child
// processes, in the spirit of torchrun. Each rank gets the torchrun
// environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE) and per-rank thread limits
// (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS), and torchrun's
// TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_MAX_RESTARTS. The launcher
// streams the ranks' output line by line, and when one rank fails it stops
// the others.
//
// The `launch` binary (launcher_main.cc) is the command-line front end; other
// code (end-to-end tests) may call Launch() directly, and binaries that start
// their own ranks use launch/self_launch.h. The options and their checks are
// in launch/launcher_options.h.

#ifndef STRATA_LAUNCH_LAUNCHER_H_
#define STRATA_LAUNCH_LAUNCHER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launch/launcher_options.h"

namespace strata::launch {

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
// With options.max_restarts = K > 0, a rank's failure (not the launcher's
// own, not a program that cannot be executed, not a SIGINT/SIGTERM to the
// launcher) is logged as "restart 1/K: rank 1 (pid 1234) was killed by
// signal 9 (Killed); restarting all 2 ranks" once every rank has stopped,
// and every rank starts again with the same environment plus
// TORCHELASTIC_RESTART_COUNT = the round (1..K; 0 at first) and a fresh
// port if options.master_port is 0. After K restarts the next failure is
// returned as above.
//
// With options.nnodes > 1 and max_restarts > 0 (UsesAgentStore) the
// launchers of the job agree on the rounds through the agent store node 0's
// launcher serves (launch/node_rounds.h): each round starts once every node
// joined it (else DeadlineExceeded naming the missing nodes); the first
// failure on any node stops every node's ranks and is logged by each as
// "restart 1/K: node 1 rank 3 (pid 1234) was killed by signal 9 (Killed);
// restarting all 4 ranks on 2 nodes"; the K restarts are the job's, and
// every node ends with the same error ("restarts exhausted
// (--max_restarts=K, counted for all 2 nodes): restart round K failed: ...")
// and the failing rank's exit code. A lost store is Unavailable naming it.
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

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_LAUNCHER_H_
