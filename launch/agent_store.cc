#include "launch/agent_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace strata::launch {
namespace {

// A refused connection is retried this often until the deadline.
constexpr absl::Duration kConnectRetryInterval = absl::Milliseconds(100);

// Milliseconds left until `deadline` for poll, at least 0.
int MillisecondsUntil(absl::Time deadline) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(deadline - absl::Now()), 0, 1 << 30));
}

// Sends all of `data` on socket `fd` (no SIGPIPE on a closed peer),
// waiting until `deadline` while its buffer is full. Returns errno, or 0.
int SendAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return errno;
    pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, MillisecondsUntil(deadline)) == 0) return ETIMEDOUT;
  }
  return 0;
}

// The reply to one request line; `values` is the store.
std::string Reply(absl::string_view request,
                  absl::flat_hash_map<std::string, std::string>& values) {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(request, absl::MaxSplits(' ', 2));
  if (parts.size() == 3 && parts[0] == "ADD") {
    int64_t increment = 0;
    int64_t value = 0;
    std::string& stored = values[parts[1]];
    if (!absl::SimpleAtoi(parts[2], &increment) ||
        (!stored.empty() && !absl::SimpleAtoi(stored, &value))) {
      return absl::StrCat("E cannot add '", parts[2], "' to '", stored, "'");
    }
    stored = absl::StrCat(value + increment);
    return stored;
  }
  if (parts.size() >= 2 && parts[0] == "SET") {
    values[parts[1]] = parts.size() == 3 ? std::string(parts[2]) : "";
    return "OK";
  }
  if (parts.size() == 2 && parts[0] == "GET") {
    const auto it = values.find(parts[1]);
    return it == values.end() ? "N" : absl::StrCat("V ", it->second);
  }
  return absl::StrCat("E unknown request '", request, "'");
}

struct ServerConnection {
  ScopedFd fd;
  std::string pending;
};

}  // namespace

absl::StatusOr<std::unique_ptr<AgentStoreServer>> AgentStoreServer::Start(
    int port) {
  ScopedFd listen_fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listen_fd.valid()) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a socket: ", ErrnoText(errno)));
  }
  const int one = 1;
  setsockopt(listen_fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(listen_fd.get(), reinterpret_cast<sockaddr*>(&address),
           sizeof(address)) != 0 ||
      listen(listen_fd.get(), 64) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on port ", port, ": ", ErrnoText(errno),
        " (is another job using it? pick another --rdzv_endpoint port)"));
  }
  ScopedFd wake_read, wake_write;
  absl::Status status = MakePipe(&wake_read, &wake_write);
  if (!status.ok()) return status;
  return std::unique_ptr<AgentStoreServer>(new AgentStoreServer(
      std::move(listen_fd), std::move(wake_read), std::move(wake_write)));
}

AgentStoreServer::AgentStoreServer(ScopedFd listen_fd, ScopedFd wake_read,
                                   ScopedFd wake_write)
    : listen_fd_(std::move(listen_fd)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)) {
  thread_ = std::thread([this] { Serve(); });
}

AgentStoreServer::~AgentStoreServer() {
  wake_write_.reset();  // EOF on wake_read_ ends Serve.
  thread_.join();
}

