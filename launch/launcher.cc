#include "launch/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "launch/fds.h"
#include "launch/process_state.h"

extern char** environ;

namespace strata::launch {
namespace {

// Launch() attaches the shell exit code of a failed rank to its error.
constexpr char kExitCodePayloadUrl[] =
    "type.googleapis.com/strata.launch.ExitCode";
// How often the supervisor checks for exited ranks while waiting for output.
constexpr int kReapIntervalMs = 10;
// After every rank has exited, output is drained until every pipe is closed
// or none has had data for this long (a grandchild may hold a pipe open).
constexpr int kDrainIdleMs = 100;

// Set by the launcher for each rank; extra_env may override them.
constexpr const char* kThreadVars[] = {
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"};

std::string SignalText(int signo) {
  const char* text = sigdescr_np(signo);
  return absl::StrCat("signal ", signo, " (",
                      text != nullptr ? text : "unknown signal", ")");
}

int NumUsableCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
    return std::max(1, CPU_COUNT(&cpus));
  }
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

// ---------------------------------------------------------------------------
// Signal capture: while a Launch runs, SIGINT and SIGTERM are turned into
// bytes on a self-pipe that the supervisor's poll loop reads.

std::atomic<int> g_signal_pipe_write_fd{-1};
std::atomic<bool> g_launch_running{false};

void CaptureSignal(int signo) {
  const int saved_errno = errno;
  const int fd = g_signal_pipe_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signo);
    // Non-blocking: if the pipe is full, the signal is already pending there.
    [[maybe_unused]] const ssize_t ignored = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

// Installs the capturing handlers in Install() and restores the previous
// ones on destruction. Owned by Launch(); one instance at a time.
class ScopedSignalCapture {
 public:
  ScopedSignalCapture() = default;
  ScopedSignalCapture(const ScopedSignalCapture&) = delete;
  ScopedSignalCapture& operator=(const ScopedSignalCapture&) = delete;
  ~ScopedSignalCapture() {
    for (const auto& [signo, action] : previous_) {
      sigaction(signo, &action, nullptr);
    }
    g_signal_pipe_write_fd.store(-1);
  }

  absl::Status Install() {
    absl::Status status = MakePipe(&read_end_, &write_end_);
    if (status.ok()) status = SetNonBlocking(read_end_.get());
    if (status.ok()) status = SetNonBlocking(write_end_.get());
    if (!status.ok()) return status;
    g_signal_pipe_write_fd.store(write_end_.get());
    for (int signo : {SIGINT, SIGTERM}) {
      struct sigaction previous;
      CHECK_EQ(sigaction(signo, nullptr, &previous), 0);
      // A signal the launcher was started ignoring (nohup, background jobs)
      // stays ignored, for the launcher and for its ranks.
      if (previous.sa_handler == SIG_IGN) continue;
      struct sigaction action = {};
      action.sa_handler = CaptureSignal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      CHECK_EQ(sigaction(signo, &action, nullptr), 0);
      previous_.emplace_back(signo, previous);
    }
    return absl::OkStatus();
  }

  int read_fd() const { return read_end_.get(); }

  // Returns the signals received since the last call, in order.
  std::vector<int> TakeSignals() {
    std::vector<int> signals;
    unsigned char bytes[64];
    ssize_t n;
    while ((n = read(read_end_.get(), bytes, sizeof(bytes))) > 0 ||
           (n < 0 && errno == EINTR)) {
      for (ssize_t i = 0; i < n; ++i) signals.push_back(bytes[i]);
    }
    return signals;
  }

