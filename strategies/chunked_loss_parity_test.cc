// The fused, chunked loss (ModelConfig::loss_chunk_tokens,
// models/chunked_loss.h) under every strategy: DDP, ZeRO-1/2 and FSDP (head
// unit wrapped or in the root) on two ranks train like single-process
// training with the same chunking, and chunked single-process training like
// unfused.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/unit.h"
#include "strategies/factory.h"
#include "strategies/options.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using testing::Build;
using testing::Config;
using testing::Kind;
using testing::Params;
using testing::RunResult;

// Tokens per micro-batch here: 12 rows / 2 ranks / 2 micro-batches * 32 =
// 96 (single-process: 12 * 32 = 384), so chunks of 40 never divide them.
constexpr int64_t kChunkTokens = 40;

models::ModelConfig Chunked(const std::string& model_name,
                            int64_t loss_chunk_tokens) {
  models::ModelConfig config = Config(model_name);
  config.loss_chunk_tokens = loss_chunk_tokens;
  return config;
}

// Trains `config` (seed 7) single-process with `micro_batches`.
RunResult TrainSingle(const models::ModelConfig& config, int micro_batches,
                      const StrategyOptions& options = StrategyOptions()) {
  return testing::TrainRun(
      options, [&] { return Build(config, 7); }, 1,
      testing::TokenLoop(micro_batches));
}

// Trains `config` with `options` on `world` ranks, 2 micro-batches each.
RunResult TrainOnRanks(const StrategyOptions& options,
                       const models::ModelConfig& config, int world) {
  return testing::TrainRun(
      options, [&] { return Build(config, 7); }, world, testing::TokenLoop(2));
}

std::string BlockType(const std::string& model_name) {
  return model_name.rfind("llama", 0) == 0 ? "LlamaBlock" : "GPTBlock";
}

// Strategy kinds: "fsdp" wraps the blocks (the head runs in the root),
// "fsdp-every-unit" wraps every unit (the head's own unit is gathered for
// its forward, freed, and re-gathered by the hook on its output, the loss).
StrategyOptions Options(const std::string& kind,
                        const std::string& model_name) {
  if (kind == "fsdp" || kind == "fsdp-every-unit") {
    StrategyOptions options = Kind("fsdp");
    if (kind == "fsdp") {
      options.fsdp.wrap_policy.unit_types = {BlockType(model_name)};
    }
    return options;
  }
  return Kind(kind);
}

class ChunkedLossParityTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// The data-parallel side computes each rank's micro-batch losses in chunks
// of its own rows, single-process in chunks of all rows: the same per-token
// values (models/chunked_loss.h), with the gradient sums grouped
// differently, which is the reordering ExpectClose's tolerance covers
// (testing/parity.h).
TEST_P(ChunkedLossParityTest, TwoRanksMatchChunkedSingle) {
  const auto& [kind, model_name] = GetParam();
  const models::ModelConfig config = Chunked(model_name, kChunkTokens);
  testing::ExpectRunMatches(TrainOnRanks(Options(kind, model_name), config, 2),
                            TrainSingle(config, 1),
                            absl::StrCat(kind, " ", model_name, " chunked"));
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, ChunkedLossParityTest,
    ::testing::Combine(::testing::Values("ddp", "zero1", "zero2", "fsdp",
                                         "fsdp-every-unit"),
                       ::testing::Values("gpt-tiny", "llama-tiny")),
    [](const auto& info) {
      std::string name =
          absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param));
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

// Chunked and unfused single-process training compute the same losses and
// gradients within a few float ulps (models/chunked_loss_test.cc), less than
// the reordered sums ExpectClose's tolerance is derived for.
TEST(ChunkedLossSingleTest, ChunkedTrainsLikeUnfused) {
  for (const std::string model_name : {"gpt-tiny", "llama-tiny"}) {
    testing::ExpectRunMatches(TrainSingle(Chunked(model_name, kChunkTokens), 2),
                              TrainSingle(Chunked(model_name, 0), 2),
                              absl::StrCat(model_name, " chunked vs unfused"));
  }
}

// Activation checkpointing of the head (and blocks) re-runs the chunked
// loss's forward during backward, with the same ops on the same values:
// bitwise the run without checkpointing.
TEST(ChunkedLossSingleTest, CheckpointedHeadTrainsBitwiseLikeUncheckpointed) {
  for (const std::string model_name : {"gpt-tiny", "llama-tiny"}) {
    StrategyOptions checkpointed;
    checkpointed.checkpoint_units = {"Head", BlockType(model_name)};
    const models::ModelConfig config = Chunked(model_name, kChunkTokens);
    testing::ExpectEqual(TrainSingle(config, 2, checkpointed).params,
                         TrainSingle(config, 2).params,
                         absl::StrCat(model_name, " checkpointed head"));
  }
}

// bf16 parameters (fp32 masters): the head computes its chunks' logits in
// bf16 as the unfused head does (models/chunked_loss.h). FSDP (every unit
// wrapped) with chunks on two ranks against bf16 single-process training
// unfused, with the mixed-precision tolerances of parity.h
// (ExpectMixedMatchesSingle): gradient norms within 2^-6 relative, masters
// within the bf16 noise of the training's movement.
TEST(ChunkedLossMixedPrecisionTest, Bf16FsdpChunkedMatchesBf16SingleUnfused) {
  for (const std::string model_name : {"gpt-tiny", "llama-tiny"}) {
    const std::string what = absl::StrCat(model_name, " bf16 fsdp chunked");
    const RunResult got = TrainOnRanks(testing::MixedKind("fsdp", at::kFloat),
                                       Chunked(model_name, kChunkTokens), 2);
    const RunResult want = TrainSingle(
        Chunked(model_name, 0), 1, testing::MixedKind("single", at::kFloat));
    testing::ExpectNormsNear(got.norms, want.norms, 1.0 / 64, what);
    testing::ExpectWithinBf16Noise(
        got.params, want.params,
        testing::ParametersOf(*Build(Config(model_name), 7)),
        testing::kBf16MeanRatio, what);
  }
}

}  // namespace
}  // namespace strata::strategies
