#include "comm/environment.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata::comm {
namespace {

constexpr int kDefaultMasterPort = 29500;

// Parses variable `name` as an integer in [min_value, max_value].
absl::StatusOr<int> ParseInt(const EnvLookup& env, const std::string& name,
                             int min_value, int max_value) {
  std::optional<std::string> value = env(name);
  if (!value.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, " is not set"));
  }
  int parsed = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*value), &parsed)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "environment variable %s='%s' is not an integer", name, *value));
  }
  if (parsed < min_value || parsed > max_value) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "environment variable %s=%d is out of range: expected %d..%d", name,
        parsed, min_value, max_value));
  }
  return parsed;
}

// Like ParseInt, but returns `fallback` when the variable is unset.
absl::StatusOr<int> ParseIntOr(const EnvLookup& env, const std::string& name,
                               int min_value, int max_value, int fallback) {
  if (!env(name).has_value()) return fallback;
  return ParseInt(env, name, min_value, max_value);
}

constexpr int kMaxInt = std::numeric_limits<int>::max();

absl::Status CheckRankBelow(const std::string& rank_name, int rank,
                            const std::string& size_name, int size) {
  if (rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "environment variables contradict each other: %s=%d but %s=%d; a "
        "rank must be below the size (ranks count from 0)",
        rank_name, rank, size_name, size));
  }
  return absl::OkStatus();
}

absl::Status ReadMasterAddr(const EnvLookup& env, RendezvousInfo& info,
                            bool required_for_multi_node) {
  if (std::optional<std::string> addr = env("MASTER_ADDR")) {
    std::string trimmed(absl::StripAsciiWhitespace(*addr));
    if (trimmed.empty()) {
      return absl::InvalidArgumentError(
          "environment variable MASTER_ADDR is set but empty; set it to the "
          "host name or address of rank 0's machine");
    }
    info.master_addr = trimmed;
  } else if (required_for_multi_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable MASTER_ADDR is not set; ", info.source,
        " with ranks on several nodes needs it to find rank 0's store"));
  }
  auto port = ParseIntOr(env, "MASTER_PORT", 1, 65535, info.master_port);
  if (!port.ok()) return port.status();
  info.master_port = *port;
  return absl::OkStatus();
}

absl::StatusOr<RendezvousInfo> FromTorchrun(const EnvLookup& env) {
  RendezvousInfo info;
  info.source = "torchrun";
  if (!env("WORLD_SIZE").has_value()) {
    return absl::InvalidArgumentError(
        "environment variable RANK is set but WORLD_SIZE is not; torchrun "
        "sets both (set WORLD_SIZE to the number of ranks)");
  }
  if (!env("RANK").has_value()) {
    return absl::InvalidArgumentError(
        "environment variable WORLD_SIZE is set but RANK is not; torchrun "
        "sets both (set RANK to this process's rank)");
  }
  auto world_size = ParseInt(env, "WORLD_SIZE", 1, kMaxInt);
  if (!world_size.ok()) return world_size.status();
  auto rank = ParseInt(env, "RANK", 0, kMaxInt);
  if (!rank.ok()) return rank.status();
  auto status = CheckRankBelow("RANK", *rank, "WORLD_SIZE", *world_size);
  if (!status.ok()) return status;
  info.world_size = *world_size;
  info.rank = *rank;

  // LOCAL_WORLD_SIZE defaults to WORLD_SIZE (one node); LOCAL_RANK to RANK.
  auto local_world_size =
      ParseIntOr(env, "LOCAL_WORLD_SIZE", 1, kMaxInt, info.world_size);
  if (!local_world_size.ok()) return local_world_size.status();
  auto local_rank =
      ParseIntOr(env, "LOCAL_RANK", 0, kMaxInt, info.rank % *local_world_size);
  if (!local_rank.ok()) return local_rank.status();
  status = CheckRankBelow("LOCAL_RANK", *local_rank, "LOCAL_WORLD_SIZE",
                          *local_world_size);
  if (!status.ok()) return status;
  if (*local_world_size > info.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "environment variables contradict each other: LOCAL_WORLD_SIZE=%d is "
        "larger than WORLD_SIZE=%d",
        *local_world_size, info.world_size));
  }
  info.local_world_size = *local_world_size;
  info.local_rank = *local_rank;
  // GROUP_RANK: torchrun's (and the launcher's) node index; absent with a
  // hand-set environment, which names no node.
  auto node_rank = ParseIntOr(env, "GROUP_RANK", 0, kMaxInt, -1);
  if (!node_rank.ok()) return node_rank.status();
  info.node_rank = *node_rank;
  status = ReadMasterAddr(
      env, info,
      /*required_for_multi_node=*/info.local_world_size < info.world_size);
  if (!status.ok()) return status;
  if (std::optional<std::string> agent = env("TORCHELASTIC_USE_AGENT_STORE")) {
    info.store_served_externally =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(*agent)) == "true";
  }
  auto restart_count =
      ParseIntOr(env, "TORCHELASTIC_RESTART_COUNT", 0, kMaxInt, 0);
  if (!restart_count.ok()) return restart_count.status();
  info.restart_count = *restart_count;
  return info;
}

