#include "checkpoint/save_plan.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/metadata.pb.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kNeverSplit = int64_t{1} << 40;

// A run of a rank's holdings: elements [offset, offset + numel) of `name`.
struct Held {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
  Section section = Section::kModel;
  std::string dtype = "Float";
};

proto::RankRuns Rank(const std::vector<Held>& held) {
  proto::RankRuns out;
  for (const Held& h : held) {
    proto::RankRuns::Run* run = out.add_runs();
    run->set_section(static_cast<int>(h.section));
    run->set_name(h.name);
    for (int64_t d : h.shape) run->add_global_shape(d);
    run->set_dtype(h.dtype);
    run->set_offset(h.offset);
    run->set_numel(h.numel);
  }
  return out;
}

// (offset, numel, rank, run) of each piece.
using PieceTuple = std::tuple<int64_t, int64_t, int, int>;
std::vector<PieceTuple> Pieces(const PlannedTensor& t) {
  std::vector<PieceTuple> out;
  for (const auto& p : t.pieces) {
    out.emplace_back(p.offset, p.numel, p.rank, p.run);
  }
  return out;
}

TEST(PlanSaveTest, OneRankWritesWhatItHolds) {
  ASSERT_OK_AND_ASSIGN(SavePlan plan,
                       PlanSave({Rank({{"w", {2, 5}, 0, 10}})}, kNeverSplit));
  ASSERT_EQ(plan.tensors.size(), 1);
  EXPECT_EQ(plan.tensors[0].name, "w");
  EXPECT_EQ(plan.tensors[0].shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(plan.tensors[0].dtype, at::kFloat);
  EXPECT_THAT(Pieces(plan.tensors[0]), ElementsAre(PieceTuple{0, 10, 0, 0}));
}

TEST(PlanSaveTest, ShardsAreWrittenByTheirOwners) {
  ASSERT_OK_AND_ASSIGN(SavePlan plan, PlanSave({Rank({{"w", {10}, 0, 4}}),
                                                Rank({{"w", {10}, 4, 6}})},
                                               kNeverSplit));
  ASSERT_EQ(plan.tensors.size(), 1);
  EXPECT_THAT(Pieces(plan.tensors[0]),
              ElementsAre(PieceTuple{0, 4, 0, 0}, PieceTuple{4, 6, 1, 0}));
}

TEST(PlanSaveTest, SmallReplicatedTensorsRotateBetweenHolders) {
  // Both ranks hold a, b and c whole (40 bytes each, below the split size):
  // each is written once, by rank (tensor index mod 2).
  const std::vector<Held> both = {
      {"a", {10}, 0, 10}, {"b", {10}, 0, 10}, {"c", {10}, 0, 10}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan,
                       PlanSave({Rank(both), Rank(both)}, kNeverSplit));
  ASSERT_EQ(plan.tensors.size(), 3);
  EXPECT_THAT(Pieces(plan.tensors[0]), ElementsAre(PieceTuple{0, 10, 0, 0}));
  EXPECT_THAT(Pieces(plan.tensors[1]), ElementsAre(PieceTuple{0, 10, 1, 1}));
  EXPECT_THAT(Pieces(plan.tensors[2]), ElementsAre(PieceTuple{0, 10, 0, 2}));
}

TEST(PlanSaveTest, LargeReplicatedRangesAreSplitBetweenHolders) {
  // 100 floats = 400 bytes, split at 100 bytes: up to 4 parts, but only two
  // holders.
  const std::vector<Held> whole = {{"w", {100}, 0, 100}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan,
                       PlanSave({Rank(whole), Rank(whole)}, 100));
  EXPECT_THAT(Pieces(plan.tensors[0]),
              ElementsAre(PieceTuple{0, 50, 0, 0}, PieceTuple{50, 50, 1, 0}));
}

TEST(PlanSaveTest, SplitIntoAsManyPartsAsTheBytesAllow) {
  // Three holders of 10 floats (40 bytes) split at 20 bytes: two parts.
  const std::vector<Held> whole = {{"w", {10}, 0, 10}};
  ASSERT_OK_AND_ASSIGN(SavePlan plan,
                       PlanSave({Rank(whole), Rank(whole), Rank(whole)}, 20));
  EXPECT_THAT(Pieces(plan.tensors[0]),
              ElementsAre(PieceTuple{0, 5, 0, 0}, PieceTuple{5, 5, 1, 0}));
}

TEST(PlanSaveTest, OverlappingRunsAreCutAtEveryBoundary) {
  // Rank 0 holds [0, 6), rank 1 [4, 10): [0, 4) only rank 0, [4, 6) both
  // (the rotation's second range: rank 1), [6, 10) only rank 1.
  ASSERT_OK_AND_ASSIGN(SavePlan plan, PlanSave({Rank({{"w", {10}, 0, 6}}),
                                                Rank({{"w", {10}, 4, 6}})},
                                               kNeverSplit));
  EXPECT_THAT(Pieces(plan.tensors[0]),
              ElementsAre(PieceTuple{0, 4, 0, 0}, PieceTuple{4, 2, 1, 0},
                          PieceTuple{6, 4, 1, 0}));
}

TEST(PlanSaveTest, PiecesNameTheRunWithinTheRanksSectionList) {
  ASSERT_OK_AND_ASSIGN(
      SavePlan plan,
      PlanSave({Rank({{"a", {2}, 0, 2},
                      {"b", {3}, 0, 3},
                      {"b.exp_avg", {3}, 0, 3, Section::kOptimizer}})},
               kNeverSplit));
  ASSERT_EQ(plan.tensors.size(), 3);
  EXPECT_EQ(plan.tensors[2].section, Section::kOptimizer);
  EXPECT_THAT(Pieces(plan.tensors[1]), ElementsAre(PieceTuple{0, 3, 0, 1}));
  EXPECT_THAT(Pieces(plan.tensors[2]), ElementsAre(PieceTuple{0, 3, 0, 0}));
}

TEST(PlanSaveTest, ModelTensorsFirstInRankZerosOrderThenLaterRanks) {
  ASSERT_OK_AND_ASSIGN(SavePlan plan,
                       PlanSave({Rank({{"m", {1}, 0, 1, Section::kOptimizer},
                                       {"b", {1}, 0, 1},
                                       {"a", {1}, 0, 1}}),
                                 Rank({{"c", {1}, 0, 1}, {"a", {1}, 0, 1}})},
                                kNeverSplit));
  std::vector<std::string> names;
  for (const PlannedTensor& t : plan.tensors) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("b", "a", "c", "m"));
}