 private:
  ScopedFd read_end_;
  ScopedFd write_end_;
  std::vector<std::pair<int, struct sigaction>> previous_;
};

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

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void ExecRank(pid_t launcher_pid, int stdin_fd, int stdout_fd,
                           int stderr_fd, int exec_status_fd, int heartbeat_fd,
                           char* const* argv, char* const* envp) {
  setpgid(0, 0);
  // If the launcher dies without stopping the ranks (SIGKILL), they get
  // SIGTERM; and if it died already, this one does not start.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher_pid) _exit(128 + SIGTERM);
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
  if ((heartbeat_fd >= 0 && fcntl(heartbeat_fd, F_SETFD, 0) != 0) ||
      dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(stderr_fd, STDERR_FILENO) < 0) {
    error = errno;
  } else {
    execvpe(argv[0], argv, envp);
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
  append(argv[0]);
  append("': ");
  append(reason != nullptr ? reason : "unknown error");
  append("\n");
  [[maybe_unused]] ssize_t ignored = write(STDERR_FILENO, message, length);
  ignored = write(exec_status_fd, &error, sizeof(error));
  _exit(error == ENOENT ? 127 : 126);
}

// Spawns and watches the ranks of one Launch(). Used from one thread only.
class Supervisor {
 public:
  // `restart_round`: 0 for the first start, then 1, 2, ... for each
  // restart (LauncherOptions::max_restarts).
  Supervisor(const LauncherOptions& options, int master_port,
             int num_threads_per_rank, int restart_round)
      : options_(options),
        master_port_(master_port),
        num_threads_per_rank_(num_threads_per_rank),
        restart_round_(restart_round) {}

  // Spawns every rank, forwards output and signals until all have exited.
  absl::Status Run(ScopedSignalCapture* signals) {
    for (int local_rank = 0; local_rank < options_.nproc_per_node;
         ++local_rank) {
      absl::Status status = Spawn(local_rank);
      if (!status.ok()) {
        LOG(ERROR) << status.message() << "; stopping the other ranks";
        launcher_error_ = status;
        BeginStopping(SIGTERM);
        break;
      }
      // The others would fail the same way; the exec error is reported when
      // this rank is reaped.
      if (!ranks_.back().exec_error.empty()) break;
    }

    while (true) {
      ReapExited();
      if (NumRunning() == 0) break;
      CheckHeartbeats();
      if (kill_deadline_.has_value() && !killed_) KillStoppedRanks();
      if (kill_deadline_.has_value() && !killed_ &&
          absl::Now() >= *kill_deadline_) {
        LOG(WARNING) << NumRunning() << " rank(s) still running "
                     << absl::FormatDuration(options_.stop_grace)
                     << " after being asked to stop; sending SIGKILL";
        SignalRunning(SIGKILL);
        killed_ = true;
      }
      PumpOutput(kReapIntervalMs, signals);
    }
    // Every rank has exited; what they wrote is in the pipes.
    while (std::any_of(forwarders_.begin(), forwarders_.end(),
                       [](const auto& f) { return f->is_open(); })) {
      if (!PumpOutput(kDrainIdleMs, nullptr)) break;
    }
    for (auto& forwarder : forwarders_) forwarder->Close();
    // Signals that arrived after the last rank exited stop no rank, but
    // they do cancel a restart.
    late_signal_ = !signals->TakeSignals().empty();
    return FinalStatus();
  }

  // After Run failed: whether a new round may fix it. A rank failed (exit,
  // signal, heartbeat) — not the launcher itself, not an exec error (the
  // program would fail the same way), not a SIGINT/SIGTERM the user sent.
  bool Restartable() const {
    return launcher_error_.ok() && first_failure_.has_value() &&
           ranks_[*first_failure_].exec_error.empty() &&
           forwarded_signal_ == 0 && !late_signal_;
  }

  // After Run failed with a rank's failure: "rank 1 (pid 1234) was killed by
  // signal 9 (Killed)", for the restart log line.
  std::string FailureSummary() const {
    CHECK(first_failure_.has_value());
    const RankProcess& process = ranks_[*first_failure_];
    return absl::StrCat("rank ", process.rank, " (pid ", process.pid, ")",
                        Outcome(process));
  }

 private:
  // The launcher's environment with the torchrun and thread variables of
  // `local_rank` and options_.extra_env, as "KEY=VALUE" strings.
  std::vector<std::string> RankEnvironment(int local_rank,
                                           int heartbeat_fd) const {
    const int world_size = options_.nnodes * options_.nproc_per_node;
    const int rank = options_.node_rank * options_.nproc_per_node + local_rank;
    std::vector<std::pair<std::string, std::string>> vars = {
        {"MASTER_ADDR", options_.master_addr},
        {"MASTER_PORT", absl::StrCat(master_port_)},
        {"RANK", absl::StrCat(rank)},
        {"WORLD_SIZE", absl::StrCat(world_size)},
        {"LOCAL_RANK", absl::StrCat(local_rank)},
        {"LOCAL_WORLD_SIZE", absl::StrCat(options_.nproc_per_node)},
        {"GROUP_RANK", absl::StrCat(options_.node_rank)},
        {"GROUP_WORLD_SIZE", absl::StrCat(options_.nnodes)},
        // As torchrun: the round (0 for the first start) and the limit.
        {"TORCHELASTIC_RESTART_COUNT", absl::StrCat(restart_round_)},
        {"TORCHELASTIC_MAX_RESTARTS", absl::StrCat(options_.max_restarts)},
    };
    if (heartbeat_fd >= 0) {
      vars.emplace_back("STRATA_HEARTBEAT_FD", absl::StrCat(heartbeat_fd));
      vars.emplace_back("STRATA_HEARTBEAT_INTERVAL_MS",
                        absl::StrCat(HeartbeatIntervalMs()));
    }
    absl::flat_hash_set<std::string> extra_keys;
    for (const auto& [key, value] : options_.extra_env) extra_keys.insert(key);
    for (const char* key : kThreadVars) {
      if (!extra_keys.contains(key)) {
        vars.emplace_back(key, absl::StrCat(num_threads_per_rank_));
      }
    }
    vars.insert(vars.end(), options_.extra_env.begin(),
                options_.extra_env.end());

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

  absl::Status Spawn(int local_rank) {
    RankProcess process;
    process.local_rank = local_rank;
    process.rank = options_.node_rank * options_.nproc_per_node + local_rank;

    ScopedFd heartbeat_read, heartbeat_write;
    if (options_.heartbeat_timeout > absl::ZeroDuration()) {
      absl::Status status = MakePipe(&heartbeat_read, &heartbeat_write);
      if (status.ok()) status = SetNonBlocking(heartbeat_read.get());
      if (!status.ok()) {
        return absl::Status(
            status.code(),
            absl::StrCat("cannot start rank ", process.rank,
                         ": heartbeat pipe: ", status.message()));
      }
    }
    // Everything the child needs is built before fork: the child of a
    // possibly multi-threaded process may not allocate.
    std::vector<std::string> env =
        RankEnvironment(local_rank, heartbeat_write.get());
    std::vector<char*> envp;
    for (std::string& entry : env) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<std::string> command = options_.command;
    std::vector<char*> argv;
    for (std::string& arg : command) argv.push_back(arg.data());
    argv.push_back(nullptr);

    ScopedFd stdout_read, stdout_write, stderr_read, stderr_write;
    ScopedFd exec_status_read, exec_status_write;
    // Ranks never read the launcher's stdin: in their own process group they
    // would be stopped (SIGTTIN) reading a terminal.
    ScopedFd dev_null;
    absl::Status dev_null_status = OpenDevNull(&dev_null);
    if (!dev_null_status.ok()) {
      return absl::Status(dev_null_status.code(),
                          absl::StrCat("cannot start rank ", process.rank, ": ",
                                       dev_null_status.message()));
    }
    for (auto [read_end, write_end] :
         {std::pair(&stdout_read, &stdout_write),
          std::pair(&stderr_read, &stderr_write),
          std::pair(&exec_status_read, &exec_status_write)}) {
      absl::Status status = MakePipe(read_end, write_end);
      if (!status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat("cannot start rank ", process.rank,
                                         ": ", status.message()));
      }
    }

    const pid_t launcher_pid = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      return absl::InternalError(absl::StrCat(
          "cannot start rank ", process.rank, ": fork: ", ErrnoText(errno)));
    }
    if (pid == 0) {
      ExecRank(launcher_pid, dev_null.get(), stdout_write.get(),
               stderr_write.get(), exec_status_write.get(),
               heartbeat_write.get(), argv.data(), envp.data());
    }
    // Also set here, so the group exists before anyone signals it; fails
    // harmlessly if the child already exec'd (it set it itself).
    setpgid(pid, pid);
    process.pid = pid;
    process.running = true;
    stdout_write.reset();
    stderr_write.reset();
    exec_status_write.reset();
    heartbeat_write.reset();
    dev_null.reset();
    process.heartbeat = std::move(heartbeat_read);
    process.last_beat = absl::Now();

    // EOF: the exec succeeded (close-on-exec); an errno: it failed.
    int exec_errno = 0;
    ssize_t n;
    do {
      n = read(exec_status_read.get(), &exec_errno, sizeof(exec_errno));
    } while (n < 0 && errno == EINTR);
    if (n == sizeof(exec_errno)) {
      process.exec_error = absl::StrCat("cannot execute '", options_.command[0],
                                        "': ", ErrnoText(exec_errno));
    }

    for (auto [read_end, target_fd] :
         {std::pair(&stdout_read, STDOUT_FILENO),
          std::pair(&stderr_read, STDERR_FILENO)}) {
      const absl::Status status = SetNonBlocking(read_end->get());
      CHECK(status.ok()) << status;
      forwarders_.push_back(std::make_unique<LineForwarder>(
          std::move(*read_end), target_fd,
          options_.prefix_output ? absl::StrCat("[rank", process.rank, "]: ")
                                 : ""));
    }
    ranks_.push_back(std::move(process));
    return absl::OkStatus();
  }

  int NumRunning() const {
    return std::count_if(ranks_.begin(), ranks_.end(),
                         [](const RankProcess& r) { return r.running; });
  }

  static bool Succeeded(const RankProcess& process) {
    return WIFEXITED(process.wait_status) &&
           WEXITSTATUS(process.wait_status) == 0;
  }

  // " exited with status 3", " was killed by signal 9 (Killed)", or "".
  static std::string Outcome(const RankProcess& process) {
    if (WIFEXITED(process.wait_status)) {
      return absl::StrCat(" exited with status ",
                          WEXITSTATUS(process.wait_status));
    }
    if (WIFSIGNALED(process.wait_status)) {
      return absl::StrCat(
          " was killed by ", SignalText(WTERMSIG(process.wait_status)),
          WCOREDUMP(process.wait_status) ? " (core dumped)" : "");
    }
    return "";
  }

  // The rank, its exit and why; with restarts allowed, the round too.
  std::string Describe(const RankProcess& process) const {
    std::string description = absl::StrCat(Name(process), Outcome(process));
    if (options_.max_restarts > 0) {
      absl::StrAppend(&description, " in restart round ", restart_round_);
    }
    if (!process.exec_error.empty()) {
      absl::StrAppend(&description, ": ", process.exec_error);
    }
    if (!process.cause.empty()) {
      absl::StrAppend(&description, ": ", process.cause);
    }
    return description;
  }

  static std::string Name(const RankProcess& process) {
    return absl::StrCat("rank ", process.rank, " (local rank ",
                        process.local_rank, ", pid ", process.pid, ")");
  }

  // How often ranks beat: a quarter of the timeout, so that a late beat or
  // two is no failure.
  int64_t HeartbeatIntervalMs() const {
    return std::max<int64_t>(
        1, absl::ToInt64Milliseconds(options_.heartbeat_timeout / 4));
  }

  // The process state for messages: "T (stopped)", or why it is unknown.
  static std::string StateOf(const RankProcess& process) {
    absl::StatusOr<char> state = ProcessState(process.pid);
    return state.ok() ? DescribeProcessState(*state)
                      : std::string(state.status().message());
  }

  // SIGKILLs a rank at once (its process group, else the process).
  static void ForceKill(RankProcess& process, std::string cause) {
    if (kill(-process.pid, SIGKILL) != 0) kill(process.pid, SIGKILL);
    process.force_killed = true;
    process.cause = std::move(cause);
  }

  // With --heartbeat_timeout_s: a running rank whose last beat is older than
  // the timeout, or that sent no beat within the start-up timeout of its
  // spawn (a LibTorch program can take seconds to load), is reported,
  // SIGKILLed at once, and the job stopped.
  void CheckHeartbeats() {
    if (options_.heartbeat_timeout <= absl::ZeroDuration()) return;
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      RankProcess& process = ranks_[i];
      const absl::Duration allowed = process.beat_seen
                                         ? options_.heartbeat_timeout
                                         : options_.heartbeat_startup_timeout;
      if (!process.running || process.force_killed ||
          !process.heartbeat.valid() || now - process.last_beat < allowed) {
        continue;
      }
      const std::string silent = absl::FormatDuration(
          absl::Trunc(now - process.last_beat, absl::Milliseconds(100)));
      std::string cause = absl::StrCat(
          process.beat_seen
              ? absl::StrCat("it sent no heartbeat for ", silent,
                             " (--heartbeat_timeout_s)")
              : absl::StrCat("it sent no heartbeat in the ", silent,
                             " since it started "
                             "(--heartbeat_startup_timeout_s; does the "
                             "program beat? see launch/README.md)"),
          ", process state ", StateOf(process));
      LOG(ERROR) << Name(process) << ": " << cause
                 << "; sending it SIGKILL and stopping the job";
      ForceKill(process, std::move(cause));
      if (!first_failure_.has_value()) first_failure_ = i;
      BeginStopping(SIGTERM);
    }
  }

