#include "optim/optimizer.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::optim {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

// Records, for every element, which range ParallelForEachRange gave it to,
// and counts the visits. State: "visits" (int32, like params) and "step".
class RecordingOptimizer final : public Optimizer {
 public:
  RecordingOptimizer(at::Tensor params, at::Tensor grads,
                     std::vector<ParamRange> ranges)
      : Optimizer(std::move(params), std::move(grads), std::move(ranges)),
        visits_(at::zeros({this->params().numel()}, at::kInt)),
        range_of_(at::full({this->params().numel()}, -1, at::kInt)) {}

  void Step(double lr) override {
    IncrementStep();
    int* visits = visits_.data_ptr<int>();
    int* range_of = range_of_.data_ptr<int>();
    ParallelForEachRange([&](size_t range, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        ++visits[i];
        range_of[i] = static_cast<int>(range);
      }
    });
  }

  NamedTensors State() override {
    return {{"visits", visits_}, {"step", step_tensor()}};
  }
  std::string name() const override { return "recording"; }

  const at::Tensor& range_of() const { return range_of_; }

 private:
  at::Tensor visits_;
  at::Tensor range_of_;
};

std::unique_ptr<RecordingOptimizer> MakeRecording(
    int64_t numel, std::vector<ParamRange> ranges) {
  at::Tensor params = at::zeros({numel});
  at::Tensor grads = at::zeros({numel});
  auto normalized = NormalizeParamRanges(std::move(ranges), numel);
  EXPECT_THAT(normalized, IsOk());
  return std::make_unique<RecordingOptimizer>(params, grads, *normalized);
}

TEST(ValidateFlatBuffersTest, AcceptsMatchingFloatBuffers) {
  EXPECT_THAT(ValidateFlatBuffers(at::zeros({10}), at::zeros({10})), IsOk());
}

TEST(ValidateFlatBuffersTest, AcceptsDisjointViewsOfOneStorage) {
  at::Tensor both = at::zeros({20});
  EXPECT_THAT(
      ValidateFlatBuffers(both.narrow(0, 0, 10), both.narrow(0, 10, 10)),
      IsOk());
}

TEST(ValidateFlatBuffersTest, RejectsAnUndefinedBuffer) {
  EXPECT_THAT(ValidateFlatBuffers(at::zeros({10}), at::Tensor()).ToString(),
              HasSubstr("optimizer grads is an undefined tensor"));
}

TEST(ValidateFlatBuffersTest, RejectsANonFloatBuffer) {
  EXPECT_THAT(
      ValidateFlatBuffers(at::zeros({10}, at::kDouble), at::zeros({10}))
          .ToString(),
      HasSubstr("optimizer params must be a 1-D contiguous Float tensor, got "
                "[10] (Double)"));
}

TEST(ValidateFlatBuffersTest, RejectsATwoDimensionalBuffer) {
  EXPECT_THAT(
      ValidateFlatBuffers(at::zeros({2, 5}), at::zeros({10})).ToString(),
      HasSubstr("got [2, 5] (Float)"));
}

TEST(ValidateFlatBuffersTest, RejectsANonContiguousBuffer) {
  EXPECT_THAT(
      ValidateFlatBuffers(at::zeros({20}).slice(0, 0, 20, 2), at::zeros({10}))
          .ToString(),
      HasSubstr("not contiguous"));
}

TEST(ValidateFlatBuffersTest, RejectsDifferentSizes) {
  EXPECT_THAT(ValidateFlatBuffers(at::zeros({10}), at::zeros({12})).ToString(),
              HasSubstr("grads must have as many elements as params (10), got "
                        "12"));
}

TEST(ValidateFlatBuffersTest, RejectsEmptyBuffers) {
  EXPECT_THAT(ValidateFlatBuffers(at::zeros({0}), at::zeros({0})).ToString(),
              HasSubstr("params are empty"));
}

TEST(ValidateFlatBuffersTest, RejectsOverlappingBuffers) {
  at::Tensor both = at::zeros({20});
  EXPECT_THAT(ValidateFlatBuffers(both.narrow(0, 0, 10), both.narrow(0, 5, 10))
                  .ToString(),
              HasSubstr("overlap"));
}

TEST(ParamRangeTest, PrintsItsFields) {
  std::ostringstream os;
  os << ParamRange{4, 6, 0.1, false} << " " << ParamRange{0, 2, 0.0, true};
  EXPECT_EQ(os.str(),
            "{offset 4, numel 6, weight_decay 0.1} "
            "{offset 0, numel 2, weight_decay 0, frozen}");
}

