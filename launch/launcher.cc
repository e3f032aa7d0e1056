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
#include "launch/node_rounds.h"
#include "launch/process_state.h"
#include "launch/rank_process.h"
#include "launch/signal_capture.h"

namespace strata::launch {
namespace {

// Launch() attaches the shell exit code of a failed rank to its error.
constexpr char kExitCodePayloadUrl[] =
    "type.googleapis.com/strata.launch.ExitCode";
// How often the supervisor checks for exited ranks while waiting for output.
constexpr int kReapIntervalMs = 10;
// With the agent store: how often a running node checks for another node's
// failure of the round (one store round trip each).
constexpr absl::Duration kPeerPollInterval = absl::Milliseconds(100);
// After every rank has exited, output is drained until every pipe is closed
// or none has had data for this long (a grandchild may hold a pipe open).
constexpr int kDrainIdleMs = 100;

int NumUsableCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
    return std::max(1, CPU_COUNT(&cpus));
  }
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

std::atomic<bool> g_launch_running{false};

// A failure every node of the job ends with: its text and, as the payload,
// the exit code of the rank it names.
absl::Status RoundFailureStatus(const RoundFailure& failure,
                                absl::string_view prefix) {
  absl::Status status = absl::AbortedError(absl::StrCat(prefix, failure.text));
  status.SetPayload(kExitCodePayloadUrl,
                    absl::Cord(absl::StrCat(failure.exit_code)));
  return status;
}

// Spawns and watches the ranks of one Launch(). Used from one thread only.
class Supervisor {
 public:
  // `restart_round`: 0 for the first start, then 1, 2, ... for each
  // restart (LauncherOptions::max_restarts).
  // `rounds`: the agent store (UsesAgentStore), or null for a node that
  // decides alone.
  Supervisor(const LauncherOptions& options, int master_port,
             int num_threads_per_rank, int restart_round, NodeRounds* rounds)
      : options_(options),
        master_port_(master_port),
        num_threads_per_rank_(num_threads_per_rank),
        restart_round_(restart_round),
        rounds_(rounds) {}

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
      SyncWithOtherNodes();
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
    SyncWithOtherNodes();  // A failure found in the last pass.
    return FinalStatus();
  }

  // With the agent store, after Run failed: the round's failure every node
  // agreed on (this node's or another's), unless the store was lost.
  const std::optional<RoundFailure>& round_failure() const {
    return round_failure_;
  }

