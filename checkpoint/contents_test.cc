#include "checkpoint/contents.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Whole live tensors of the given names and shapes.
std::vector<ShardedTensor> Live(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& specs) {
  std::vector<ShardedTensor> out;
  out.reserve(specs.size());
  for (const auto& [name, shape] : specs) {
    out.push_back({name, shape, 0, at::zeros(shape)});
  }
  return out;
}

std::vector<TensorInfo> Saved(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& specs) {
  std::vector<TensorInfo> out;
  out.reserve(specs.size());
  for (const auto& [name, shape] : specs) out.push_back({name, shape});
  return out;
}

std::set<std::string> Names(const std::vector<ShardedTensor>& live) {
  std::set<std::string> names;
  for (const auto& run : live) names.insert(run.name);
  return names;
}

TEST(MatchRunsTest, EachRunGetsTheIndexOfItsSavedTensor) {
  const auto live = Live({{"a", {2}}, {"b", {3}}});
  ASSERT_OK_AND_ASSIGN(
      std::vector<int> match,
      MatchRuns("ckpt", live, Names(live), Saved({{"b", {3}}, {"a", {2}}}),
                ReadOptions(), /*revise=*/true));
  EXPECT_THAT(match, ElementsAre(1, 0));
}

TEST(MatchRunsTest, StrictListsEveryMissingAndUnexpectedKey) {
  const auto live = Live({{"a", {2}}, {"b", {3}}, {"d", {1}}});
  EXPECT_THAT(
      MatchRuns("ckpt (model)", live, Names(live),
                Saved({{"b", {3}}, {"c", {1}}, {"e", {1}}}), ReadOptions(),
                /*revise=*/true),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "ckpt (model) does not match the model; missing keys: a, d; "
               "unexpected keys: c, e"));
}

TEST(MatchRunsTest, KeyHeldOnlyByAnotherRankIsNotUnexpected) {
  // This rank holds no run of "c" (a sharded strategy's rank may not), but
  // another rank does.
  const auto live = Live({{"a", {2}}});
  ASSERT_OK_AND_ASSIGN(
      std::vector<int> match,
      MatchRuns("ckpt", live, {"a", "c"}, Saved({{"a", {2}}, {"c", {1}}}),
                ReadOptions(), /*revise=*/true));
  EXPECT_THAT(match, ElementsAre(0));
}

TEST(MatchRunsTest, ReviseKeysRenamesSavedKeysInOrder) {
  const auto live = Live({{"encoder.w", {2}}});
  ReadOptions options;
  options.revise_keys = {{"^module\\.", ""}, {"^backbone", "encoder"}};
  ASSERT_OK_AND_ASSIGN(
      std::vector<int> match,
      MatchRuns("ckpt", live, Names(live), Saved({{"module.backbone.w", {2}}}),
                options, /*revise=*/true));
  EXPECT_THAT(match, ElementsAre(0));
}

TEST(MatchRunsTest, ReviseKeysApplyOnlyWhenAsked) {
  const auto live = Live({{"w", {2}}});
  ReadOptions options;
  options.revise_keys = {{"^module\\.", ""}};
  EXPECT_THAT(MatchRuns("ckpt", live, Names(live), Saved({{"module.w", {2}}}),
                        options, /*revise=*/false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("missing keys: w"),
                             HasSubstr("unexpected keys: module.w"))));
}

TEST(MatchRunsTest, InvalidReviseKeysRegexIsNamed) {
  const auto live = Live({{"w", {2}}});
  ReadOptions options;
  options.revise_keys = {{"(", ""}};
  EXPECT_THAT(MatchRuns("ckpt", live, Names(live), Saved({{"w", {2}}}), options,
                        /*revise=*/true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("revise_keys: '(' is not a valid regex")));
}

TEST(MatchRunsTest, ShapeMismatchNamesTheKeyAndBothShapes) {
  const auto live = Live({{"w", {2, 3}}});
  EXPECT_THAT(MatchRuns("ckpt", live, Names(live), Saved({{"w", {3, 2}}}),
                        ReadOptions(), /*revise=*/true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "ckpt: key 'w' has shape [3, 2] in the checkpoint but "
                       "[2, 3] in the model"));
}

