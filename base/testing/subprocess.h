// A child process with its stdout and stderr captured, for tests that run
// real binaries (the launcher, multi-process jobs).
#ifndef STRATA_BASE_TESTING_SUBPROCESS_H_
#define STRATA_BASE_TESTING_SUBPROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace strata::testing {

// The path of a runfile of the running test, e.g. "launch/launch".
std::string RunfilePath(absl::string_view workspace_relative_path);

struct RunResult {
  int exit_code = -1;  // -1 if the process was killed by a signal.
  std::string out;
  std::string err;
  absl::Duration elapsed;
};

// Used from the test's thread only; the destructor kills and reaps the child
// if Finish() was not called. Failures (cannot start, ran past its timeout)
// are reported as gtest failures.
class Subprocess {
 public:
  // Starts argv[0] (a path) with this process's environment plus `env`
  // (which overrides). Finish() fails the test if the process runs past
  // `run_timeout` from its start.
  explicit Subprocess(
      const std::vector<std::string>& argv,
      const std::vector<std::pair<std::string, std::string>>& env = {},
      absl::Duration run_timeout = absl::Seconds(15));
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  const std::string& out() const { return result_.out; }
  pid_t pid() const { return pid_; }
  void Signal(int signo);

  // Reads output until `done(stdout so far)` or `timeout`; returns done's
  // last value.
  bool WaitForStdout(const std::function<bool(const std::string&)>& done,
                     absl::Duration timeout);

  // Reads all output and waits for the exit. Past the run timeout, fails the
  // test and stops the process (SIGTERM, then SIGKILL).
  RunResult Finish();

 private:
  // Waits for output until `deadline`, appends what arrived; returns false
  // if both pipes are closed.
  bool Pump(absl::Time deadline);

  const absl::Time start_;
  const absl::Duration run_timeout_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  RunResult result_;
};

// Starts `argv` and waits for it (see Subprocess).
RunResult Run(const std::vector<std::string>& argv,
              const std::vector<std::pair<std::string, std::string>>& env = {},
              absl::Duration run_timeout = absl::Seconds(15));

// A port nothing listens on right now (bound to 0, read back, closed).
int FreePort();

// torchrun's environment for rank `rank` of a `world_size`-rank job whose
// rendezvous is 127.0.0.1:`port` (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), with one OpenMP thread: a rank started by hand.
std::vector<std::pair<std::string, std::string>> TorchrunEnv(int rank,
                                                             int world_size,
                                                             int port);

}  // namespace strata::testing

#endif  // STRATA_BASE_TESTING_SUBPROCESS_H_