absl::StatusOr<RendezvousInfo> FromSlurm(const EnvLookup& env) {
  RendezvousInfo info;
  info.source = "slurm";
  auto world_size = ParseInt(env, "SLURM_NTASKS", 1, kMaxInt);
  if (!world_size.ok()) return world_size.status();
  auto rank = ParseInt(env, "SLURM_PROCID", 0, kMaxInt);
  if (!rank.ok()) return rank.status();
  auto status =
      CheckRankBelow("SLURM_PROCID", *rank, "SLURM_NTASKS", *world_size);
  if (!status.ok()) return status;
  info.world_size = *world_size;
  info.rank = *rank;
  auto local_rank = ParseIntOr(env, "SLURM_LOCALID", 0, kMaxInt, 0);
  if (!local_rank.ok()) return local_rank.status();
  info.local_rank = *local_rank;
  // SLURM_NTASKS_PER_NODE may be absent (heterogeneous jobs); SLURM_STEP_TASKS_
  // PER_NODE has a compressed form ("4(x2)"), so count on this node instead.
  auto local_world_size = ParseIntOr(env, "SLURM_NTASKS_PER_NODE", 1, kMaxInt,
                                     /*fallback=*/0);
  if (!local_world_size.ok()) return local_world_size.status();
  info.local_world_size =
      *local_world_size > 0 ? *local_world_size : info.local_rank + 1;
  status = CheckRankBelow("SLURM_LOCALID", info.local_rank,
                          "SLURM_NTASKS_PER_NODE", info.local_world_size);
  if (!status.ok()) return status;
  auto node_id = ParseIntOr(env, "SLURM_NODEID", 0, kMaxInt, 0);
  if (!node_id.ok()) return node_id.status();
  info.node_rank = *node_id;

  if (env("MASTER_ADDR").has_value()) {
    status = ReadMasterAddr(env, info, /*required_for_multi_node=*/false);
    if (!status.ok()) return status;
  } else {
    std::optional<std::string> nodelist = env("SLURM_JOB_NODELIST");
    if (!nodelist.has_value()) nodelist = env("SLURM_NODELIST");
    if (!nodelist.has_value()) {
      return absl::InvalidArgumentError(
          "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; under Slurm the "
          "rendezvous host is the first node of the job (set MASTER_ADDR to "
          "override)");
    }
    auto host = FirstSlurmHost(*nodelist);
    if (!host.ok()) return host.status();
    info.master_addr = *host;
    // A port all tasks of the job agree on without talking: derived from the
    // job id (as torch's Slurm recipes do), unless MASTER_PORT says otherwise.
    auto job_id = ParseIntOr(env, "SLURM_JOB_ID", 0, kMaxInt, 0);
    if (!job_id.ok()) return job_id.status();
    info.master_port = 20000 + (*job_id % 20000);
    status = ReadMasterAddr(env, info, /*required_for_multi_node=*/false);
    if (!status.ok()) return status;
  }
  return info;
}