  // While stopping: a rank that is stopped (SIGSTOP, a debugger) cannot react
  // to SIGTERM, so it gets SIGKILL now rather than after the grace period.
  void KillStoppedRanks() {
    for (RankProcess& process : ranks_) {
      if (!process.running || process.force_killed) continue;
      absl::StatusOr<char> state = ProcessState(process.pid);
      if (!state.ok() || !IsStoppedState(*state)) continue;
      std::string cause = absl::StrCat(
          "it was ", DescribeProcessState(*state),
          " and could not react to SIGTERM, so it got SIGKILL at once");
      LOG(ERROR) << Name(process) << ": " << cause;
      ForceKill(process, std::move(cause));
    }
  }

  // Records the ranks that have exited; the first failure stops the others.
  void ReapExited() {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      RankProcess& process = ranks_[i];
      if (!process.running) continue;
      int wait_status = 0;
      const pid_t result = waitpid(process.pid, &wait_status, WNOHANG);
      if (result == 0 || (result < 0 && errno == EINTR)) continue;
      // ECHILD: someone else reaped it (SIGCHLD ignored by the host process).
      CHECK(result == process.pid || errno == ECHILD)
          << "waitpid(" << process.pid << "): " << ErrnoText(errno);
      process.running = false;
      if (result < 0) {
        LOG(ERROR) << "rank " << process.rank << " (pid " << process.pid
                   << ") was reaped by someone else; its status is unknown";
        if (launcher_error_.ok()) {
          launcher_error_ = absl::InternalError(absl::StrCat(
              "cannot wait for rank ", process.rank, " (pid ", process.pid,
              "): ", ErrnoText(ECHILD), " (is SIGCHLD ignored?)"));
        }
        BeginStopping(SIGTERM);
        continue;
      }
      process.wait_status = wait_status;
      if (Succeeded(process) || first_failure_.has_value()) {
        LOG(INFO) << Describe(process);
        continue;
      }
      first_failure_ = i;
      LOG(ERROR) << Describe(process);
      if (NumRunning() > 0) {
        LOG(ERROR) << "Stopping the other " << NumRunning()
                   << " rank(s): SIGTERM now, SIGKILL after "
                   << absl::FormatDuration(options_.stop_grace);
      }
      BeginStopping(SIGTERM);
    }
  }