void AgentStoreServer::Serve() {
  absl::flat_hash_map<std::string, std::string> values;
  std::vector<ServerConnection> connections;
  while (true) {
    std::vector<pollfd> fds = {{wake_read_.get(), POLLIN, 0},
                               {listen_fd_.get(), POLLIN, 0}};
    for (const ServerConnection& c : connections) {
      fds.push_back({c.fd.get(), POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      CHECK_EQ(errno, EINTR) << "agent store poll: " << ErrnoText(errno);
      continue;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents != 0) {
      ScopedFd client(accept4(listen_fd_.get(), nullptr, nullptr,
                              SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (client.valid()) connections.push_back({std::move(client), ""});
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      ServerConnection& c = connections[i - 2];
      char bytes[4096];
      const ssize_t n = read(c.fd.get(), bytes, sizeof(bytes));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        c.fd.reset();
        continue;
      }
      c.pending.append(bytes, n);
      size_t newline;
      while ((newline = c.pending.find('\n')) != std::string::npos) {
        const std::string reply =
            Reply(absl::string_view(c.pending).substr(0, newline), values);
        c.pending.erase(0, newline + 1);
        // A client that reads nothing for a second is dropped.
        if (SendAll(c.fd.get(), absl::StrCat(reply, "\n"),
                    absl::Now() + absl::Seconds(1)) != 0) {
          c.fd.reset();
        }
        if (!c.fd.valid()) break;
      }
    }
    connections.erase(
        std::remove_if(connections.begin(), connections.end(),
                       [](const ServerConnection& c) { return !c.fd.valid(); }),
        connections.end());
  }
}

absl::StatusOr<std::unique_ptr<AgentStoreClient>> AgentStoreClient::Connect(
    const std::string& host, int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const int resolved =
      getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &addresses);
  if (resolved != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", host, "': ", gai_strerror(resolved)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(addresses,
                                                           &freeaddrinfo);
  std::string last_error = "no address";
  while (true) {
    for (const addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
      ScopedFd fd(socket(a->ai_family,
                         a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                         a->ai_protocol));
      if (!fd.valid()) continue;
      int error = 0;
      if (connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
        error = errno;
        if (error == EINPROGRESS) {
          pollfd p = {fd.get(), POLLOUT, 0};
          socklen_t length = sizeof(error);
          if (poll(&p, 1, MillisecondsUntil(deadline)) != 1) {
            error = ETIMEDOUT;
          } else {
            getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
          }
        }
      }
      if (error == 0) {
        const int one = 1;
        setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return std::unique_ptr<AgentStoreClient>(
            new AgentStoreClient(std::move(fd), timeout));
      }
      last_error = ErrnoText(error);
    }
    if (absl::Now() + kConnectRetryInterval >= deadline) break;
    absl::SleepFor(kConnectRetryInterval);
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", host, ":", port, " within ",
                   absl::FormatDuration(timeout), ": ", last_error));
}

absl::StatusOr<std::string> AgentStoreClient::Call(const std::string& request) {
  const absl::Time deadline = absl::Now() + timeout_;
  if (const int error =
          SendAll(fd_.get(), absl::StrCat(request, "\n"), deadline);
      error != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot send to the store: ", ErrnoText(error)));
  }
  size_t newline;
  while ((newline = pending_.find('\n')) == std::string::npos) {
    pollfd p = {fd_.get(), POLLIN, 0};
    const int ready = poll(&p, 1, MillisecondsUntil(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no reply from the store within ", absl::FormatDuration(timeout_)));
    }
    char bytes[4096];
    const ssize_t n = read(fd_.get(), bytes, sizeof(bytes));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "the store closed the connection",
          n < 0 ? absl::StrCat(": ", ErrnoText(errno)) : std::string()));
    }
    pending_.append(bytes, n);
  }
  std::string reply = pending_.substr(0, newline);
  pending_.erase(0, newline + 1);
  if (reply.rfind("E ", 0) == 0) {
    return absl::InternalError(
        absl::StrCat("the store refused '", request, "': ", reply.substr(2)));
  }
  return reply;
}

absl::StatusOr<int64_t> AgentStoreClient::Add(absl::string_view key,
                                              int64_t increment) {
  absl::StatusOr<std::string> reply =
      Call(absl::StrCat("ADD ", key, " ", increment));
  if (!reply.ok()) return reply.status();
  int64_t value = 0;
  if (!absl::SimpleAtoi(*reply, &value)) {
    return absl::InternalError(
        absl::StrCat("the store answered '", *reply, "' to ADD ", key));
  }
  return value;
}

absl::Status AgentStoreClient::Set(absl::string_view key,
                                   absl::string_view value) {
  std::string line(value);
  std::replace(line.begin(), line.end(), '\n', ' ');
  return Call(absl::StrCat("SET ", key, " ", line)).status();
}

absl::StatusOr<std::optional<std::string>> AgentStoreClient::Get(
    absl::string_view key) {
  absl::StatusOr<std::string> reply = Call(absl::StrCat("GET ", key));
  if (!reply.ok()) return reply.status();
  if (*reply == "N") return std::optional<std::string>();
  if (reply->rfind("V ", 0) != 0) {
    return absl::InternalError(
        absl::StrCat("the store answered '", *reply, "' to GET ", key));
  }
  return std::optional<std::string>(reply->substr(2));
}

}  // namespace strata::launch