TEST(MatchRunsTest, ReportListsMissingAndUnexpectedKeysOfEveryRank) {
  // This rank holds "a" and "b"; another rank holds "d". The checkpoint's
  // "module.b" is revised to "b"; "c" and "e" are nobody's.
  const auto live = Live({{"a", {2}}, {"b", {3}}});
  ReadOptions options;
  options.strict = false;
  options.revise_keys = {{"^module\\.", ""}};
  KeyReport report;
  ASSERT_OK_AND_ASSIGN(
      std::vector<int> match,
      MatchRuns("ckpt", live, {"a", "b", "d"},
                Saved({{"module.b", {3}}, {"e", {1}}, {"c", {1}}, {"d", {1}}}),
                options, /*revise=*/true, &report));
  EXPECT_THAT(match, ElementsAre(-1, 0));
  EXPECT_EQ(report.loaded, 2);  // b, and d on the other rank.
  EXPECT_THAT(report.missing, ElementsAre("a"));
  EXPECT_THAT(report.unexpected, ElementsAre("c", "e"));
}

TEST(MatchRunsTest, ReportOfAStrictMatchHasNoMissingOrUnexpectedKey) {
  const auto live = Live({{"a", {2}}, {"b", {3}}});
  KeyReport report;
  report.missing = {"stale"};
  ASSERT_OK_AND_ASSIGN(
      std::vector<int> match,
      MatchRuns("ckpt", live, Names(live), Saved({{"b", {3}}, {"a", {2}}}),
                ReadOptions(), /*revise=*/true, &report));
  EXPECT_EQ(report.loaded, 2);
  EXPECT_TRUE(report.missing.empty());
  EXPECT_TRUE(report.unexpected.empty());
}

TEST(MatchRunsTest, StrictToleratesMayBeMissingAndTheirOptimizerState) {
  // "w" is frozen and was left out with its (absent) optimizer state; "b"'s
  // optimizer state is not tolerated.
  const auto live =
      Live({{"w", {2}}, {"w.exp_avg", {2}}, {"b", {3}}, {"b.exp_avg", {3}}});
  ReadOptions options;
  options.may_be_missing = {"w"};
  KeyReport report;
  ASSERT_OK_AND_ASSIGN(
      std::vector<int> match,
      MatchRuns("ckpt", live, Names(live),
                Saved({{"b", {3}}, {"b.exp_avg", {3}}}), options,
                /*revise=*/true, &report));
  EXPECT_THAT(match, ElementsAre(-1, -1, 0, 1));
  EXPECT_THAT(report.missing, ElementsAre("w", "w.exp_avg"));
  EXPECT_THAT(MatchRuns("ckpt", live, Names(live), Saved({{"b", {3}}}), options,
                        /*revise=*/true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing keys: b.exp_avg")));
}

TEST(MatchRunsTest, NonStrictKeepsMissingAndIgnoresUnexpected) {
  const auto live = Live({{"a", {2}}, {"b", {3}}});
  ReadOptions options;
  options.strict = false;
  ASSERT_OK_AND_ASSIGN(
      std::vector<int> match,
      MatchRuns("ckpt", live, Names(live), Saved({{"c", {1}}, {"a", {2}}}),
                options, /*revise=*/true));
  EXPECT_THAT(match, ElementsAre(1, -1));
}

TEST(MatchRunsTest, NonStrictStillChecksShapes) {
  const auto live = Live({{"a", {2}}});
  ReadOptions options;
  options.strict = false;
  EXPECT_THAT(MatchRuns("ckpt", live, Names(live), Saved({{"a", {4}}}), options,
                        /*revise=*/true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 'a' has shape [4]")));
}

TEST(DtypeNameTest, RoundTripsAndRejectsUnknownNames) {
  EXPECT_EQ(DtypeName(at::kBFloat16), "BFloat16");
  ASSERT_OK_AND_ASSIGN(at::ScalarType dtype, DtypeFromName("BFloat16"));
  EXPECT_EQ(dtype, at::kBFloat16);
  EXPECT_THAT(DtypeFromName("bfloat16"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown dtype 'bfloat16'")));
}

TEST(CheckRunsTest, NonContiguousRunIsAnError) {
  std::vector<ShardedTensor> runs = {{"w", {3, 2}, 0, at::zeros({2, 3}).t()}};
  EXPECT_THAT(CheckRuns(runs), StatusIs(absl::StatusCode::kInternal,
                                        HasSubstr("'w' is not a contiguous")));
}

TEST(CopyStagedTest, CopiesStagedValuesAndSkipsUndefined) {
  std::vector<ShardedTensor> runs = Live({{"a", {2, 2}}, {"b", {2}}});
  CopyStaged(runs, {at::arange(4, at::kFloat), at::Tensor()});
  EXPECT_TRUE(at::equal(runs[0].local, at::arange(4, at::kFloat).view({2, 2})));
  EXPECT_TRUE(at::equal(runs[1].local, at::zeros({2})));
}

}  // namespace
}  // namespace strata::checkpoint