TEST(NormalizeParamRangesTest, EmptyMeansTheWholeBufferWithoutDecay) {
  auto ranges = NormalizeParamRanges({}, 10);
  ASSERT_THAT(ranges, IsOk());
  ASSERT_EQ(ranges->size(), 1u);
  EXPECT_EQ((*ranges)[0].offset, 0);
  EXPECT_EQ((*ranges)[0].numel, 10);
  EXPECT_EQ((*ranges)[0].weight_decay, 0.0);
}

TEST(NormalizeParamRangesTest, KeepsContiguousRangesAndDropsEmptyOnes) {
  auto ranges =
      NormalizeParamRanges({{0, 4, 0.1}, {4, 0, 0.5}, {4, 6, 0.0}}, 10);
  ASSERT_THAT(ranges, IsOk());
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[1].offset, 4);
  EXPECT_EQ((*ranges)[1].numel, 6);
  EXPECT_EQ((*ranges)[0].weight_decay, 0.1);
}

TEST(NormalizeParamRangesTest, MayLeaveOutTrailingPadding) {
  EXPECT_THAT(NormalizeParamRanges({{0, 4, 0.1}, {4, 3, 0.0}}, 10), IsOk());
}

TEST(NormalizeParamRangesTest, RejectsAGap) {
  EXPECT_THAT(
      NormalizeParamRanges({{0, 4, 0.1}, {5, 3, 0.0}}, 10).status().ToString(),
      HasSubstr("ranges[1] starts at offset 5, expected 4 (where ranges[0] "
                "ends)"));
}

TEST(NormalizeParamRangesTest, RejectsAnOverlap) {
  EXPECT_THAT(
      NormalizeParamRanges({{0, 4, 0.1}, {3, 3, 0.0}}, 10).status().ToString(),
      HasSubstr("ranges[1] starts at offset 3, expected 4"));
}

TEST(NormalizeParamRangesTest, RejectsAFirstRangeNotAtZero) {
  EXPECT_THAT(NormalizeParamRanges({{2, 4, 0.1}}, 10).status().ToString(),
              HasSubstr("ranges[0] starts at offset 2, expected 0"));
}

TEST(NormalizeParamRangesTest, RejectsARangePastTheEnd) {
  EXPECT_THAT(
      NormalizeParamRanges({{0, 8, 0.1}, {8, 3, 0.0}}, 10).status().ToString(),
      HasSubstr("ranges[1] [8, 11) ends past the end of the buffer (10 "
                "elements)"));
}

TEST(NormalizeParamRangesTest, RejectsNegativeNumel) {
  EXPECT_THAT(NormalizeParamRanges({{0, -1, 0.1}}, 10).status().ToString(),
              HasSubstr("ranges[0] has numel -1, expected >= 0"));
}

TEST(NormalizeParamRangesTest, RejectsNegativeWeightDecay) {
  EXPECT_THAT(NormalizeParamRanges({{0, 10, -0.1}}, 10).status().ToString(),
              HasSubstr("ranges[0] has weight_decay -0.1, expected >= 0"));
}

TEST(NormalizeParamRangesTest, EmptyRangesCoverNothing) {
  auto ranges = NormalizeParamRanges({{0, 0, 0.1}}, 10);
  ASSERT_THAT(ranges, IsOk());
  EXPECT_TRUE(ranges->empty());
}

TEST(SliceParamRangesTest, CutsRangesToTheShard) {
  const std::vector<ParamRange> whole = {{0, 300, 0.1}, {300, 700, 0.0}};
  const std::vector<ParamRange> shard = SliceParamRanges(whole, 250, 500);
  ASSERT_EQ(shard.size(), 2u);
  EXPECT_EQ(shard[0].offset, 0);
  EXPECT_EQ(shard[0].numel, 50);
  EXPECT_EQ(shard[0].weight_decay, 0.1);
  EXPECT_EQ(shard[1].offset, 50);
  EXPECT_EQ(shard[1].numel, 450);
  EXPECT_EQ(shard[1].weight_decay, 0.0);
}

TEST(SliceParamRangesTest, LeavesOutPaddingAtTheEnd) {
  const std::vector<ParamRange> shard =
      SliceParamRanges({{0, 10, 0.1}}, 8, 4);  // Elements 10, 11: padding.
  ASSERT_EQ(shard.size(), 1u);
  EXPECT_EQ(shard[0].offset, 0);
  EXPECT_EQ(shard[0].numel, 2);
  EXPECT_THAT(NormalizeParamRanges(shard, 4), IsOk());
}