absl::StatusOr<RendezvousInfo> FromOpenMpi(const EnvLookup& env) {
  RendezvousInfo info;
  info.source = "openmpi";
  auto world_size = ParseInt(env, "OMPI_COMM_WORLD_SIZE", 1, kMaxInt);
  if (!world_size.ok()) return world_size.status();
  auto rank = ParseInt(env, "OMPI_COMM_WORLD_RANK", 0, kMaxInt);
  if (!rank.ok()) return rank.status();
  auto status = CheckRankBelow("OMPI_COMM_WORLD_RANK", *rank,
                               "OMPI_COMM_WORLD_SIZE", *world_size);
  if (!status.ok()) return status;
  info.world_size = *world_size;
  info.rank = *rank;
  auto local_world_size = ParseIntOr(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1,
                                     kMaxInt, info.world_size);
  if (!local_world_size.ok()) return local_world_size.status();
  auto local_rank =
      ParseIntOr(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, kMaxInt, info.rank);
  if (!local_rank.ok()) return local_rank.status();
  status = CheckRankBelow("OMPI_COMM_WORLD_LOCAL_RANK", *local_rank,
                          "OMPI_COMM_WORLD_LOCAL_SIZE", *local_world_size);
  if (!status.ok()) return status;
  info.local_world_size = *local_world_size;
  info.local_rank = *local_rank;
  status = ReadMasterAddr(
      env, info,
      /*required_for_multi_node=*/info.local_world_size < info.world_size);
  if (!status.ok()) return status;
  return info;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<std::string> FirstSlurmHost(absl::string_view nodelist) {
  nodelist = absl::StripAsciiWhitespace(nodelist);
  // The first host ends at the first ',' outside brackets.
  size_t bracket = nodelist.find('[');
  size_t comma = nodelist.find(',');
  if (nodelist.empty() || comma == 0 || bracket == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SLURM_JOB_NODELIST='%s' is not a Slurm node list (expected e.g. "
        "'node[01-04]' or 'a1,a2')",
        nodelist));
  }
  if (bracket == absl::string_view::npos ||
      (comma != absl::string_view::npos && comma < bracket)) {
    return std::string(nodelist.substr(0, comma));
  }
  size_t close = nodelist.find(']', bracket);
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SLURM_JOB_NODELIST='%s' has an unclosed '['", nodelist));
  }
  absl::string_view range = nodelist.substr(bracket + 1, close - bracket - 1);
  absl::string_view first = range.substr(0, range.find_first_of(",-"));
  if (first.empty() || !std::all_of(first.begin(), first.end(), [](char c) {
        return absl::ascii_isdigit(c);
      })) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SLURM_JOB_NODELIST='%s': the range '[%s]' does not start with a "
        "number",
        nodelist, range));
  }
  return absl::StrCat(
      nodelist.substr(0, bracket), first,
      nodelist.substr(close + 1, nodelist.find(',', close) - close - 1));
}

absl::StatusOr<RendezvousInfo> RendezvousInfoFromEnv(const EnvLookup& env) {
  absl::StatusOr<RendezvousInfo> info;
  if (env("RANK").has_value() || env("WORLD_SIZE").has_value()) {
    info = FromTorchrun(env);
  } else if (env("SLURM_PROCID").has_value()) {
    info = FromSlurm(env);
  } else if (env("OMPI_COMM_WORLD_RANK").has_value()) {
    info = FromOpenMpi(env);
  } else {
    info = RendezvousInfo();
    auto port = ParseIntOr(env, "MASTER_PORT", 0, 65535, kDefaultMasterPort);
    if (!port.ok()) return port.status();
    info->master_port = *port;
  }
  if (!info.ok()) return info;
  if (std::optional<std::string> ifname = env("GLOO_SOCKET_IFNAME")) {
    info->gloo_interface = std::string(absl::StripAsciiWhitespace(*ifname));
  }
  if (env("STRATA_HEARTBEAT_FD").has_value() ||
      env("STRATA_HEARTBEAT_INTERVAL_MS").has_value()) {
    auto fd = ParseInt(env, "STRATA_HEARTBEAT_FD", 0, kMaxInt);
    if (!fd.ok()) return fd.status();
    auto interval_ms =
        ParseInt(env, "STRATA_HEARTBEAT_INTERVAL_MS", 1, kMaxInt);
    if (!interval_ms.ok()) return interval_ms.status();
    info->heartbeat_fd = *fd;
    info->heartbeat_interval_ms = *interval_ms;
  }
  return info;
}

}  // namespace strata::comm
