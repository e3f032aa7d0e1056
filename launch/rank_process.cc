#include "launch/rank_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "launch/process_state.h"
#include "launch/signal_capture.h"

extern char** environ;

namespace strata::launch {
namespace {

// Set by the launcher for each rank; extra_env may override them.
constexpr const char* kThreadVars[] = {
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"};

}  // namespace

[[noreturn]] void ExecRank(const ExecRankArgs& args) {
  setpgid(0, 0);
  // If the launcher dies without stopping the ranks (SIGKILL), they get
  // SIGTERM; and if it died already, this one does not start.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != args.launcher_pid) _exit(128 + SIGTERM);
  // Ranks start with default SIGPIPE and nothing blocked, whatever the
  // calling thread had.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(SIGPIPE, &default_action, nullptr);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  sigprocmask(SIG_SETMASK, &no_signals, nullptr);

  int error = 0;
  // The heartbeat pipe's write end stays open across exec (its number is in
  // STRATA_HEARTBEAT_FD).
  if ((args.heartbeat_fd >= 0 && fcntl(args.heartbeat_fd, F_SETFD, 0) != 0) ||
      dup2(args.stdin_fd, STDIN_FILENO) < 0 ||
      dup2(args.stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(args.stderr_fd, STDERR_FILENO) < 0) {
    error = errno;
  } else {
    execvpe(args.argv[0], args.argv, args.envp);
    error = errno;
  }
  // "cannot execute '<program>': <reason>\n", built without allocating.
  char message[1024];
  size_t length = 0;
  auto append = [&](const char* text) {
    while (*text != '\0' && length < sizeof(message) - 1) {
      message[length++] = *text++;
    }
  };
  const char* reason = strerrordesc_np(error);
  append("cannot execute '");
  append(args.argv[0]);
  append("': ");
  append(reason != nullptr ? reason : "unknown error");
  append("\n");
  [[maybe_unused]] ssize_t ignored = write(STDERR_FILENO, message, length);
  ignored = write(args.exec_status_fd, &error, sizeof(error));
  _exit(error == ENOENT ? 127 : 126);
}

bool Succeeded(const RankProcess& process) {
  return WIFEXITED(process.wait_status) &&
         WEXITSTATUS(process.wait_status) == 0;
}

std::string Outcome(const RankProcess& process) {
  if (WIFEXITED(process.wait_status)) {
    return absl::StrCat(" exited with status ",
                        WEXITSTATUS(process.wait_status));
  }
  if (WIFSIGNALED(process.wait_status)) {
    return absl::StrCat(" was killed by ",
                        SignalText(WTERMSIG(process.wait_status)),
                        WCOREDUMP(process.wait_status) ? " (core dumped)" : "");
  }
  return "";
}

std::string RankName(const RankProcess& process) {
  return absl::StrCat("rank ", process.rank, " (local rank ",
                      process.local_rank, ", pid ", process.pid, ")");
}

int ExitCodeOf(const RankProcess& process) {
  return WIFEXITED(process.wait_status) ? WEXITSTATUS(process.wait_status)
                                        : 128 + WTERMSIG(process.wait_status);
}

int64_t HeartbeatIntervalMs(const LauncherOptions& options) {
  return std::max<int64_t>(
      1, absl::ToInt64Milliseconds(options.heartbeat_timeout / 4));
}

std::vector<std::string> RankEnvironment(const LauncherOptions& options,
                                         int master_port, int restart_round,
                                         int num_threads_per_rank,
                                         int local_rank, int heartbeat_fd) {
  const int world_size = options.nnodes * options.nproc_per_node;
  const int rank = options.node_rank * options.nproc_per_node + local_rank;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", absl::StrCat(master_port)},
      {"RANK", absl::StrCat(rank)},
      {"WORLD_SIZE", absl::StrCat(world_size)},
      {"LOCAL_RANK", absl::StrCat(local_rank)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(options.nproc_per_node)},
      {"GROUP_RANK", absl::StrCat(options.node_rank)},
      {"GROUP_WORLD_SIZE", absl::StrCat(options.nnodes)},
      // As torchrun: the round (0 for the first start) and the limit.
      {"TORCHELASTIC_RESTART_COUNT", absl::StrCat(restart_round)},
      {"TORCHELASTIC_MAX_RESTARTS", absl::StrCat(options.max_restarts)},
  };
  if (heartbeat_fd >= 0) {
    vars.emplace_back("STRATA_HEARTBEAT_FD", absl::StrCat(heartbeat_fd));
    vars.emplace_back("STRATA_HEARTBEAT_INTERVAL_MS",
                      absl::StrCat(HeartbeatIntervalMs(options)));
  }
  absl::flat_hash_set<std::string> extra_keys;
  for (const auto& [key, value] : options.extra_env) extra_keys.insert(key);
  for (const char* key : kThreadVars) {
    if (!extra_keys.contains(key)) {
      vars.emplace_back(key, absl::StrCat(num_threads_per_rank));
    }
  }
  vars.insert(vars.end(), options.extra_env.begin(), options.extra_env.end());

  absl::flat_hash_set<std::string> set_keys;
  for (const auto& [key, value] : vars) set_keys.insert(key);
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const absl::string_view key_value(*entry);
    if (!set_keys.contains(key_value.substr(0, key_value.find('=')))) {
      env.emplace_back(key_value);
    }
  }
  for (const auto& [key, value] : vars) {
    env.push_back(absl::StrCat(key, "=", value));
  }
  return env;
}

std::string StateOf(const RankProcess& process) {
  absl::StatusOr<char> state = ProcessState(process.pid);
  return state.ok() ? DescribeProcessState(*state)
                    : std::string(state.status().message());
}

void ForceKill(RankProcess& process, std::string cause) {
  if (kill(-process.pid, SIGKILL) != 0) kill(process.pid, SIGKILL);
  process.force_killed = true;
  process.cause = std::move(cause);
}

void ReadHeartbeat(RankProcess& process) {
  char bytes[256];
  while (true) {
    const ssize_t n = read(process.heartbeat.get(), bytes, sizeof(bytes));
    if (n > 0) {
      process.last_beat = absl::Now();
      process.beat_seen = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || errno != EAGAIN) process.heartbeat.reset();
    return;
  }
}

}  // namespace strata::launch
