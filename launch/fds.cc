#include "launch/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace strata::launch {

std::string ErrnoText(int error) {
  const char* text = strerrordesc_np(error);
  return text != nullptr ? text : absl::StrCat("errno ", error);
}

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

// Makes `*fd` (close-on-exec) a descriptor above the standard ones, so that a
// child's dup2 onto fd 0, 1 and 2 can never clobber it (this process may have
// been started with fd 0, 1 or 2 closed). Closes `*fd` on failure.
absl::Status MoveAboveStdio(int* fd) {
  if (*fd > STDERR_FILENO) return absl::OkStatus();
  const int moved = fcntl(*fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  const int error = errno;
  close(*fd);
  *fd = moved;
  if (moved < 0) {
    return absl::InternalError(
        absl::StrCat("cannot move fd above 2: ", ErrnoText(error)));
  }
  return absl::OkStatus();
}

// Makes a close-on-exec pipe whose ends are both above the standard fds.
absl::Status MakePipe(ScopedFd* read_end, ScopedFd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a pipe: ", ErrnoText(errno)));
  }
  absl::Status status = MoveAboveStdio(&fds[0]);
  read_end->reset(fds[0]);
  if (status.ok()) status = MoveAboveStdio(&fds[1]);
  write_end->reset(fds[1]);
  return status;
}

absl::Status OpenDevNull(ScopedFd* fd) {
  int raw_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (raw_fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open /dev/null: ", ErrnoText(errno)));
  }
  absl::Status status = MoveAboveStdio(&raw_fd);
  fd->reset(raw_fd);
  return status;
}

absl::Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot make fd ", fd, " non-blocking: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// Writes all of `data` to `fd`, waiting if `fd` is non-blocking and full.
// Returns false if `fd` cannot be written (closed reader, bad fd): the output
// is then dropped.
bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN) {
      pollfd pfd = {fd, POLLOUT, 0};
      poll(&pfd, 1, -1);
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

void LineForwarder::ReadAvailable() {
  CHECK(is_open());
  char chunk[64 * 1024];
  const ssize_t n = read(source_.get(), chunk, sizeof(chunk));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    Close();
    return;
  }
  pending_.append(chunk, static_cast<size_t>(n));
  const size_t last_newline = pending_.rfind('\n');
  if (last_newline != std::string::npos) {
    Emit(absl::string_view(pending_).substr(0, last_newline + 1));
    pending_.erase(0, last_newline + 1);
  }
  while (pending_.size() >= kMaxLineBytes) {
    Emit(absl::StrCat(absl::string_view(pending_).substr(0, kMaxLineBytes),
                      "\n"));
    pending_.erase(0, kMaxLineBytes);
  }
}

void LineForwarder::Close() {
  if (!pending_.empty()) {
    Emit(absl::StrCat(pending_, "\n"));
    pending_.clear();
  }
  source_.reset();
}

void LineForwarder::Emit(absl::string_view lines) {
  if (target_broken_) return;
  if (prefix_.empty()) {
    target_broken_ = !WriteAll(target_fd_, lines);
    return;
  }
  std::string out;
  out.reserve(lines.size() + prefix_.size() * 4);
  while (!lines.empty()) {
    const size_t end = lines.find('\n');
    CHECK_NE(end, absl::string_view::npos);
    absl::StrAppend(&out, prefix_, lines.substr(0, end + 1));
    lines.remove_prefix(end + 1);
  }
  target_broken_ = !WriteAll(target_fd_, out);
}

absl::StatusOr<int> PickFreeTcpPort() {
  ScopedFd socket_fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket_fd.valid()) {
    return absl::InternalError(
        absl::StrCat("cannot create a socket: ", ErrnoText(errno)));
  }
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(socket_fd.get(), reinterpret_cast<sockaddr*>(&address),
           sizeof(address)) != 0 ||
      getsockname(socket_fd.get(), reinterpret_cast<sockaddr*>(&address),
                  &length) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot find a free port: ", ErrnoText(errno)));
  }
  const int port = ntohs(address.sin_port);
  CHECK_GT(port, 0);
  return port;
}

}  // namespace strata::launch