TEST(SliceParamRangesTest, APaddingOnlyShardGetsOneEmptyRange) {
  const std::vector<ParamRange> shard = SliceParamRanges({{0, 10, 0.1}}, 12, 4);
  ASSERT_EQ(shard.size(), 1u);
  EXPECT_EQ(shard[0].numel, 0);
}

// "offset:numel:weight_decay[:frozen]" per range, for table comparisons.
std::string Describe(const std::vector<ParamRange>& ranges) {
  std::string out;
  for (const ParamRange& r : ranges) {
    if (!out.empty()) out += " ";
    out += std::to_string(r.offset) + ":" + std::to_string(r.numel) + ":" +
           (r.weight_decay == 0 ? "0" : std::to_string(r.weight_decay)) +
           (r.frozen ? ":frozen" : "");
  }
  return out;
}

TEST(DecayRangesTest, MatricesDecayVectorsDoNot) {
  // A [4, 2] matrix, a [2] bias, a [3] norm gain.
  EXPECT_EQ(Describe(DecayRanges(
                {{0, 8, 2, true}, {8, 2, 1, true}, {10, 3, 1, true}}, 0.5)),
            "0:8:0.500000 8:5:0");
}

TEST(DecayRangesTest, MergesNeighboursWithTheSameDecay) {
  EXPECT_EQ(Describe(DecayRanges({{0, 4, 2, true}, {4, 6, 3, true}}, 0.5)),
            "0:10:0.500000");
}

TEST(DecayRangesTest, FrozenParametersGetFrozenRangesWithoutDecay) {
  EXPECT_EQ(Describe(DecayRanges(
                {{0, 4, 2, false}, {4, 2, 1, false}, {6, 4, 2, true}}, 0.5)),
            "0:6:0:frozen 6:4:0.500000");
}

TEST(DecayRangesTest, DoesNotMergeAcrossAGap) {
  EXPECT_EQ(Describe(DecayRanges({{0, 4, 1, true}, {6, 2, 1, true}}, 0.5)),
            "0:4:0 6:2:0");
}

TEST(ConcatenateShardRangesTest, OneShardOfOneBuffer) {
  // Buffer [0, 10) decayed, [10, 12) not; shard [8, 14) (12, 13: padding)
  // at buffer offset 0 of a 6-element buffer.
  EXPECT_EQ(Describe(ConcatenateShardRanges(
                {{{{0, 10, 0.1}, {10, 2, 0.0}}, 8, 6, 0}}, 6)),
            "0:2:0.100000 2:2:0 4:2:0:frozen");
}

TEST(ConcatenateShardRangesTest, ShardsOfTwoBuffersOneAfterTheOther) {
  // Buffer A: [0, 6) decayed, shard [3, 6) at 0. Buffer B: [0, 2) not
  // decayed, [2, 8) frozen, shard [0, 4) at 3.
  EXPECT_EQ(Describe(ConcatenateShardRanges(
                {{{{0, 6, 0.1}}, 3, 3, 0},
                 {{{0, 2, 0.0}, {2, 6, 0.0, /*frozen=*/true}}, 0, 4, 3}},
                7)),
            "0:3:0.100000 3:2:0 5:2:0:frozen");
}

TEST(ConcatenateShardRangesTest, PaddingOnlyShardsBecomeFrozenGaps) {
  // Buffer A's shard [8, 10) is padding (its ranges end at 7); buffer B's
  // shard [2, 4) at 2 is decayed.
  EXPECT_EQ(Describe(ConcatenateShardRanges(
                {{{{0, 7, 0.1}}, 8, 2, 0}, {{{0, 4, 0.1}}, 2, 2, 2}}, 4)),
            "0:2:0:frozen 2:2:0.100000");
}

TEST(ConcatenateShardRangesTest, NoPlacementsGiveOneFrozenRange) {
  EXPECT_EQ(Describe(ConcatenateShardRanges({}, 5)), "0:5:0:frozen");
}

TEST(ConcatenateShardRangesTest, EmptyBufferGivesNoRange) {
  EXPECT_EQ(Describe(ConcatenateShardRanges({}, 0)), "");
}

