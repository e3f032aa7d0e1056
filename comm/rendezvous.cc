#include "comm/rendezvous.h"

#include <glog/logging.h>
#include <unistd.h>  // gethostname

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/status.h"
#include "base/torch_compat.h"

namespace strata::comm {
namespace {

// This machine's host name for progress records; empty when unknown.
std::string ThisHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  std::string host(name);
  // Record fields are space-separated.
  return host.find_first_of(" \t\n\r\f\v") == std::string::npos ? host : "";
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Group>> ConnectWorld(const RendezvousInfo& info,
                                                    const GroupOptions& base) {
  GroupOptions options = base;
  options.rank = info.rank;
  options.world_size = info.world_size;
  options.interface = info.gloo_interface;
  // Ranks on one machine talk over loopback; across machines, over the
  // address this host's name resolves to (or GLOO_SOCKET_IFNAME's interface).
  options.hostname = IsLoopback(info.master_addr) ? "127.0.0.1" : "";
  options.node = info.node_rank;
  if (options.host.empty()) options.host = ThisHostName();
  STRATA_RETURN_IF_ERROR(ValidateGroupOptions(options));

  c10::intrusive_ptr<c10d::Store> store;
  if (info.world_size == 1) {
    store = c10::make_intrusive<c10d::HashStore>();
  } else {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(info.master_port);
    const bool serve = info.rank == 0 && !info.store_served_externally;
    store_options.isServer = serve;
    store_options.numWorkers = info.world_size;
    torch_compat::UseClassicTcpStoreBackend(store_options);
    store_options.waitWorkers =
        false;  // Group::Create waits, with a clear error.
    store_options.timeout =
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout));
    const std::string where = absl::StrFormat(
        "%s the rendezvous store at %s:%d (rank %d of %d, from %s variables, "
        "timeout %s)",
        serve ? "serving" : "connecting to", info.master_addr, info.master_port,
        info.rank, info.world_size, info.source,
        absl::FormatDuration(options.timeout));
    absl::Status status = StatusFromCall(where, [&] {
      store =
          c10::make_intrusive<c10d::TCPStore>(info.master_addr, store_options);
    });
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat(
          absl::StripSuffix(status.message(), "."), ". ",
          serve ? "Rank 0 hosts the store: is another job already using this "
                  "port? Pick a free MASTER_PORT (the launcher's "
                  "--master_port=0 picks one)"
                : "Is rank 0 running, and do MASTER_ADDR/MASTER_PORT name its "
                  "machine and a port it can reach?"));
    }
    if (info.store_served_externally) {
      // torchrun's agent keeps its store across restarts, so what an earlier
      // round's ranks wrote (Gloo's addresses, progress records) is still
      // there; as PyTorch's env:// rendezvous does, each round works under a
      // prefix of its own.
      store = c10::make_intrusive<c10d::PrefixStore>(
          absl::StrCat("/worker/attempt_", info.restart_count), store);
    }
  }
  VLOG(1) << "rank " << info.rank << " of " << info.world_size
          << " joining group '" << options.name << "' via " << info.source;
  return Group::Create(std::move(store), options);
}

}  // namespace strata::comm
