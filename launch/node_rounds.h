// How the launchers of a multi-node job agree on restart rounds, like
// torchrun's c10d rendezvous: node 0's launcher serves the agent store
// (launch/agent_store.h) at the rendezvous endpoint (--rdzv_endpoint), every
// launcher connects to it, and per round k:
//
//   round/k/node/<i>      set by node i when it joins round k;
//   round/k/joined        counts the nodes that joined; a round starts once
//                         all have (JoinRound, with a deadline);
//   round/k/master_port   the ranks' MASTER_PORT when node 0 picks one;
//   round/k/failures      counts the nodes that published a failure; the
//                         first writes
//   round/k/failure       "<R|A> <exit code> <text>": R a rank failed (a
//                         restart may fix it), A the job must end;
//   round/k/done          counts the nodes whose ranks all exited 0.
//
// and, once per job, "connected" (launchers that connected) and "left"
// (those that no longer need the store; node 0 waits for them before it
// stops serving). Internal to launch/ (launcher.cc).
#ifndef STRATA_LAUNCH_NODE_ROUNDS_H_
#define STRATA_LAUNCH_NODE_ROUNDS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launch/agent_store.h"

namespace strata::launch {

struct NodeRoundsOptions {
  // The agent store: node 0 serves it on `port` (all interfaces), the others
  // connect to host:port.
  std::string host = "127.0.0.1";
  int port = 0;
  int nnodes = 2;
  int node_rank = 0;
  // Deadline of connecting, of each store call, and of a round's join
  // (--rdzv_join_timeout_s).
  absl::Duration timeout = absl::Seconds(120);
  // How often waits re-read the store.
  absl::Duration poll_interval = absl::Milliseconds(50);
  // Checked while waiting for other nodes; when it returns true (the
  // launcher got SIGINT/SIGTERM) the wait ends with Cancelled.
  std::function<bool()> interrupted;
};

// A round's failure as the store holds it: the first node to publish wins.
struct RoundFailure {
  // "node 1 rank 3 (pid 77) was killed by signal 9 (Killed)".
  std::string text;
  // False when the job must end (a program that cannot start, a launcher
  // that got SIGINT/SIGTERM or failed itself).
  bool restartable = true;
  // The shell exit code every launcher returns if the job ends with it.
  int exit_code = 1;
};

class NodeRounds {
 public:
  // Node 0 serves the store and connects to it; the others connect,
  // retrying until options.timeout. Errors name the endpoint.
  static absl::StatusOr<std::unique_ptr<NodeRounds>> Connect(
      const NodeRoundsOptions& options);
  ~NodeRounds();
  NodeRounds(const NodeRounds&) = delete;
  NodeRounds& operator=(const NodeRounds&) = delete;

  // Joins round `round` and waits until every node has. DeadlineExceeded
  // naming the missing nodes ("node 1 did not join restart round 2 within
  // 1m"), or Unavailable naming the endpoint.
  absl::Status JoinRound(int round);

  // The ranks' master port of `round`: node 0 publishes `picked_port`, the
  // others wait for it (their `picked_port` is ignored).
  absl::StatusOr<int> AgreeMasterPort(int round, int picked_port);

  // Publishes `failure` for `round` unless another node did first; returns
  // the failure that stands.
  absl::StatusOr<RoundFailure> PublishFailure(int round,
                                              const RoundFailure& failure);

  // The failure of `round` if one was published; never waits.
  absl::StatusOr<std::optional<RoundFailure>> PolledFailure(int round);

  // After this node's ranks all exited 0: marks it done and waits until
  // every node is (nullopt) or another node publishes a failure of the
  // round (returned), up to options.timeout.
  absl::StatusOr<std::optional<RoundFailure>> FinishRound(int round);

  // Says this node no longer needs the store. On node 0, waits (up to
  // options.timeout, or until options.interrupted) until every node that
  // connected has left, so that none loses the store while reading its last
  // keys. Errors are logged.
  void Leave();

  // "127.0.0.1:29501".
  std::string Endpoint() const;

 private:
  explicit NodeRounds(const NodeRoundsOptions& options);
  // `status` of a store call, if an error, as Unavailable naming the node,
  // `what` it did and the endpoint.
  absl::Status Annotate(const absl::Status& status,
                        const std::string& what) const;
  absl::StatusOr<int64_t> Count(const std::string& key, int64_t increment);
  absl::Status Set(const std::string& key, const std::string& value);
  // The value of `key`; with `wait`, waits up to the timeout for it to be
  // set (NotFound naming the key past it).
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key,
                                                 bool wait);
  absl::StatusOr<std::optional<RoundFailure>> ReadFailure(int round, bool wait);
  // Cancelled naming `what` if options_.interrupted says so, else OK.
  absl::Status CheckInterrupted(const std::string& what) const;

  NodeRoundsOptions options_;
  std::unique_ptr<AgentStoreServer> server_;  // Node 0 only.
  std::unique_ptr<AgentStoreClient> client_;
  bool left_ = false;
};

// The agent store's encoding of a failure, and back (InvalidArgument if
// `value` is not one).
std::string EncodeRoundFailure(const RoundFailure& failure);
absl::StatusOr<RoundFailure> DecodeRoundFailure(const std::string& value);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_NODE_ROUNDS_H_
