#include "launch/train/evaluation.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/testing/status_matchers.h"
#include "data/token_source.h"
#include "models/config.h"
#include "models/factory.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kSeqLen = 16;

std::shared_ptr<models::UnitModel> TinyModel(const std::string& name) {
  auto config = models::ConfigByName(name);
  CHECK(config.ok()) << config.status();
  models::BuildOptions build;
  build.seed = 7;
  auto model = models::BuildModel(*config, build);
  CHECK(model.ok()) << model.status();
  return *model;
}

// `n` pseudo-random tokens below 256 (a fixed linear congruential sequence).
std::unique_ptr<data::InMemoryTokenSource> Tokens(int64_t n) {
  std::vector<int64_t> tokens(n);
  uint64_t x = 12345;
  for (int64_t& t : tokens) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<int64_t>(x >> 56);
  }
  auto source = data::InMemoryTokenSource::Create(tokens, 256, "eval");
  CHECK(source.ok()) << source.status();
  return std::move(*source);
}

// Window w of `source` as [1, kSeqLen + 1].
at::Tensor Window(const data::TokenSource& source, int64_t w) {
  std::vector<int64_t> t(kSeqLen + 1);
  source.Read(w * kSeqLen, kSeqLen + 1, t.data());
  return at::tensor(t, at::kLong).view({1, kSeqLen + 1});
}

// The plain loss of the windows `ws` in one forward.
double BatchLoss(models::UnitModel& model, const data::TokenSource& source,
                 const std::vector<int64_t>& ws) {
  std::vector<at::Tensor> rows;
  for (int64_t w : ws) rows.push_back(Window(source, w));
  const at::Tensor batch = at::cat(rows);
  at::NoGradGuard no_grad;
  return model
      .ForwardLoss(batch.narrow(1, 0, kSeqLen), batch.narrow(1, 1, kSeqLen))
      .item<double>();
}

TEST(EvaluateLossTest, MeanOfTheFirstBatchesInOrder) {
  auto model = TinyModel("gpt-tiny");
  auto source = Tokens(1000);
  model->eval();
  const double expected =
      (BatchLoss(*model, *source, {0, 1}) + BatchLoss(*model, *source, {2, 3}) +
       BatchLoss(*model, *source, {4, 5})) /
      3;
  model->train();
  EvalOptions options;
  options.seq_len = kSeqLen;
  options.batch_size = 2;
  options.num_batches = 3;
  ASSERT_OK_AND_ASSIGN(EvalResult r, EvaluateLoss(*model, *source, options));
  // The same forwards in the same order; only the weighting by tokens
  // (exact products) reorders nothing: equal up to the last bit or two of
  // the double sum.
  EXPECT_NEAR(r.loss_nats, expected, 1e-12);
  EXPECT_DOUBLE_EQ(r.perplexity, std::exp(r.loss_nats));
  EXPECT_EQ(r.tokens, 3 * 2 * kSeqLen);
  EXPECT_EQ(r.batches, 3);
  EXPECT_TRUE(model->is_training()) << "the model's mode is restored";
}

TEST(EvaluateLossTest, AllWindowsOnceWithARemainderBatch) {
  auto model = TinyModel("llama-tiny");
  auto source = Tokens(1000);  // (1000 - 1) / 16 = 62 windows.
  model->eval();
  double sum = 0;
  for (int64_t w = 0; w < 62; ++w) sum += BatchLoss(*model, *source, {w});
  EvalOptions options;
  options.seq_len = kSeqLen;
  options.batch_size = 5;
  options.num_batches = 0;
  ASSERT_OK_AND_ASSIGN(EvalResult r, EvaluateLoss(*model, *source, options));
  EXPECT_EQ(r.batches, 13);  // 12 of 5 windows and one of 2.
  EXPECT_EQ(r.tokens, 62 * kSeqLen);
  // Batches of 5 against single windows: the same sums per token in
  // another grouping of the fp32 mean (each batch's mean over 80 or 32
  // tokens of losses near log(256) = 5.5): a relative difference of a few
  // fp32 epsilons (1.2e-7) per addition level, well under 1e-5.
  EXPECT_NEAR(r.loss_nats, sum / 62, 1e-5 * sum / 62);
  EXPECT_FALSE(model->is_training());
}

TEST(EvaluateLossTest, WrapsAroundAShortSourceAsTheSampler) {
  auto model = TinyModel("gpt-tiny");
  auto source = Tokens(50);  // 3 windows.
  model->eval();
  const double expected = (BatchLoss(*model, *source, {0, 1}) +
                           BatchLoss(*model, *source, {2, 0})) /
                          2;
  EvalOptions options;
  options.seq_len = kSeqLen;
  options.batch_size = 2;
  options.num_batches = 2;
  ASSERT_OK_AND_ASSIGN(EvalResult r, EvaluateLoss(*model, *source, options));
  EXPECT_NEAR(r.loss_nats, expected, 1e-12);
}

TEST(EvaluateLossTest, RefusesBadOptionsAndShortSources) {
  auto model = TinyModel("gpt-tiny");
  auto source = Tokens(1000);
  EvalOptions options;
  options.seq_len = kSeqLen;
  options.num_batches = -1;
  EXPECT_THAT(EvaluateLoss(*model, *source, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--eval_batches")));
  options.num_batches = 1;
  auto tiny = Tokens(kSeqLen);  // One token short of a window.
  EXPECT_THAT(
      EvaluateLoss(*model, *tiny, options).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--seq_len")));
}

TEST(EvalRecordTest, LineAndJson) {
  EvalResult r;
  r.loss_nats = 2.345678901234;
  r.perplexity = std::exp(r.loss_nats);
  r.tokens = 65536;
  r.batches = 8;
  EXPECT_EQ(EvalLine(r),
            "eval: loss 2.3457, perplexity 10.44 over 65536 tokens (8 "
            "batches)");
  EvalRecordInfo info;
  info.model = "gpt-tiny";
  info.weights = "/ckpt/\"step_4\"";
  info.strategy = "fsdp";
  info.world_size = 2;
  const std::string json = EvalRecordJson(r, info);
  EXPECT_EQ(json.find('\n'), std::string::npos) << "one line";
  ASSERT_OK_AND_ASSIGN(nlohmann::json parsed, ParseJson(json, "eval.json"));
  EXPECT_EQ(parsed["loss"].get<double>(), r.loss_nats) << "round trip";
  EXPECT_EQ(parsed["tokens"].get<int64_t>(), 65536);
  EXPECT_EQ(parsed["batches"].get<int64_t>(), 8);
  EXPECT_EQ(parsed["weights"].get<std::string>(), info.weights);
  EXPECT_EQ(parsed["world_size"].get<int>(), 2);
}

}  // namespace
}  // namespace strata::launch
