// A model that is not a token language model under every strategy: the
// vision transformer of models/vit.h (float images in, class logits out,
// its own cross-entropy over labels) trained by DDP, ZeRO-1, ZeRO-2 and FSDP
// on two ranks matches single-process training on its parameters, in fp32
// and with bf16 parameters (FSDP, ZeRO-2), where Strategy::ForwardBackward
// casts the fp32 images to the parameters' dtype.
#include <ATen/ATen.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/vit.h"
#include "strategies/factory.h"
#include "strategies/options.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using testing::Params;
using testing::RunResult;

constexpr int64_t kGlobalBatch = 12;
constexpr int kSteps = 5;

std::shared_ptr<models::Vit> MakeVit() {
  auto model = models::Vit::Create(models::VitConfig(), 7);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

const models::LabelledImages& Data() {
  static const models::LabelledImages* const data = [] {
    auto made =
        models::QuadrantImages(models::VitConfig(), kGlobalBatch * kSteps, 3);
    CHECK(made.ok()) << made.status();
    return new models::LabelledImages(*std::move(made));
  }();
  return *data;
}

// kSteps steps over Data(): each global batch of kGlobalBatch images dealt
// to the ranks in order, each rank's rows split into `micro_batches`.
testing::TrainLoop VitLoop(int micro_batches) {
  return [micro_batches](Strategy& strategy, int rank, int world,
                         std::vector<double>* norms) -> absl::Status {
    const int64_t rows = kGlobalBatch / world;
    for (int step = 0; step < kSteps; ++step) {
      strategy.ZeroGrad();
      const int64_t first = step * kGlobalBatch + rank * rows;
      int64_t start = 0;
      for (int m = 0; m < micro_batches; ++m) {
        const int64_t size = (rows * (m + 1)) / micro_batches - start;
        STRATA_RETURN_IF_ERROR(
            strategy
                .ForwardBackward(Data().images.narrow(0, first + start, size),
                                 Data().labels.narrow(0, first + start, size),
                                 static_cast<double>(size) / rows,
                                 m + 1 == micro_batches)
                .status());
        start += size;
      }
      STRATA_ASSIGN_OR_RETURN(const StepResult stepped, strategy.Step(step));
      norms->push_back(stepped.grad_norm);
    }
    return absl::OkStatus();
  };
}

RunResult TrainSingle(const StrategyOptions& options) {
  StrategyOptions single = options;
  single.kind = StrategyKind::kSingle;
  return testing::TrainRun(single, MakeVit, 1, VitLoop(1));
}

// Rank 0's result of training with `options` on two ranks.
RunResult TrainOnTwoRanks(const StrategyOptions& options, int micro_batches) {
  return testing::TrainRun(options, MakeVit, 2, VitLoop(micro_batches));
}

class VitParityTest : public ::testing::TestWithParam<std::string> {};

// fp32: the same gradients summed in another order, so ExpectClose's
// tolerance (testing/parity.h: 1e-5 * max(1, max|param|) after 5 AdamW
// steps at lr 1e-4, derived there) holds, and the pre-clip norms agree to
// 1e-5 relative (their rounding is ~1e-7).
TEST_P(VitParityTest, TwoRanksMatchSingleInFp32) {
  const RunResult want = TrainSingle(StrategyOptions());
  for (int micro_batches : {1, 2}) {
    const std::string what =
        absl::StrCat(GetParam(), " vit micro-batches ", micro_batches);
    const RunResult got =
        TrainOnTwoRanks(testing::Kind(GetParam()), micro_batches);
    testing::ExpectRunMatches(got, want, what);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, VitParityTest,
                         ::testing::Values("ddp", "zero1", "zero2", "fsdp"));

class VitBf16ParityTest : public ::testing::TestWithParam<std::string> {};

// bf16 parameters, fp32 reduction: the fp32 images are cast to bf16 by
// ForwardBackward on both sides. The two runs reduce bf16 gradient
// contributions in different orders, so they agree within bf16 noise
// (testing::ExpectWithinBf16Noise, kBf16MeanRatio, derived in
// testing/parity.h) and their pre-clip norms within 2^-6 relative (as
// ExpectMixedMatchesSingle: bf16 rounding 2^-8, doubled by per-rank partial
// sums, a factor 2 of margin).
TEST_P(VitBf16ParityTest, TwoRanksMatchBf16Single) {
  const StrategyOptions options = testing::MixedKind(GetParam(), at::kFloat);
  const Params initial = testing::ParametersOf(*MakeVit());
  const RunResult want = TrainSingle(options);
  const RunResult got = TrainOnTwoRanks(options, 2);
  const std::string what = absl::StrCat(GetParam(), " bf16 vit");
  testing::ExpectWithinBf16Noise(got.params, want.params, initial,
                                 testing::kBf16MeanRatio, what);
  testing::ExpectNormsNear(got.norms, want.norms, 1.0 / 64, what);
}

INSTANTIATE_TEST_SUITE_P(Kinds, VitBf16ParityTest,
                         ::testing::Values("zero2", "fsdp"));

// ForwardBackward casts floating-point inputs to the parameters' dtype: a
// bf16 single-process strategy given fp32 images computes the loss the bf16
// model computes on the images cast to bf16, bitwise (the same kernels on
// the same values).
TEST(VitStrategyInputsTest, FloatImagesAreCastToTheParamDtype) {
  auto created =
      CreateStrategy(testing::MixedKind("single", at::kFloat), MakeVit(),
                     nullptr, testing::Optimizer(), testing::Schedule());
  ASSERT_TRUE(created.ok()) << created.status();
  Strategy& strategy = **created;
  const at::Tensor images = Data().images.narrow(0, 0, 4);
  const at::Tensor labels = Data().labels.narrow(0, 0, 4);
  double expected = 0;
  {
    at::NoGradGuard no_grad;
    expected = strategy.model()
                   .ForwardLoss(images.to(at::kBFloat16), labels)
                   .item<double>();
  }
  strategy.ZeroGrad();
  auto loss = strategy.ForwardBackward(images, labels, 1.0, true);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(*loss, expected);
}

// Integer inputs are passed as they are: the model's own check refuses
// them, and the error names the model's expectation.
TEST(VitStrategyInputsTest, IntegerInputsAreNotCast) {
  auto created = CreateStrategy(StrategyOptions(), MakeVit(), nullptr,
                                testing::Optimizer(), testing::Schedule());
  ASSERT_TRUE(created.ok()) << created.status();
  auto loss = (*created)->ForwardBackward(at::zeros({2, 1, 8, 8}, at::kLong),
                                          at::zeros({2}, at::kLong), 1.0, true);
  ASSERT_FALSE(loss.ok());
  EXPECT_NE(std::string(loss.status().message()).find("floating-point images"),
            std::string::npos)
      << loss.status();
}

}  // namespace
}  // namespace strata::strategies
