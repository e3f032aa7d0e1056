// A process's heartbeat: a thread that writes one byte to a pipe every
// interval, so that whoever reads the other end (the launcher, with
// `launch --heartbeat_timeout_s`) can tell a live process from one that is
// stopped (SIGSTOP, a debugger) or frozen. It beats while the process is
// scheduled, not while it makes progress: a rank stuck in a compute loop
// keeps beating (its peers' collective timeout names it instead).
//
//   auto beat = Heartbeat::Start(fd, absl::Milliseconds(500));
//   if (!beat.ok()) return beat.status();
//   ...  // The process works; `*beat` beats until destroyed.
#ifndef STRATA_BASE_HEARTBEAT_H_
#define STRATA_BASE_HEARTBEAT_H_

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace strata {

class Heartbeat {
 public:
  // Takes ownership of `fd` (the write end of a pipe, made non-blocking
  // here) and starts the beating thread: one byte now and one every
  // `interval`. A full pipe skips a beat; a closed reader ends the beating.
  // InvalidArgument naming `fd` if it is not an open descriptor or
  // `interval` is not positive.
  static absl::StatusOr<std::unique_ptr<Heartbeat>> Start(
      int fd, absl::Duration interval);

  // Stops the thread and closes the descriptor.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  Heartbeat(int fd, absl::Duration interval);
  void Run();

  const int fd_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace strata

#endif  // STRATA_BASE_HEARTBEAT_H_
