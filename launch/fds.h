// File-descriptor helpers of the launcher: an owning ScopedFd, pipes and
// /dev/null kept above the standard descriptors (so a child's dup2 onto 0, 1
// and 2 never clobbers them), non-blocking mode, whole writes, and the
// forwarding of ranks' output line by line, and a free TCP port. Internal to
// launch/.
#ifndef STRATA_LAUNCH_FDS_H_
#define STRATA_LAUNCH_FDS_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::launch {

// strerror's description of `error`, or "errno <n>".
std::string ErrnoText(int error);

// Owns one file descriptor; closes it on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Makes `*fd` (close-on-exec) a descriptor above the standard ones (this
// process may have been started with fd 0, 1 or 2 closed). Closes `*fd` on
// failure.
absl::Status MoveAboveStdio(int* fd);

// Makes a close-on-exec pipe whose ends are both above the standard fds.
absl::Status MakePipe(ScopedFd* read_end, ScopedFd* write_end);

// Opens /dev/null for reading, close-on-exec, above the standard fds.
absl::Status OpenDevNull(ScopedFd* fd);

absl::Status SetNonBlocking(int fd);

// Binds a TCP socket to port 0 on all interfaces and returns the port the
// kernel chose. The port is free now; nothing reserves it until someone
// binds it (the same race torchrun accepts).
absl::StatusOr<int> PickFreeTcpPort();

// Writes all of `data` to `fd`, waiting if `fd` is non-blocking and full.
// Returns false if `fd` cannot be written (closed reader, bad fd): the output
// is then dropped.
bool WriteAll(int fd, absl::string_view data);

// Forwards one output pipe (a rank's stdout or stderr) to one of this
// process's fds, whole lines at a time, each with `prefix`; a line longer
// than kMaxLineBytes goes in pieces of that size. Used from one thread.
class LineForwarder {
 public:
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  // Owns `source` (non-blocking); borrows `target_fd`.
  LineForwarder(ScopedFd source, int target_fd, std::string prefix)
      : source_(std::move(source)),
        target_fd_(target_fd),
        prefix_(std::move(prefix)) {}

  int fd() const { return source_.get(); }
  bool is_open() const { return source_.valid(); }

  // Reads one chunk of what is available and forwards the complete lines.
  // At EOF (or a read error) flushes the partial line and closes the pipe.
  void ReadAvailable();

  // Forwards the trailing partial line, if any, with a newline, and closes
  // the pipe. No-op if already closed.
  void Close();

 private:
  // Writes `lines` (each ending in '\n') with a single write when possible.
  void Emit(absl::string_view lines);

  ScopedFd source_;
  const int target_fd_;
  const std::string prefix_;
  std::string pending_;
  bool target_broken_ = false;
};

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_FDS_H_
