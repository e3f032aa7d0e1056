#include "launch/launcher_options.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::launch {
namespace {

// Set by the launcher for each rank; extra_env may not override them.
constexpr const char* kRendezvousVars[] = {"MASTER_ADDR",
                                           "MASTER_PORT",
                                           "RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK",
                                           "GROUP_WORLD_SIZE",
                                           "TORCHELASTIC_RESTART_COUNT",
                                           "TORCHELASTIC_MAX_RESTARTS"};

absl::Status ValidateAgentStore(const LauncherOptions& options) {
  if (options.rdzv_port < 0 || options.rdzv_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_endpoint's port must be in [1, 65535] (0: --master_port + 1), "
        "got ",
        options.rdzv_port));
  }
  if (!UsesAgentStore(options)) return absl::OkStatus();
  if (options.rdzv_port == 0 &&
      (options.master_port == 0 || options.master_port == 65535)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv_endpoint must name a port when --master_port is ",
                     options.master_port,
                     " (the agent store's default port is --master_port + 1)"));
  }
  if (AgentStorePort(options) == options.master_port &&
      AgentStoreHost(options) == options.master_addr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_endpoint must differ from --master_addr:--master_port (",
        options.master_addr, ":", options.master_port,
        "): rank 0 serves its own store there"));
  }
  if (!(options.rdzv_join_timeout > absl::ZeroDuration())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv_join_timeout_s must be > 0, got ",
                     absl::FormatDuration(options.rdzv_join_timeout)));
  }
  return absl::OkStatus();
}

}  // namespace

bool UsesAgentStore(const LauncherOptions& options) {
  return options.nnodes > 1 && options.max_restarts > 0;
}

std::string AgentStoreHost(const LauncherOptions& options) {
  return options.rdzv_host.empty() ? options.master_addr : options.rdzv_host;
}

int AgentStorePort(const LauncherOptions& options) {
  return options.rdzv_port != 0 ? options.rdzv_port : options.master_port + 1;
}

absl::Status SetRdzvEndpointFromFlag(const std::string& endpoint,
                                     LauncherOptions* options) {
  if (endpoint.empty()) return absl::OkStatus();
  const size_t colon = endpoint.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_endpoint must be host:port with a port in [1, 65535], got '",
        endpoint, "'"));
  }
  options->rdzv_host = endpoint.substr(0, colon);
  options->rdzv_port = port;
  return absl::OkStatus();
}

absl::Status SetHeartbeatFromFlags(double heartbeat_timeout_s,
                                   double heartbeat_startup_timeout_s,
                                   LauncherOptions* options) {
  if (!(heartbeat_timeout_s >= 0) || std::isinf(heartbeat_timeout_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heartbeat_timeout_s must be a finite number >= 0, got ",
                     heartbeat_timeout_s));
  }
  if (!(heartbeat_startup_timeout_s > 0) ||
      std::isinf(heartbeat_startup_timeout_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--heartbeat_startup_timeout_s must be a finite number > 0, got ",
        heartbeat_startup_timeout_s));
  }
  options->heartbeat_timeout = absl::Seconds(heartbeat_timeout_s);
  options->heartbeat_startup_timeout =
      absl::Seconds(heartbeat_startup_timeout_s);
  return absl::OkStatus();
}

absl::Status ValidateLauncherOptions(const LauncherOptions& options) {
  if (options.nproc_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nproc_per_node must be >= 1, got ", options.nproc_per_node));
  }
  if (options.nnodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes must be >= 1, got ", options.nnodes));
  }
  if (static_cast<int64_t>(options.nnodes) * options.nproc_per_node >
      std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes * --nproc_per_node must fit in an int, got ",
                     options.nnodes, " * ", options.nproc_per_node));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node_rank must be in [0, --nnodes=", options.nnodes,
                     "), got ", options.node_rank));
  }
  if (options.master_addr.empty()) {
    return absl::InvalidArgumentError("--master_addr must not be empty");
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master_port must be in [0, 65535] (0: pick a free "
                     "port), got ",
                     options.master_port));
  }
  if (options.master_port == 0 && options.nnodes != 1 &&
      !UsesAgentStore(options)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--master_port=0 (pick a free port) needs --nnodes=1, or "
        "--max_restarts > 0 (node 0 then publishes the port in the agent "
        "store), since other nodes cannot learn the port; got --nnodes=",
        options.nnodes));
  }
  if (absl::Status status = ValidateAgentStore(options); !status.ok()) {
    return status;
  }
  if (options.num_threads_per_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads_per_rank must be >= 0 (0: an even share of the "
                     "CPUs), got ",
                     options.num_threads_per_rank));
  }
  if (options.stop_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stop_grace_s must be >= 0, got ",
                     absl::FormatDuration(options.stop_grace)));
  }
  if (options.heartbeat_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heartbeat_timeout_s must be >= 0, got ",
                     absl::FormatDuration(options.heartbeat_timeout)));
  }
  if (options.heartbeat_startup_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heartbeat_startup_timeout_s must be > 0, got ",
                     absl::FormatDuration(options.heartbeat_startup_timeout)));
  }
  if (options.max_restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_restarts must be >= 0 (0: no restarts), got ",
                     options.max_restarts));
  }
  if (options.command.empty()) {
    return absl::InvalidArgumentError(
        "no program given; usage: launch [flags] [--] program [args...]");
  }
  if (options.command[0].empty()) {
    return absl::InvalidArgumentError("the program name must not be empty");
  }
  for (const auto& [key, value] : options.extra_env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extra_env names must be non-empty and contain no '=', got '", key,
          "'"));
    }
    for (const char* managed : kRendezvousVars) {
      if (key == managed) {
        return absl::InvalidArgumentError(absl::StrCat(
            "extra_env may not set ", key, ": the launcher sets it per rank"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace strata::launch
