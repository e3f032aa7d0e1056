#include "launch/node_rounds.h"

#include <glog/logging.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace strata::launch {
namespace {

std::string RoundKey(int round, const std::string& name) {
  return absl::StrCat("round/", round, "/", name);
}

}  // namespace

std::string EncodeRoundFailure(const RoundFailure& failure) {
  return absl::StrCat(failure.restartable ? "R" : "A", " ", failure.exit_code,
                      " ", failure.text);
}

absl::StatusOr<RoundFailure> DecodeRoundFailure(const std::string& value) {
  const size_t space = value.find(' ', 2);
  RoundFailure failure;
  if (value.size() < 4 || (value[0] != 'R' && value[0] != 'A') ||
      value[1] != ' ' || space == std::string::npos ||
      !absl::SimpleAtoi(value.substr(2, space - 2), &failure.exit_code)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "agent store: a round failure must read \"<R|A> <exit code> <text>\", "
        "got '",
        value, "'"));
  }
  failure.restartable = value[0] == 'R';
  failure.text = value.substr(space + 1);
  return failure;
}

NodeRounds::NodeRounds(const NodeRoundsOptions& options) : options_(options) {}

NodeRounds::~NodeRounds() = default;

std::string NodeRounds::Endpoint() const {
  return absl::StrCat(options_.host, ":", options_.port);
}

absl::Status NodeRounds::Annotate(const absl::Status& status,
                                  const std::string& what) const {
  if (status.ok()) return status;
  return absl::UnavailableError(absl::StrCat(
      "node ", options_.node_rank, ": ", what, " failed at the agent store ",
      Endpoint(),
      " (--rdzv_endpoint, served by node 0's launcher): ", status.message()));
}

absl::Status NodeRounds::CheckInterrupted(const std::string& what) const {
  if (!options_.interrupted || !options_.interrupted()) {
    return absl::OkStatus();
  }
  return absl::CancelledError(
      absl::StrCat("node ", options_.node_rank,
                   "'s launcher received SIGINT/SIGTERM while waiting for ",
                   what, " (agent store ", Endpoint(), ")"));
}

absl::StatusOr<std::unique_ptr<NodeRounds>> NodeRounds::Connect(
    const NodeRoundsOptions& options) {
  std::unique_ptr<NodeRounds> rounds(new NodeRounds(options));
  if (options.node_rank == 0) {
    absl::StatusOr<std::unique_ptr<AgentStoreServer>> server =
        AgentStoreServer::Start(options.port);
    if (!server.ok()) return rounds->Annotate(server.status(), "serving");
    rounds->server_ = *std::move(server);
  }
  absl::StatusOr<std::unique_ptr<AgentStoreClient>> client =
      AgentStoreClient::Connect(options.host, options.port, options.timeout);
  if (!client.ok()) return rounds->Annotate(client.status(), "connecting");
  rounds->client_ = *std::move(client);
  absl::StatusOr<int64_t> connected = rounds->Count("connected", 1);
  if (!connected.ok()) return connected.status();
  return rounds;
}

absl::StatusOr<int64_t> NodeRounds::Count(const std::string& key,
                                          int64_t increment) {
  absl::StatusOr<int64_t> value = client_->Add(key, increment);
  if (!value.ok()) {
    return Annotate(value.status(), absl::StrCat("adding to '", key, "'"));
  }
  return value;
}

absl::Status NodeRounds::Set(const std::string& key, const std::string& value) {
  return Annotate(client_->Set(key, value),
                  absl::StrCat("setting '", key, "'"));
}

absl::StatusOr<std::optional<std::string>> NodeRounds::Get(
    const std::string& key, bool wait) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    absl::StatusOr<std::optional<std::string>> value = client_->Get(key);
    if (!value.ok()) {
      return Annotate(value.status(), absl::StrCat("reading '", key, "'"));
    }
    if (value->has_value() || !wait) return value;
    absl::Status interrupted = CheckInterrupted(absl::StrCat("'", key, "'"));
    if (!interrupted.ok()) return interrupted;
    if (absl::Now() >= deadline) {
      return absl::NotFoundError(absl::StrCat(
          "node ", options_.node_rank, ": agent store key '", key,
          "' was not set within ", absl::FormatDuration(options_.timeout),
          " (--rdzv_join_timeout_s; agent store ", Endpoint(), ")"));
    }
    absl::SleepFor(options_.poll_interval);
  }
}

