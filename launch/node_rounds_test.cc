#include "launch/node_rounds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/testing/status_matchers.h"
#include "launch/fds.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::testing::HasSubstr;

NodeRoundsOptions OptionsFor(int port, int node_rank) {
  NodeRoundsOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.nnodes = 2;
  options.node_rank = node_rank;
  options.timeout = absl::Seconds(10);
  options.poll_interval = absl::Milliseconds(5);
  return options;
}

// Node 0 and node 1 of a two-node job, connected to one agent store.
struct TwoNodes {
  std::unique_ptr<NodeRounds> node[2];
};

TwoNodes ConnectTwoNodes() {
  TwoNodes nodes;
  absl::StatusOr<int> port = PickFreeTcpPort();
  EXPECT_THAT(port.status(), IsOk());
  if (!port.ok()) return nodes;
  for (int rank : {0, 1}) {
    absl::StatusOr<std::unique_ptr<NodeRounds>> rounds =
        NodeRounds::Connect(OptionsFor(*port, rank));
    EXPECT_THAT(rounds.status(), IsOk());
    if (rounds.ok()) nodes.node[rank] = *std::move(rounds);
  }
  return nodes;
}

TEST(NodeRoundsTest, BothNodesJoinARoundAndNodeZerosPortStands) {
  TwoNodes nodes = ConnectTwoNodes();
  ASSERT_NE(nodes.node[1], nullptr);
  absl::Status joined1;
  absl::StatusOr<int> port1 = 0;
  std::thread node1([&] {
    joined1 = nodes.node[1]->JoinRound(0);
    if (joined1.ok()) port1 = nodes.node[1]->AgreeMasterPort(0, 1111);
  });
  EXPECT_THAT(nodes.node[0]->JoinRound(0), IsOk());
  const absl::StatusOr<int> port0 = nodes.node[0]->AgreeMasterPort(0, 2222);
  node1.join();
  EXPECT_THAT(joined1, IsOk());
  ASSERT_THAT(port0.status(), IsOk());
  ASSERT_THAT(port1.status(), IsOk());
  EXPECT_EQ(*port0, 2222);
  EXPECT_EQ(*port1, 2222);
}

TEST(NodeRoundsTest, ANodeThatNeverJoinsIsNamedAfterTheDeadline) {
  absl::StatusOr<int> port = PickFreeTcpPort();
  ASSERT_THAT(port.status(), IsOk());
  NodeRoundsOptions options = OptionsFor(*port, 0);
  // c10d counts connect timeouts in whole seconds.
  options.timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<NodeRounds>> node0 =
      NodeRounds::Connect(options);
  ASSERT_THAT(node0.status(), IsOk());
  const absl::Time start = absl::Now();
  const absl::Status status = (*node0)->JoinRound(2);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("node 1 did not join restart round 2 within 1s"));
  // The deadline plus a few store round trips of slack.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(NodeRoundsTest, ConnectingWithNoNodeZeroFailsNamingTheEndpoint) {
  absl::StatusOr<int> port = PickFreeTcpPort();
  ASSERT_THAT(port.status(), IsOk());
  NodeRoundsOptions options = OptionsFor(*port, 1);
  options.timeout = absl::Seconds(1);
  const absl::StatusOr<std::unique_ptr<NodeRounds>> node1 =
      NodeRounds::Connect(options);
  EXPECT_EQ(node1.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(node1.status().message(),
              HasSubstr(absl::StrCat("node 1: connecting failed at the "
                                     "agent store 127.0.0.1:",
                                     *port)));
}

TEST(NodeRoundsTest, TheFirstPublishedFailureStandsForEveryNode) {
  TwoNodes nodes = ConnectTwoNodes();
  ASSERT_NE(nodes.node[1], nullptr);
  EXPECT_FALSE(nodes.node[0]->PolledFailure(1)->has_value());
  const RoundFailure first{"node 1 rank 1 (pid 7) was killed by signal 9", true,
                           137};
  const RoundFailure second{"node 0 rank 0 (pid 8) exited with status 1", true,
                            1};
  const absl::StatusOr<RoundFailure> stands1 =
      nodes.node[1]->PublishFailure(1, first);
  const absl::StatusOr<RoundFailure> stands0 =
      nodes.node[0]->PublishFailure(1, second);
  ASSERT_THAT(stands1.status(), IsOk());
  ASSERT_THAT(stands0.status(), IsOk());
  EXPECT_EQ(stands1->text, first.text);
  EXPECT_EQ(stands0->text, first.text);
  EXPECT_EQ(stands0->exit_code, 137);
  const absl::StatusOr<std::optional<RoundFailure>> polled =
      nodes.node[0]->PolledFailure(1);
  ASSERT_THAT(polled.status(), IsOk());
  ASSERT_TRUE(polled->has_value());
  EXPECT_EQ((*polled)->text, first.text);
  // Other rounds are untouched.
  EXPECT_FALSE(nodes.node[0]->PolledFailure(2)->has_value());
}

TEST(NodeRoundsTest, FinishRoundReturnsOnceEveryNodeIsDone) {
  TwoNodes nodes = ConnectTwoNodes();
  ASSERT_NE(nodes.node[1], nullptr);
  absl::StatusOr<std::optional<RoundFailure>> finished1;
  std::thread node1([&] { finished1 = nodes.node[1]->FinishRound(0); });
  const absl::StatusOr<std::optional<RoundFailure>> finished0 =
      nodes.node[0]->FinishRound(0);
  node1.join();
  ASSERT_THAT(finished0.status(), IsOk());
  ASSERT_THAT(finished1.status(), IsOk());
  EXPECT_FALSE(finished0->has_value());
  EXPECT_FALSE(finished1->has_value());
}

TEST(NodeRoundsTest, FinishRoundReturnsAnotherNodesFailure) {
  TwoNodes nodes = ConnectTwoNodes();
  ASSERT_NE(nodes.node[1], nullptr);
  ASSERT_THAT(nodes.node[1]
                  ->PublishFailure(0, {"node 1 rank 1 failed", false, 3})
                  .status(),
              IsOk());
  const absl::StatusOr<std::optional<RoundFailure>> finished =
      nodes.node[0]->FinishRound(0);
  ASSERT_THAT(finished.status(), IsOk());
  ASSERT_TRUE(finished->has_value());
  EXPECT_EQ((*finished)->text, "node 1 rank 1 failed");
  EXPECT_FALSE((*finished)->restartable);
  EXPECT_EQ((*finished)->exit_code, 3);
}

TEST(RoundFailureEncodingTest, RoundTrips) {
  const RoundFailure failure{"rank 3 (pid 9) exited with status 2", false, 2};
  const absl::StatusOr<RoundFailure> decoded =
      DecodeRoundFailure(EncodeRoundFailure(failure));
  ASSERT_THAT(decoded.status(), IsOk());
  EXPECT_EQ(decoded->text, failure.text);
  EXPECT_FALSE(decoded->restartable);
  EXPECT_EQ(decoded->exit_code, 2);
}

TEST(RoundFailureEncodingTest, RejectsAValueOfAnotherShape) {
  EXPECT_EQ(DecodeRoundFailure("X 1 text").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeRoundFailure("R one text").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::launch