TEST(OptimizerTest, ParallelForEachRangeVisitsEveryCoveredElementOnce) {
  // Larger than several parallel chunks, with ranges crossing chunk borders
  // and a left-out tail.
  const int64_t numel = 200000;
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(
      numel,
      {{0, 3, 0.0}, {3, 70000, 0.1}, {70003, 1, 0.0}, {70004, 129990, 0.0}});
  opt->Step(0.0);
  const at::Tensor visits = opt->State()[0].second;
  EXPECT_TRUE(
      at::equal(visits.narrow(0, 0, 199994), at::ones({199994}, at::kInt)));
  EXPECT_TRUE(at::equal(visits.narrow(0, 199994, 6), at::zeros({6}, at::kInt)));
  const at::Tensor range_of = opt->range_of();
  EXPECT_EQ(range_of[2].item<int>(), 0);
  EXPECT_EQ(range_of[3].item<int>(), 1);
  EXPECT_EQ(range_of[70002].item<int>(), 1);
  EXPECT_EQ(range_of[70003].item<int>(), 2);
  EXPECT_EQ(range_of[70004].item<int>(), 3);
  EXPECT_EQ(range_of[199993].item<int>(), 3);
}

TEST(OptimizerTest, EmptyRangesUpdateNothing) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {{0, 0, 0.0}});
  opt->Step(0.0);
  EXPECT_TRUE(at::equal(opt->State()[0].second, at::zeros({10}, at::kInt)));
}

TEST(OptimizerTest, NumStepsCountsSteps) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  EXPECT_EQ(opt->num_steps(), 0);
  opt->Step(0.0);
  opt->Step(0.0);
  EXPECT_EQ(opt->num_steps(), 2);
  EXPECT_EQ(opt->State()[1].second.item<int64_t>(), 2);
}

TEST(OptimizerTest, LoadStateCopiesEveryTensor) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  const at::Tensor visits = at::arange(10, at::kInt);
  ASSERT_THAT(opt->LoadState({{"step", at::scalar_tensor(7, at::kLong)},
                              {"visits", visits}}),
              IsOk());
  EXPECT_EQ(opt->num_steps(), 7);
  EXPECT_TRUE(at::equal(opt->State()[0].second, visits));
}

TEST(OptimizerTest, LoadStateRejectsAMissingKey) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  EXPECT_THAT(
      opt->LoadState({{"step", at::scalar_tensor(7, at::kLong)}}).ToString(),
      HasSubstr("optimizer 'recording' state is missing key 'visits'"));
}

TEST(OptimizerTest, LoadStateRejectsAnUnexpectedKey) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  EXPECT_THAT(opt->LoadState({{"exp_avg", at::zeros({10})}}).ToString(),
              HasSubstr("unexpected key 'exp_avg'; expected keys: visits, "
                        "step"));
}

TEST(OptimizerTest, LoadStateRejectsADuplicateKey) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  EXPECT_THAT(opt->LoadState({{"step", at::scalar_tensor(1, at::kLong)},
                              {"step", at::scalar_tensor(1, at::kLong)}})
                  .ToString(),
              HasSubstr("key 'step' twice"));
}

TEST(OptimizerTest, LoadStateNamesTheKeyAndBothShapes) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  EXPECT_THAT(opt->LoadState({{"visits", at::zeros({12}, at::kInt)},
                              {"step", at::scalar_tensor(1, at::kLong)}})
                  .ToString(),
              HasSubstr("'visits': expected shape [10] (Int), got [12] (Int)"));
}

TEST(OptimizerTest, LoadStateRejectsAnotherDtype) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  EXPECT_THAT(opt->LoadState({{"visits", at::zeros({10}, at::kInt)},
                              {"step", at::scalar_tensor(1.0, at::kDouble)}})
                  .ToString(),
              HasSubstr("'step': expected shape [] (Long), got [] (Double)"));
}

TEST(OptimizerTest, LoadStateRejectsANegativeStep) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  EXPECT_THAT(opt->LoadState({{"visits", at::zeros({10}, at::kInt)},
                              {"step", at::scalar_tensor(-1, at::kLong)}})
                  .ToString(),
              HasSubstr("'step' must be >= 0, got -1"));
}

TEST(OptimizerTest, FailedLoadStateChangesNothing) {
  std::unique_ptr<RecordingOptimizer> opt = MakeRecording(10, {});
  opt->Step(0.0);
  // "visits" matches, "step" does not: neither is loaded.
  EXPECT_FALSE(opt->LoadState({{"visits", at::full({10}, 5, at::kInt)},
                               {"step", at::zeros({1}, at::kLong)}})
                   .ok());
  EXPECT_EQ(opt->num_steps(), 1);
  EXPECT_TRUE(at::equal(opt->State()[0].second, at::ones({10}, at::kInt)));
}

}  // namespace
}  // namespace strata::optim