  // After Run failed: whether a new round may fix it. A rank failed (exit,
  // signal, heartbeat) — not the launcher itself, not an exec error (the
  // program would fail the same way), not a SIGINT/SIGTERM the user sent.
  bool Restartable() const {
    if (rounds_ != nullptr) {
      return launcher_error_.ok() && round_failure_.has_value() &&
             round_failure_->restartable && forwarded_signal_ == 0 &&
             !late_signal_;
    }
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
    std::vector<std::string> env = RankEnvironment(
        options_, master_port_, restart_round_, num_threads_per_rank_,
        local_rank, heartbeat_write.get());
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

    ExecRankArgs exec_args;
    exec_args.launcher_pid = getpid();
    exec_args.stdin_fd = dev_null.get();
    exec_args.stdout_fd = stdout_write.get();
    exec_args.stderr_fd = stderr_write.get();
    exec_args.exec_status_fd = exec_status_write.get();
    exec_args.heartbeat_fd = heartbeat_write.get();
    exec_args.argv = argv.data();
    exec_args.envp = envp.data();
    const pid_t pid = fork();
    if (pid < 0) {
      return absl::InternalError(absl::StrCat(
          "cannot start rank ", process.rank, ": fork: ", ErrnoText(errno)));
    }
    if (pid == 0) {
      ExecRank(exec_args);
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

  // The rank, its exit and why; with restarts allowed, the round too.
  std::string Describe(const RankProcess& process) const {
    std::string description = absl::StrCat(RankName(process), Outcome(process));
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
      LOG(ERROR) << RankName(process) << ": " << cause
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
      LOG(ERROR) << RankName(process) << ": " << cause;
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
      if (Succeeded(process) || first_failure_.has_value() ||
          stopped_for_peer_) {
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

  // This node's failure of the round for the other nodes, if it has one:
  // "node 1 rank 3 (pid 77) was killed by signal 9 (Killed)".
  std::optional<RoundFailure> LocalFailure() const {
    const std::string node = absl::StrCat("node ", options_.node_rank);
    if (!launcher_error_.ok()) {
      return RoundFailure{
          absl::StrCat(node, "'s launcher failed: ", launcher_error_.message()),
          false, 1};
    }
    if (forwarded_signal_ != 0 || late_signal_) {
      const int signo = forwarded_signal_ != 0 ? forwarded_signal_ : SIGTERM;
      return RoundFailure{
          absl::StrCat(node, "'s launcher received ", SignalText(signo)), false,
          128 + signo};
    }
    if (!first_failure_.has_value()) return std::nullopt;
    const RankProcess& process = ranks_[*first_failure_];
    if (process.running) {  // SIGKILLed for its heartbeat, not reaped yet.
      return RoundFailure{absl::StrCat(node, " rank ", process.rank, " (pid ",
                                       process.pid, "): ", process.cause),
                          true, 128 + SIGKILL};
    }
    std::string text = absl::StrCat(node, " ", FailureSummary());
    if (!process.exec_error.empty()) {
      absl::StrAppend(&text, ": ", process.exec_error);
    }
    return RoundFailure{std::move(text), process.exec_error.empty(),
                        ExitCodeOf(process)};
  }

  // With the agent store: publishes this node's failure of the round at
  // once, else (every kPeerPollInterval) looks for another node's and stops
  // the ranks when there is one. A lost store stops the job.
  void SyncWithOtherNodes() {
    if (rounds_ == nullptr || round_failure_.has_value() || lost_agent_store_) {
      return;
    }
    absl::StatusOr<std::optional<RoundFailure>> failure = LocalFailure();
    if (failure->has_value()) {
      absl::StatusOr<RoundFailure> standing =
          rounds_->PublishFailure(restart_round_, **failure);
      if (standing.ok()) {
        round_failure_ = *std::move(standing);
        return;
      }
      failure = standing.status();
    } else if (absl::Now() >= next_peer_poll_) {
      next_peer_poll_ = absl::Now() + kPeerPollInterval;
      failure = rounds_->PolledFailure(restart_round_);
      if (failure.ok() && failure->has_value()) {
        round_failure_ = **failure;
        stopped_for_peer_ = true;
        LOG(ERROR) << "restart round " << restart_round_
                   << " failed: " << round_failure_->text << "; stopping the "
                   << NumRunning() << " rank(s) of node " << options_.node_rank
                   << ": SIGTERM now, SIGKILL after "
                   << absl::FormatDuration(options_.stop_grace);
        BeginStopping(SIGTERM);
      }
    }
    if (!failure.ok()) {
      lost_agent_store_ = true;
      LOG(ERROR) << failure.status().message() << "; stopping the ranks";
      if (launcher_error_.ok()) launcher_error_ = failure.status();
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

  absl::Status FinalStatus() const {
    if (!launcher_error_.ok()) return launcher_error_;
    if (!first_failure_.has_value() && stopped_for_peer_) {
      return RoundFailureStatus(*round_failure_, "");
    }
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
    const int exit_code = ExitCodeOf(process);
    status.SetPayload(kExitCodePayloadUrl, absl::Cord(absl::StrCat(exit_code)));
    return status;
  }

  const LauncherOptions& options_;
  const int master_port_;
  const int num_threads_per_rank_;
  const int restart_round_;
  NodeRounds* const rounds_;
  // With rounds_: the failure of the round that stands, once this node
  // published one or saw another node's; whether that stopped the ranks.
  std::optional<RoundFailure> round_failure_;
  bool stopped_for_peer_ = false;
  bool lost_agent_store_ = false;
  absl::Time next_peer_poll_ = absl::InfinitePast();
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

namespace {

// The ranks' master port of `round`: options.master_port, or with 0 a port
// picked anew each round (no race with the old store's sockets; a chosen one
// stays, c10d listens SO_REUSEADDR). With the agent store node 0 picks and
// the others read its pick there.
absl::StatusOr<int> RoundMasterPort(const LauncherOptions& options, int round,
                                    NodeRounds* rounds) {
  if (options.master_port != 0) return options.master_port;
  int picked = 0;
  if (rounds == nullptr || options.node_rank == 0) {
    absl::StatusOr<int> port = PickFreeTcpPort();
    if (!port.ok()) {
      return absl::Status(
          port.status().code(),
          absl::StrCat("--master_port=0: ", port.status().message()));
    }
    picked = *port;
  }
  if (rounds == nullptr) return picked;
  return rounds->AgreeMasterPort(round, picked);
}

void LogRoundStart(const LauncherOptions& options, int round, int master_port,
                   int num_threads_per_rank) {
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
}

// The rounds of a node that decides alone (one node, or no restarts).
absl::Status LaunchAlone(const LauncherOptions& options,
                         int num_threads_per_rank,
                         ScopedSignalCapture* signals) {
  for (int round = 0;; ++round) {
    absl::StatusOr<int> master_port = RoundMasterPort(options, round, nullptr);
    if (!master_port.ok()) return master_port.status();
    LogRoundStart(options, round, *master_port, num_threads_per_rank);
    Supervisor supervisor(options, *master_port, num_threads_per_rank, round,
                          nullptr);
    absl::Status status = supervisor.Run(signals);
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

// The rounds of a multi-node job whose launchers agree through the agent
// store (UsesAgentStore): every round starts once all nodes joined it, a
// failure anywhere stops every node's ranks, and the restarts are counted
// for the job.
absl::Status LaunchWithAgentStore(const LauncherOptions& options,
                                  int num_threads_per_rank,
                                  ScopedSignalCapture* signals) {
  NodeRoundsOptions rounds_options;
  rounds_options.host = AgentStoreHost(options);
  rounds_options.port = AgentStorePort(options);
  rounds_options.nnodes = options.nnodes;
  rounds_options.node_rank = options.node_rank;
  rounds_options.timeout = options.rdzv_join_timeout;
  rounds_options.interrupted = [signals] {
    return signals->HasPendingSignal();
  };
  LOG(INFO) << (options.node_rank == 0 ? "Serving" : "Connecting to")
            << " the agent store at " << rounds_options.host << ":"
            << rounds_options.port << " (--rdzv_endpoint), where the "
            << options.nnodes << " nodes' launchers agree on restart rounds";
  absl::StatusOr<std::unique_ptr<NodeRounds>> rounds =
      NodeRounds::Connect(rounds_options);
  if (!rounds.ok()) return rounds.status();
  absl::Cleanup leave = [&] { (*rounds)->Leave(); };
  const int world_size = options.nnodes * options.nproc_per_node;
  for (int round = 0;; ++round) {
    absl::Status status = (*rounds)->JoinRound(round);
    if (!status.ok()) return status;
    absl::StatusOr<int> master_port =
        RoundMasterPort(options, round, rounds->get());
    if (!master_port.ok()) return master_port.status();
    LogRoundStart(options, round, *master_port, num_threads_per_rank);
    Supervisor supervisor(options, *master_port, num_threads_per_rank, round,
                          rounds->get());
    status = supervisor.Run(signals);
    // The round's outcome for the job: every node done, or its failure.
    absl::StatusOr<std::optional<RoundFailure>> agreed =
        status.ok() ? (*rounds)->FinishRound(round)
                    : absl::StatusOr<std::optional<RoundFailure>>(
                          supervisor.round_failure());
    if (!agreed.ok()) return agreed.status();
    if (!agreed->has_value()) return status;  // Lost store: status names it.
    const RoundFailure& failure = **agreed;
    const std::string failed =
        absl::StrCat("restart round ", round, " failed: ");
    if (!failure.restartable || (!status.ok() && !supervisor.Restartable())) {
      return RoundFailureStatus(failure, failed);
    }
    if (round == options.max_restarts) {
      LOG(ERROR) << "restarts exhausted (--max_restarts="
                 << options.max_restarts << "): " << failure.text
                 << "; giving up on all " << options.nnodes << " nodes";
      return RoundFailureStatus(
          failure, absl::StrCat("restarts exhausted (--max_restarts=",
                                options.max_restarts, ", counted for all ",
                                options.nnodes, " nodes): ", failed));
    }
    LOG(WARNING) << "restart " << round + 1 << "/" << options.max_restarts
                 << ": " << failure.text << "; restarting all " << world_size
                 << " ranks on " << options.nnodes << " nodes";
  }
}

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
  if (UsesAgentStore(options)) {
    return LaunchWithAgentStore(options, num_threads_per_rank, &signals);
  }
  return LaunchAlone(options, num_threads_per_rank, &signals);
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