  // Sends `signo` to the process groups of the running ranks.
  void SignalRunning(int signo) {
    for (const RankProcess& process : ranks_) {
      if (!process.running) continue;
      if (kill(-process.pid, signo) != 0) kill(process.pid, signo);
    }
  }

  // Asks the running ranks to stop with `signo`; SIGKILL follows after the
  // grace period (counted from the first request).
  void BeginStopping(int signo) {
    SignalRunning(signo);
    if (!kill_deadline_.has_value()) {
      kill_deadline_ = absl::Now() + options_.stop_grace;
    }
  }

  void HandleLauncherSignals(ScopedSignalCapture* signals) {
    for (int signo : signals->TakeSignals()) {
      if (forwarded_signal_ == 0) {
        forwarded_signal_ = signo;
        LOG(WARNING) << "Launcher received " << SignalText(signo)
                     << "; forwarding it to the ranks, SIGKILL after "
                     << absl::FormatDuration(options_.stop_grace);
        BeginStopping(signo);
      } else if (!killed_) {
        LOG(WARNING) << "Launcher received " << SignalText(signo)
                     << " again; sending SIGKILL to the ranks";
        SignalRunning(SIGKILL);
        killed_ = true;
      }
    }
  }

  // Waits up to `timeout_ms` for output (and, if `signals` is set, launcher
  // signals) and handles what arrived. Returns false on timeout.
  bool PumpOutput(int timeout_ms, ScopedSignalCapture* signals) {
    std::vector<pollfd> fds;
    std::vector<LineForwarder*> owners;
    if (signals != nullptr) {
      fds.push_back({signals->read_fd(), POLLIN, 0});
      owners.push_back(nullptr);
    }
    for (auto& forwarder : forwarders_) {
      if (!forwarder->is_open()) continue;
      fds.push_back({forwarder->fd(), POLLIN, 0});
      owners.push_back(forwarder.get());
    }
    const size_t num_output_fds = fds.size();
    std::vector<RankProcess*> beating;
    if (signals != nullptr) {  // Not while draining after the last exit.
      for (RankProcess& process : ranks_) {
        if (!process.heartbeat.valid()) continue;
        fds.push_back({process.heartbeat.get(), POLLIN, 0});
        beating.push_back(&process);
      }
    }
    const int num_ready = poll(fds.data(), fds.size(), timeout_ms);
    if (num_ready < 0) {
      CHECK_EQ(errno, EINTR) << "poll: " << ErrnoText(errno);
      return true;
    }
    if (num_ready == 0) return false;
    for (size_t i = num_output_fds; i < fds.size(); ++i) {
      if (fds[i].revents != 0) ReadHeartbeat(*beating[i - num_output_fds]);
    }
    for (size_t i = 0; i < num_output_fds; ++i) {
      if (fds[i].revents == 0) continue;
      if (owners[i] == nullptr) {
        HandleLauncherSignals(signals);
      } else {
        owners[i]->ReadAvailable();
      }
    }
    return true;
  }

