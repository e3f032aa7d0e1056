// The launchers' agent store: a small key-value store over TCP that node 0's
// launcher serves and every node's launcher uses to agree on restart rounds
// (launch/node_rounds.h), in the spirit of torchrun's c10d rendezvous store.
// It is not c10d's TCPStore so that the `launch` binary stays free of
// LibTorch (which takes seconds to load).
//
// Protocol, one line per request and reply (keys have no spaces, values no
// newlines):
//   ADD <key> <n>      -> "<new value>"        (a missing key counts as 0)
//   SET <key> <value>  -> "OK"
//   GET <key>          -> "V <value>" or "N"   (N: not set; never waits)
// Internal to launch/.
#ifndef STRATA_LAUNCH_AGENT_STORE_H_
#define STRATA_LAUNCH_AGENT_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "launch/fds.h"

namespace strata::launch {

// Serves the store on `port` (all IPv4 interfaces) from a thread of its own
// until destroyed.
class AgentStoreServer {
 public:
  // Unavailable naming the port if it cannot be bound (in use).
  static absl::StatusOr<std::unique_ptr<AgentStoreServer>> Start(int port);
  ~AgentStoreServer();
  AgentStoreServer(const AgentStoreServer&) = delete;
  AgentStoreServer& operator=(const AgentStoreServer&) = delete;

 private:
  AgentStoreServer(ScopedFd listen_fd, ScopedFd wake_read, ScopedFd wake_write);
  void Serve();

  ScopedFd listen_fd_;
  ScopedFd wake_read_;
  ScopedFd wake_write_;
  std::thread thread_;
};

// One connection to the store. Every call waits at most the timeout given
// to Connect; errors are Unavailable (connection refused, closed, reset) or
// DeadlineExceeded (no reply in time: a cut link, a frozen server).
class AgentStoreClient {
 public:
  // Connects to host:port, retrying a refused connection until `timeout`.
  static absl::StatusOr<std::unique_ptr<AgentStoreClient>> Connect(
      const std::string& host, int port, absl::Duration timeout);

  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t increment);
  absl::Status Set(absl::string_view key, absl::string_view value);
  // The value, or nullopt if the key is not set.
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key);

 private:
  AgentStoreClient(ScopedFd fd, absl::Duration timeout)
      : fd_(std::move(fd)), timeout_(timeout) {}
  // Sends `request` (one line, without the newline) and returns the reply
  // line without its newline.
  absl::StatusOr<std::string> Call(const std::string& request);

  ScopedFd fd_;
  const absl::Duration timeout_;
  std::string pending_;  // Received bytes after the last reply.
};

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_AGENT_STORE_H_
