// PlanActivations (plan.h) against the tracking allocator, to the byte, on
// the LibTorch this test is built against (the planner is told which:
// torch_compat::TorchVersion()): what one forward with the loss leaves
// alive for the backward, 4 x 64 tokens on one rank, for gpt-tiny and
// llama-tiny (also without grouped-query attention), in fp32, under bf16
// autocast, with bf16 parameters and with fp16 parameters (LibTorch 2.x
// only: 1.13 has no Half matmul on the CPU, where that case is skipped,
// naming why). A block's bytes are the difference between the models with 2
// blocks and with 1; the head's are what the 1-block model keeps beyond its
// block, the loss's log-probabilities and the embeddings' constants. The
// validation tests (plan_validation_test.cc,
// plan_precision_validation_test.cc) check the whole peak within 10 %; this
// pins the saved tensors, the part that differs between LibTorch versions.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/torch_compat.h"
#include "base/tracking_allocator.h"
#include "gtest/gtest.h"
#include "launch/plan/plan.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/autocast.h"
#include "strategies/mixed_precision.h"

namespace strata::launch {
namespace {

constexpr int64_t kBatch = 4;
constexpr int64_t kSeqLen = 64;

struct Precision {
  std::string plan_precision = "fp32";  // PlanInput::precision.
  bool autocast = false;                // PlanInput::autocast.
  at::ScalarType param_dtype = at::kFloat;
};

Precision PrecisionNamed(const std::string& name) {
  if (name == "autocast") return {"fp32", true, at::kFloat};
  if (name == "bf16") return {"bf16", false, at::kBFloat16};
  if (name == "fp16") return {"fp16", false, at::kHalf};
  CHECK_EQ(name, "fp32");
  return {};
}

// A named config with `layers` blocks; "llama-tiny-mha" is llama-tiny with
// one key/value head per query head (no grouped-query repeat), so that
// nothing the planner counts depends on the key/value width unseen.
models::ModelConfig Config(const std::string& name, int64_t layers) {
  const bool mha = name == "llama-tiny-mha";
  auto config = models::ConfigByName(mha ? "llama-tiny" : name);
  CHECK(config.ok()) << config.status();
  config->num_layers = layers;
  if (mha) config->num_kv_heads = config->num_heads;
  return *config;
}

// Bytes of tensor storage allocated by one forward with the loss of
// `config` and still alive while its loss is held (the loss's 4 bytes
// excluded): what autograd keeps for the backward.
int64_t KeptBytes(const models::ModelConfig& config, const Precision& prec) {
  const std::string tag =
      absl::StrCat("activations_", config.family, config.num_layers);
  MemoryTagScope scope(tag);
  models::BuildOptions build;
  build.seed = 1;
  auto model = models::BuildModel(config, build);
  CHECK(model.ok()) << model.status();
  (*model)->to(prec.param_dtype);
  if (prec.autocast) {
    (*model)->AddInterceptor(
        std::make_shared<strategies::AutocastInterceptor>());
  }
  at::manual_seed(7);
  // Contiguous inputs and targets, allocated before the count starts: the
  // embedding and the loss keep views of them, no copies.
  const at::Tensor inputs =
      at::randint(config.vocab_size, {kBatch, kSeqLen}, at::kLong);
  const at::Tensor targets =
      at::randint(config.vocab_size, {kBatch, kSeqLen}, at::kLong);
  const int64_t before = TrackingAllocator::Stats(tag).live_bytes;
  const at::Tensor loss = (*model)->ForwardLoss(inputs, targets);
  CHECK_EQ(loss.numel(), 1);
  return TrackingAllocator::Stats(tag).live_bytes - before - 4;
}

PlanInput InputFor(const models::ModelConfig& config, const Precision& prec) {
  PlanInput input;
  input.model = config;
  input.strategy = "single";
  input.micro_batch = kBatch;
  input.seq_len = kSeqLen;
  input.precision = prec.plan_precision;
  input.autocast = prec.autocast;
  input.torch_version = torch_compat::TorchVersion();
  CHECK(ValidatePlanInput(input).ok()) << ValidatePlanInput(input);
  return input;
}

class PlanActivationsTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  static void SetUpTestSuite() {
    CHECK(TrackingAllocator::Install().ok());
    at::set_num_threads(1);
  }

  void SetUp() override {
    const auto& [model_name, precision_name] = GetParam();
    prec_ = PrecisionNamed(precision_name);
    if (prec_.param_dtype == at::kHalf) {
      const absl::Status can = strategies::CheckCpuComputeDtype(at::kHalf);
      if (!can.ok()) GTEST_SKIP() << can.message();
    }
    one_ = Config(model_name, 1);
    two_ = Config(model_name, 2);
  }

  Precision prec_;
  models::ModelConfig one_, two_;
};

TEST_P(PlanActivationsTest, BlockKeepsWhatThePlannerSays) {
  const int64_t measured = KeptBytes(two_, prec_) - KeptBytes(one_, prec_);
  EXPECT_EQ(PlanActivations(InputFor(two_, prec_)).block_bytes, measured)
      << "LibTorch " << torch_compat::TorchVersion();
}

TEST_P(PlanActivationsTest, HeadKeepsWhatThePlannerSays) {
  const int64_t block = KeptBytes(two_, prec_) - KeptBytes(one_, prec_);
  // Beyond the block and the head, the 1-block model keeps the loss's fp32
  // log-probabilities (B T V, kept by log_softmax and nll_loss) and
  // nll_loss's total weight (4 bytes); GPT's position embedding its int64
  // position indices (8 T); Llama's rotary embedding its fp32 cos and sin
  // tables of T x D / 2 (4 T D, D = C / H), which every block's RoPE keeps.
  const int64_t bt = kBatch * kSeqLen;
  const int64_t head_dim = one_.dim / one_.num_heads;
  const int64_t others =
      4 * bt * one_.vocab_size + 4 +
      (one_.family == "gpt" ? 8 * kSeqLen : 4 * kSeqLen * head_dim);
  const int64_t measured = KeptBytes(one_, prec_) - block - others;
  EXPECT_EQ(PlanActivations(InputFor(one_, prec_)).head_bytes, measured)
      << "LibTorch " << torch_compat::TorchVersion();
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndPrecisions, PlanActivationsTest,
    ::testing::Combine(::testing::Values("gpt-tiny", "llama-tiny",
                                         "llama-tiny-mha"),
                       ::testing::Values("fp32", "autocast", "bf16", "fp16")));

}  // namespace
}  // namespace strata::launch