TEST(PlanSaveTest, EmptyRunsHoldNothing) {
  ASSERT_OK_AND_ASSIGN(SavePlan plan, PlanSave({Rank({{"w", {4}, 0, 0}}),
                                                Rank({{"w", {4}, 0, 4}})},
                                               kNeverSplit));
  EXPECT_THAT(Pieces(plan.tensors[0]), ElementsAre(PieceTuple{0, 4, 1, 0}));
}

TEST(PlanSaveTest, ShapeDisagreementNamesTheTensorAndBothRanks) {
  EXPECT_THAT(
      PlanSave({Rank({{"w", {10}, 0, 10}}), Rank({{"w", {12}, 0, 12}})},
               kNeverSplit),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("'w'"), HasSubstr("rank 0 has [10] Float"),
                     HasSubstr("rank 1 has [12] Float"))));
}

TEST(PlanSaveTest, DtypeDisagreementNamesBothDtypes) {
  Held bf16 = {"w", {10}, 0, 10};
  bf16.dtype = "BFloat16";
  EXPECT_THAT(PlanSave({Rank({{"w", {10}, 0, 10}}), Rank({bf16})}, kNeverSplit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rank 0 has [10] Float"),
                             HasSubstr("rank 1 has [10] BFloat16"))));
}

TEST(PlanSaveTest, UnknownDtypeIsAnError) {
  Held odd = {"w", {10}, 0, 10};
  odd.dtype = "Float7";
  EXPECT_THAT(PlanSave({Rank({odd})}, kNeverSplit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown dtype 'Float7'")));
}

TEST(PlanSaveTest, ElementsHeldByNoRankAreNamed) {
  EXPECT_THAT(
      PlanSave({Rank({{"w", {10}, 0, 4}}), Rank({{"w", {10}, 6, 4}})},
               kNeverSplit),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("'w' [10]"),
                     HasSubstr("elements [4, 6) are held by no rank"))));
}

TEST(PlanSaveTest, TailHeldByNoRankIsNamed) {
  EXPECT_THAT(PlanSave({Rank({{"w", {10}, 0, 7}})}, kNeverSplit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("elements [7, 10) are held by no rank")));
}

TEST(MakeSavePlanTest, WithoutAGroupPlansThisProcesssState) {
  TensorState state;
  state.model.push_back({"w", {2, 3}, 0, at::zeros({2, 3})});
  state.optimizer.push_back({"step", {}, 0, at::zeros({}, at::kLong)});
  ASSERT_OK_AND_ASSIGN(SavePlan plan, MakeSavePlan(nullptr, state));
  ASSERT_EQ(plan.tensors.size(), 2);
  EXPECT_THAT(Pieces(plan.tensors[0]), ElementsAre(PieceTuple{0, 6, 0, 0}));
  EXPECT_EQ(plan.tensors[1].dtype, at::kLong);
  EXPECT_THAT(Pieces(plan.tensors[1]), ElementsAre(PieceTuple{0, 1, 0, 0}));
}

TEST(MakeSavePlanTest, RunOutsideItsShapeIsAnError) {
  TensorState state;
  state.model.push_back({"w", {4}, 2, at::zeros({3})});
  EXPECT_THAT(MakeSavePlan(nullptr, state),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("run [2, 5) is outside its global shape")));
}

}  // namespace
}  // namespace strata::checkpoint
