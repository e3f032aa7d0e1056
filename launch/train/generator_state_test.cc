#include "launch/train/generator_state.h"

#include <ATen/Functions.h>
#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "comm/testing/multi_rank.h"

namespace strata::launch {
namespace {

using ::strata::checkpoint::Bytes;
using ::strata::checkpoint::NamedValues;
using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Per-rank states "s<r>" for ranks 0..n-1 plus a sampler entry.
NamedValues Saved(int n) {
  NamedValues extra = {{"sampler.position", int64_t{4}}};
  for (int r = 0; r < n; ++r) {
    extra.emplace_back(GeneratorKeyForRank(r), Bytes{"s" + std::to_string(r)});
  }
  return extra;
}

TEST(GeneratorStateTest, GatherGivesOneKeyPerRankInRankOrder) {
  ASSERT_OK_AND_ASSIGN(NamedValues one, GatherGeneratorStates(nullptr));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].first, "generator.cpu.rank0");
  EXPECT_EQ(std::get<Bytes>(one[0].second).data, DefaultGeneratorState());

  ASSERT_THAT(comm::testing::RunOnRanks(
                  3,
                  [](comm::Group& group) {
                    auto got = GatherGeneratorStates(&group);
                    ASSERT_THAT(got.status(), IsOk());
                    std::vector<std::string> keys;
                    for (const auto& kv : *got) keys.push_back(kv.first);
                    EXPECT_THAT(keys, ElementsAre("generator.cpu.rank0",
                                                  "generator.cpu.rank1",
                                                  "generator.cpu.rank2"));
                  }),
              IsOk());
}

TEST(GeneratorStateTest, EachRankChoosesItsOwnState) {
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_OK_AND_ASSIGN(GeneratorStateChoice c,
                         ChooseGeneratorState(Saved(3), rank, 3, "ckpt"));
    EXPECT_TRUE(c.found);
    EXPECT_EQ(c.state, "s" + std::to_string(rank));
    EXPECT_EQ(c.key, GeneratorKeyForRank(rank));
    EXPECT_EQ(c.saved_ranks, 3);
    EXPECT_TRUE(c.unused_ranks.empty());
  }
}

TEST(GeneratorStateTest, FewerRanksLeaveTheOthersStatesUnused) {
  ASSERT_OK_AND_ASSIGN(GeneratorStateChoice c,
                       ChooseGeneratorState(Saved(4), 1, 2, "ckpt"));
  EXPECT_EQ(c.state, "s1");
  EXPECT_THAT(c.unused_ranks, ElementsAre(2, 3));
}

TEST(GeneratorStateTest, MoreRanksFindNoStateForTheNewRanks) {
  ASSERT_OK_AND_ASSIGN(GeneratorStateChoice c,
                       ChooseGeneratorState(Saved(2), 3, 4, "ckpt"));
  EXPECT_FALSE(c.found);
  EXPECT_EQ(c.saved_ranks, 2);
  EXPECT_TRUE(c.unused_ranks.empty());
}

TEST(GeneratorStateTest, LegacySingleStateIsRestoredOnEveryRank) {
  const NamedValues extra = {{"generator.cpu", Bytes{"old"}}};
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_OK_AND_ASSIGN(GeneratorStateChoice c,
                         ChooseGeneratorState(extra, rank, 2, "ckpt"));
    EXPECT_TRUE(c.found);
    EXPECT_EQ(c.state, "old");
    EXPECT_EQ(c.key, "generator.cpu");
  }
}

TEST(GeneratorStateTest, NoGeneratorKeysFindNothing) {
  ASSERT_OK_AND_ASSIGN(GeneratorStateChoice c,
                       ChooseGeneratorState(Saved(0), 0, 1, "ckpt"));
  EXPECT_FALSE(c.found);
  EXPECT_EQ(c.saved_ranks, 0);
}

TEST(GeneratorStateTest, MalformedKeysAndValuesAreErrorsNamingTheKey) {
  NamedValues not_bytes = {{"generator.cpu.rank0", int64_t{3}}};
  EXPECT_THAT(ChooseGeneratorState(not_bytes, 0, 1, "ckpt/step_4"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("ckpt/step_4"),
                             HasSubstr("'generator.cpu.rank0' is not bytes"))));
  for (const std::string key : {"generator.cpu.rankx", "generator.cpu.rank-1",
                                "generator.cpu.rank01", "generator.cpu.rank"}) {
    NamedValues bad = {{key, Bytes{"s"}}};
    EXPECT_THAT(ChooseGeneratorState(bad, 0, 1, "ckpt"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("'" + key + "' does not name a rank")))
        << key;
  }
  NamedValues twice = Saved(1);
  twice.push_back(twice.back());
  EXPECT_THAT(ChooseGeneratorState(twice, 0, 1, "ckpt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'generator.cpu.rank0' appears more than")));
}

TEST(GeneratorStateTest, SetStateReplaysTheSameDraws) {
  at::manual_seed(11);
  const std::string state = DefaultGeneratorState();
  const at::Tensor first = at::randn({16});
  ASSERT_THAT(SetDefaultGeneratorState(state, "ckpt"), IsOk());
  EXPECT_TRUE(at::equal(at::randn({16}), first));
}

TEST(GeneratorStateTest, RejectedStateIsAnErrorAndLeavesTheGenerator) {
  at::manual_seed(12);
  const std::string before = DefaultGeneratorState();
  EXPECT_THAT(
      SetDefaultGeneratorState("not a state", "ckpt/step_8"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ckpt/step_8")));
  EXPECT_EQ(DefaultGeneratorState(), before);
}

}  // namespace
}  // namespace strata::launch