  // Takes the beats that arrived; EOF (the rank closed it or exited) ends
  // the watching.
  static void ReadHeartbeat(RankProcess& process) {
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

  absl::Status FinalStatus() const {
    if (!launcher_error_.ok()) return launcher_error_;
    if (!first_failure_.has_value()) return absl::OkStatus();
    const RankProcess& process = ranks_[*first_failure_];
    std::string message = Describe(process);
    // The ranks the launcher killed at once, and why (a stopped rank is
    // often why the first one failed).
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (i != *first_failure_ && !ranks_[i].cause.empty()) {
        absl::StrAppend(&message, "; ", Describe(ranks_[i]));
      }
    }
    if (forwarded_signal_ != 0) {
      absl::StrAppend(&message, " (the launcher had forwarded ",
                      SignalText(forwarded_signal_), " to the ranks)");
    }
    absl::Status status = absl::AbortedError(message);
    const int exit_code = WIFEXITED(process.wait_status)
                              ? WEXITSTATUS(process.wait_status)
                              : 128 + WTERMSIG(process.wait_status);
    status.SetPayload(kExitCodePayloadUrl, absl::Cord(absl::StrCat(exit_code)));
    return status;
  }

  const LauncherOptions& options_;
  const int master_port_;
  const int num_threads_per_rank_;
  const int restart_round_;
  std::vector<RankProcess> ranks_;
  std::vector<std::unique_ptr<LineForwarder>> forwarders_;
  // Index in ranks_ of the first rank that failed.
  std::optional<size_t> first_failure_;
  // A failure of the launcher itself (spawning, waiting); wins over
  // first_failure_, whose rank may just have been stopped because of it.
  absl::Status launcher_error_;
  // The first SIGINT/SIGTERM the launcher received, 0 if none.
  int forwarded_signal_ = 0;
  // A SIGINT/SIGTERM arrived after the last rank had exited.
  bool late_signal_ = false;
  // When the ranks still running get SIGKILL; set once stopping begins.
  std::optional<absl::Time> kill_deadline_;
  bool killed_ = false;
};

}  // namespace

