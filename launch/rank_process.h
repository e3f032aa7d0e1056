// One rank the launcher started: its bookkeeping, the code that runs in the
// forked child until exec, and how its exit is described. Internal to
// launch/.
#ifndef STRATA_LAUNCH_RANK_PROCESS_H_
#define STRATA_LAUNCH_RANK_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "launch/fds.h"
#include "launch/launcher_options.h"

namespace strata::launch {

struct RankProcess {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  bool running = false;
  // waitpid status, valid once !running.
  int wait_status = 0;
  // Set if the child could not exec the program.
  std::string exec_error;
  // The read end of the rank's heartbeat pipe (with --heartbeat_timeout_s),
  // until EOF; when the last beat (or the spawn) was, and whether one came.
  ScopedFd heartbeat;
  absl::Time last_beat;
  bool beat_seen = false;
  // Set when the launcher SIGKILLed it without the grace period, with why.
  bool force_killed = false;
  std::string cause;
};

// What the forked child needs; everything is built before fork (the child
// of a possibly multi-threaded process may not allocate).
struct ExecRankArgs {
  pid_t launcher_pid = -1;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // The child writes its errno here if exec fails (close-on-exec otherwise).
  int exec_status_fd = -1;
  // Kept open across exec when >= 0.
  int heartbeat_fd = -1;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// Runs in the forked child: only async-signal-safe calls until exec. Puts
// the child in its own process group, asks for SIGTERM when the launcher
// dies, resets SIGPIPE and the signal mask, wires stdio and execs; if exec
// fails, reports "cannot execute '<program>': <reason>" and exits 127
// (ENOENT) or 126.
[[noreturn]] void ExecRank(const ExecRankArgs& args);

bool Succeeded(const RankProcess& process);

// " exited with status 3", " was killed by signal 9 (Killed)", or "".
std::string Outcome(const RankProcess& process);

// "rank 1 (local rank 1, pid 4242)".
std::string RankName(const RankProcess& process);

// The shell exit code of a failed rank: its status, or 128 + its signal.
int ExitCodeOf(const RankProcess& process);

// How often ranks beat with options.heartbeat_timeout: a quarter of it, so
// that a late beat or two is no failure (at least 1 ms).
int64_t HeartbeatIntervalMs(const LauncherOptions& options);

// The launcher's environment (environ) with the torchrun and thread
// variables of `local_rank` in `restart_round`, the heartbeat pipe's fd (if
// >= 0) and options.extra_env, as "KEY=VALUE" strings.
std::vector<std::string> RankEnvironment(const LauncherOptions& options,
                                         int master_port, int restart_round,
                                         int num_threads_per_rank,
                                         int local_rank, int heartbeat_fd);

// The process state for messages: "T (stopped)", or why it is unknown.
std::string StateOf(const RankProcess& process);

// SIGKILLs a rank at once (its process group, else the process) and records
// why.
void ForceKill(RankProcess& process, std::string cause);

// Takes the beats that arrived on the rank's heartbeat pipe; EOF (the rank
// closed it or exited) ends the watching.
void ReadHeartbeat(RankProcess& process);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_RANK_PROCESS_H_
