// The launcher's SIGINT/SIGTERM capture: while a Launch runs, those signals
// become bytes on a self-pipe that its poll loop reads. Internal to launch/.
#ifndef STRATA_LAUNCH_SIGNAL_CAPTURE_H_
#define STRATA_LAUNCH_SIGNAL_CAPTURE_H_

#include <signal.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "launch/fds.h"

namespace strata::launch {

// "signal 9 (Killed)".
std::string SignalText(int signo);

// Installs the capturing handlers in Install() and restores the previous
// ones on destruction. One instance at a time per process.
class ScopedSignalCapture {
 public:
  ScopedSignalCapture() = default;
  ScopedSignalCapture(const ScopedSignalCapture&) = delete;
  ScopedSignalCapture& operator=(const ScopedSignalCapture&) = delete;
  ~ScopedSignalCapture();

  // Makes the self-pipe and captures SIGINT and SIGTERM, except a signal
  // this process ignores (nohup, background jobs): that one stays ignored,
  // for the launcher and for its ranks.
  absl::Status Install();

  // Readable when a signal arrived.
  int read_fd() const { return read_end_.get(); }

  // Whether a signal is waiting to be taken; takes none.
  bool HasPendingSignal() const;

  // Returns the signals received since the last call, in order.
  std::vector<int> TakeSignals();

 private:
  ScopedFd read_end_;
  ScopedFd write_end_;
  std::vector<std::pair<int, struct sigaction>> previous_;
};

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_SIGNAL_CAPTURE_H_
