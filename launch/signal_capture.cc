#include "launch/signal_capture.h"

#include <errno.h>
#include <glog/logging.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"

namespace strata::launch {
namespace {

std::atomic<int> g_signal_pipe_write_fd{-1};

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

}  // namespace

std::string SignalText(int signo) {
  const char* text = sigdescr_np(signo);
  return absl::StrCat("signal ", signo, " (",
                      text != nullptr ? text : "unknown signal", ")");
}

ScopedSignalCapture::~ScopedSignalCapture() {
  for (const auto& [signo, action] : previous_) {
    sigaction(signo, &action, nullptr);
  }
  g_signal_pipe_write_fd.store(-1);
}

absl::Status ScopedSignalCapture::Install() {
  absl::Status status = MakePipe(&read_end_, &write_end_);
  if (status.ok()) status = SetNonBlocking(read_end_.get());
  if (status.ok()) status = SetNonBlocking(write_end_.get());
  if (!status.ok()) return status;
  g_signal_pipe_write_fd.store(write_end_.get());
  for (int signo : {SIGINT, SIGTERM}) {
    struct sigaction previous;
    CHECK_EQ(sigaction(signo, nullptr, &previous), 0);
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

bool ScopedSignalCapture::HasPendingSignal() const {
  pollfd fd = {read_end_.get(), POLLIN, 0};
  return poll(&fd, 1, 0) == 1;
}

std::vector<int> ScopedSignalCapture::TakeSignals() {
  std::vector<int> signals;
  unsigned char bytes[64];
  ssize_t n;
  while ((n = read(read_end_.get(), bytes, sizeof(bytes))) > 0 ||
         (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i) signals.push_back(bytes[i]);
  }
  return signals;
}

}  // namespace strata::launch
