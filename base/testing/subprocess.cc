#include "base/testing/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace strata::testing {

std::string RunfilePath(absl::string_view workspace_relative_path) {
  const char* srcdir = getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/strata/",
                      workspace_relative_path);
}

Subprocess::Subprocess(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& env,
    absl::Duration run_timeout)
    : start_(absl::Now()), run_timeout_(run_timeout) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 ||
      pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << strerror(errno);
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // stdin: a pipe the test keeps open, as a terminal would stay open.
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);

  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos)
      merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : env) merged[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : merged) {
    env_strings.push_back(absl::StrCat(key, "=", value));
  }
  std::vector<char*> c_env;
  for (std::string& s : env_strings) c_env.push_back(s.data());
  c_env.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> c_args;
  for (std::string& arg : args) c_args.push_back(arg.data());
  c_args.push_back(nullptr);

  const int error = posix_spawn(&pid_, c_args[0], &actions, nullptr,
                                c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  in_fd_ = in_pipe[1];
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
  if (error != 0) {
    ADD_FAILURE() << "cannot start " << argv[0] << ": " << strerror(error);
    pid_ = -1;
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (in_fd_ >= 0) close(in_fd_);
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void Subprocess::Signal(int signo) { kill(pid_, signo); }

bool Subprocess::WaitForStdout(
    const std::function<bool(const std::string&)>& done,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done(result_.out)) {
    if (absl::Now() >= deadline || !Pump(deadline)) return false;
  }
  return true;
}

RunResult Subprocess::Finish() {
  if (pid_ <= 0) return result_;
  const absl::Time deadline = start_ + run_timeout_;
  while ((out_fd_ >= 0 || err_fd_ >= 0) && absl::Now() < deadline) {
    Pump(deadline);
  }
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() >= deadline) {
      ADD_FAILURE() << "still running after " << run_timeout_;
      kill(pid_, SIGTERM);
      absl::SleepFor(absl::Seconds(1));
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  reaped_ = true;
  result_.elapsed = absl::Now() - start_;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result_;
}

bool Subprocess::Pump(absl::Time deadline) {
  std::vector<pollfd> fds;
  for (int fd : {out_fd_, err_fd_}) {
    if (fd >= 0) fds.push_back({fd, POLLIN, 0});
  }
  if (fds.empty()) return false;
  const int timeout_ms =
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return true;
  for (const pollfd& pfd : fds) {
    if (pfd.revents == 0) continue;
    const bool is_out = pfd.fd == out_fd_;
    char buffer[65536];
    const ssize_t n = read(pfd.fd, buffer, sizeof(buffer));
    if (n <= 0) {
      close(pfd.fd);
      (is_out ? out_fd_ : err_fd_) = -1;
    } else {
      (is_out ? result_.out : result_.err).append(buffer, n);
    }
  }
  return true;
}

RunResult Run(const std::vector<std::string>& argv,
              const std::vector<std::pair<std::string, std::string>>& env,
              absl::Duration run_timeout) {
  Subprocess process(argv, env, run_timeout);
  return process.Finish();
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

std::vector<std::pair<std::string, std::string>> TorchrunEnv(int rank,
                                                             int world_size,
                                                             int port) {
  return {{"RANK", absl::StrCat(rank)},
          {"WORLD_SIZE", absl::StrCat(world_size)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", absl::StrCat(port)},
          {"OMP_NUM_THREADS", "1"}};
}

}  // namespace strata::testing