absl::Status NodeRounds::JoinRound(int round) {
  absl::Status status =
      Set(RoundKey(round, absl::StrCat("node/", options_.node_rank)), "1");
  if (!status.ok()) return status;
  absl::StatusOr<int64_t> joined = Count(RoundKey(round, "joined"), 1);
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (joined.ok() && *joined < options_.nnodes && absl::Now() < deadline) {
    status = CheckInterrupted(
        absl::StrCat("the other nodes to join restart round ", round));
    if (!status.ok()) return status;
    absl::SleepFor(options_.poll_interval);
    joined = Count(RoundKey(round, "joined"), 0);
  }
  if (!joined.ok()) return joined.status();
  if (*joined >= options_.nnodes) return absl::OkStatus();
  std::vector<std::string> missing;
  for (int node = 0; node < options_.nnodes; ++node) {
    absl::StatusOr<std::optional<std::string>> present =
        Get(RoundKey(round, absl::StrCat("node/", node)), /*wait=*/false);
    if (!present.ok()) return present.status();
    if (!present->has_value()) missing.push_back(absl::StrCat("node ", node));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(absl::StrJoin(missing, ", "), " did not join restart round ",
                   round, " within ", absl::FormatDuration(options_.timeout),
                   " (--rdzv_join_timeout_s; agent store ", Endpoint(), ")"));
}

absl::StatusOr<int> NodeRounds::AgreeMasterPort(int round, int picked_port) {
  const std::string key = RoundKey(round, "master_port");
  if (options_.node_rank == 0) {
    absl::Status status = Set(key, absl::StrCat(picked_port));
    if (!status.ok()) return status;
    return picked_port;
  }
  absl::StatusOr<std::optional<std::string>> value = Get(key, /*wait=*/true);
  if (!value.ok()) return value.status();
  int port = 0;
  if (!absl::SimpleAtoi(**value, &port)) {
    return absl::InternalError(absl::StrCat(
        "agent store key '", key, "' holds '", **value, "', not a port"));
  }
  return port;
}

absl::StatusOr<std::optional<RoundFailure>> NodeRounds::ReadFailure(int round,
                                                                    bool wait) {
  absl::StatusOr<std::optional<std::string>> value =
      Get(RoundKey(round, "failure"), wait);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::optional<RoundFailure>();
  absl::StatusOr<RoundFailure> failure = DecodeRoundFailure(**value);
  if (!failure.ok()) return failure.status();
  return std::optional<RoundFailure>(*std::move(failure));
}

absl::StatusOr<RoundFailure> NodeRounds::PublishFailure(
    int round, const RoundFailure& failure) {
  absl::StatusOr<int64_t> publishers = Count(RoundKey(round, "failures"), 1);
  if (!publishers.ok()) return publishers.status();
  if (*publishers == 1) {
    absl::Status status =
        Set(RoundKey(round, "failure"), EncodeRoundFailure(failure));
    if (!status.ok()) return status;
    return failure;
  }
  // Another node counted first; its text follows at once.
  absl::StatusOr<std::optional<RoundFailure>> standing =
      ReadFailure(round, /*wait=*/true);
  if (!standing.ok()) return standing.status();
  return **standing;
}

absl::StatusOr<std::optional<RoundFailure>> NodeRounds::PolledFailure(
    int round) {
  return ReadFailure(round, /*wait=*/false);
}

absl::StatusOr<std::optional<RoundFailure>> NodeRounds::FinishRound(int round) {
  absl::StatusOr<int64_t> done = Count(RoundKey(round, "done"), 1);
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (done.ok()) {
    absl::StatusOr<std::optional<RoundFailure>> failure = PolledFailure(round);
    if (!failure.ok()) return failure.status();
    if (failure->has_value()) return failure;
    if (*done >= options_.nnodes) return std::optional<RoundFailure>();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "node ", options_.node_rank, "'s ranks finished restart round ",
          round, " but only ", *done, " of ", options_.nnodes,
          " nodes did within ", absl::FormatDuration(options_.timeout),
          " (--rdzv_join_timeout_s; agent store ", Endpoint(), ")"));
    }
    absl::Status interrupted = CheckInterrupted(
        absl::StrCat("the other nodes to finish restart round ", round));
    if (!interrupted.ok()) return interrupted;
    absl::SleepFor(options_.poll_interval);
    done = Count(RoundKey(round, "done"), 0);
  }
  return done.status();
}

void NodeRounds::Leave() {
  if (left_) return;
  left_ = true;
  if (options_.node_rank != 0) {
    const absl::StatusOr<int64_t> left = Count("left", 1);
    if (!left.ok()) VLOG(1) << left.status();
    return;
  }
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    const absl::StatusOr<int64_t> left = Count("left", 0);
    const absl::StatusOr<int64_t> connected = Count("connected", 0);
    if (!left.ok() || !connected.ok()) return;
    if (*left >= *connected - 1) return;
    if (!CheckInterrupted("the other nodes to leave").ok()) return;
    if (absl::Now() >= deadline) {
      LOG(WARNING) << *connected - 1 - *left << " node(s) still used the "
                   << "agent store " << Endpoint() << " after "
                   << absl::FormatDuration(options_.timeout)
                   << "; node 0 stops serving it";
      return;
    }
    absl::SleepFor(options_.poll_interval);
  }
}

}  // namespace strata::launch