absl::Status Launch(const LauncherOptions& options) {
  absl::Status status = ValidateLauncherOptions(options);
  if (!status.ok()) return status;
  CHECK(!g_launch_running.exchange(true))
      << "Launch() called while another Launch() runs in this process";
  absl::Cleanup done = [] { g_launch_running.store(false); };

  const int num_threads_per_rank =
      options.num_threads_per_rank > 0
          ? options.num_threads_per_rank
          : std::max(1, NumUsableCpus() / options.nproc_per_node);
  ScopedSignalCapture signals;
  status = signals.Install();
  if (!status.ok()) return status;
  for (int round = 0;; ++round) {
    // A port the launcher picks is picked anew each round (no race with the
    // old store's sockets); a chosen one stays (c10d listens SO_REUSEADDR).
    int master_port = options.master_port;
    if (master_port == 0) {
      absl::StatusOr<int> port = PickFreeTcpPort();
      if (!port.ok()) {
        return absl::Status(
            port.status().code(),
            absl::StrCat("--master_port=0: ", port.status().message()));
      }
      master_port = *port;
    }
    const int first_rank = options.node_rank * options.nproc_per_node;
    LOG(INFO) << "Launching ranks " << first_rank << ".."
              << first_rank + options.nproc_per_node - 1 << " of world size "
              << options.nnodes * options.nproc_per_node << " (node "
              << options.node_rank << " of " << options.nnodes << "), master "
              << options.master_addr << ":" << master_port << ", "
              << num_threads_per_rank << " thread(s) per rank"
              << (options.max_restarts > 0
                      ? absl::StrCat(", restart round ", round, " of at most ",
                                     options.max_restarts)
                      : "")
              << ": " << absl::StrJoin(options.command, " ");
    Supervisor supervisor(options, master_port, num_threads_per_rank, round);
    status = supervisor.Run(&signals);
    if (status.ok() || options.max_restarts == 0) return status;
    if (!supervisor.Restartable()) return status;  // E.g. a SIGINT, no program.
    if (round == options.max_restarts) {
      LOG(ERROR) << "restarts exhausted (--max_restarts="
                 << options.max_restarts << "): " << supervisor.FailureSummary()
                 << "; giving up";
      return status;
    }
    LOG(WARNING) << "restart " << round + 1 << "/" << options.max_restarts
                 << ": " << supervisor.FailureSummary() << "; restarting all "
                 << options.nproc_per_node << " ranks";
  }
}

int ExitCodeFromStatus(const absl::Status& status) {
  if (status.ok()) return 0;
  const absl::optional<absl::Cord> payload =
      status.GetPayload(kExitCodePayloadUrl);
  int exit_code = 0;
  if (payload.has_value() &&
      absl::SimpleAtoi(std::string(*payload), &exit_code) && exit_code > 0 &&
      exit_code < 256) {
    return exit_code;
  }
  return 1;
}

}  // namespace strata::launch
