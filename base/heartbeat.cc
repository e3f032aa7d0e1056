#include "base/heartbeat.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace strata {

absl::StatusOr<std::unique_ptr<Heartbeat>> Heartbeat::Start(
    int fd, absl::Duration interval) {
  if (interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat interval must be positive, got ",
                     absl::FormatDuration(interval)));
  }
  const int flags = fd < 0 ? -1 : fcntl(fd, F_GETFL);
  if (flags < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat fd ", fd, " is not an open file descriptor"));
  }
  if ((flags & O_ACCMODE) == O_RDONLY) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat fd ", fd, " is not open for writing"));
  }
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);  // Not inherited by what this process runs.
  return std::unique_ptr<Heartbeat>(new Heartbeat(fd, interval));
}

Heartbeat::Heartbeat(int fd, absl::Duration interval)
    : fd_(fd), interval_(interval), thread_([this] { Run(); }) {}

Heartbeat::~Heartbeat() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  close(fd_);
}

void Heartbeat::Run() {
  // A reader that went away makes write() fail with EPIPE; the SIGPIPE it
  // raises stays pending on this thread instead of ending the process.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const char beat = '.';
    const ssize_t n = write(fd_, &beat, 1);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return;  // The reader is gone (EPIPE) or the fd broke.
    }
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval_);
  }
}

}  // namespace strata
