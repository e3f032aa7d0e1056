#include "strategies/activation_checkpointing.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <atomic>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"
#include "base/torch_compat.h"
#include "base/tracking_allocator.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/unit.h"
#include "strategies/factory.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Params;

class ActivationCheckpointingTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

models::ModelConfig TinyConfig(const std::string& name, double dropout) {
  models::ModelConfig config = testing::Config(name);
  config.dropout = dropout;
  return config;
}

struct LossAndGrads {
  at::Tensor loss;
  std::map<std::string, at::Tensor> grads;
};

// Token ids and targets [4, 32] from a generator of their own (the default
// generator is left to dropout).
std::pair<at::Tensor, at::Tensor> Batch(int64_t vocab, int64_t batch = 4,
                                        int64_t seq = 32) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(99);
  at::Tensor ids = at::randint(vocab, {batch, seq + 1}, generator,
                               at::TensorOptions(at::kLong));
  return {ids.narrow(1, 0, seq).contiguous(),
          ids.narrow(1, 1, seq).contiguous()};
}

// Forward, loss and backward from fresh (undefined) gradients, with the
// default CPU generator seeded with `rng_seed` first.
LossAndGrads ForwardBackward(models::UnitModel& model, uint64_t rng_seed) {
  for (at::Tensor& p : model.parameters()) p.mutable_grad() = at::Tensor();
  const auto [tokens, targets] = Batch(256);
  at::manual_seed(rng_seed);
  LossAndGrads out;
  out.loss = models::UnitModel::Loss(model.Forward(tokens), targets);
  out.loss.backward();
  for (const auto& item : model.named_parameters()) {
    out.grads[item.key()] = item.value().grad().defined()
                                ? item.value().grad().clone()
                                : at::Tensor();
  }
  return out;
}

void ExpectBitwiseEqual(const LossAndGrads& actual,
                        const LossAndGrads& expected, const std::string& what) {
  EXPECT_TRUE(at::equal(actual.loss, expected.loss))
      << what << ": loss " << actual.loss.item<double>() << " vs "
      << expected.loss.item<double>();
  ASSERT_EQ(actual.grads.size(), expected.grads.size()) << what;
  for (const auto& [name, want] : expected.grads) {
    const at::Tensor& got = actual.grads.at(name);
    ASSERT_TRUE(want.defined()) << what << ": no reference gradient " << name;
    ASSERT_TRUE(got.defined()) << what << ": no gradient for " << name;
    EXPECT_TRUE(at::equal(got, want)) << what << ": gradient of " << name;
  }
}

std::shared_ptr<ActivationCheckpointing> Checkpoint(
    models::UnitModel& model, std::vector<std::string> units,
    bool preserve_rng_state = true) {
  ActivationCheckpointingOptions options;
  options.units = std::move(units);
  options.preserve_rng_state = preserve_rng_state;
  auto created = ActivationCheckpointing::Create(model, std::move(options));
  EXPECT_THAT(created, IsOk());
  return created.ok() ? *created : nullptr;
}

// Loss and every gradient with the given units checkpointed equal those
// without checkpointing, bitwise: the recomputation runs the same ops in the
// same order on the same values with the same dropout masks, and each
// parameter's gradient reaches its AccumulateGrad as the same sum.
void ExpectCheckpointingIsBitwise(const std::string& config_name,
                                  double dropout,
                                  const std::vector<std::string>& units,
                                  int expected_recomputations) {
  const std::string what = config_name + " checkpointing " + units.front();
  auto model = testing::Build(TinyConfig(config_name, dropout), 7);
  model->train();
  const LossAndGrads plain = ForwardBackward(*model, /*rng_seed=*/3);
  if (dropout > 0) {
    // Dropout is active: another seed gives another loss, so equal losses
    // below mean equal masks.
    const LossAndGrads reseeded = ForwardBackward(*model, /*rng_seed=*/4);
    EXPECT_FALSE(at::equal(reseeded.loss, plain.loss)) << what;
  }
  std::shared_ptr<ActivationCheckpointing> checkpointing =
      Checkpoint(*model, units);
  ASSERT_NE(checkpointing, nullptr);
  model->AddInterceptor(checkpointing);
  const LossAndGrads checkpointed = ForwardBackward(*model, /*rng_seed=*/3);
  EXPECT_EQ(checkpointing->num_recomputations(), expected_recomputations)
      << what;
  ExpectBitwiseEqual(checkpointed, plain, what);
}

TEST_F(ActivationCheckpointingTest, GptBlocksByTypeMatchBitwiseWithDropout) {
  ExpectCheckpointingIsBitwise("gpt-tiny", 0.1, {"GPTBlock"}, 2);
}

TEST_F(ActivationCheckpointingTest, GptAllUnitsMatchBitwiseWithDropout) {
  // Includes the embedding (int64 input, no input gradient) and the head,
  // which reads the tied wte.weight owned by the embedding.
  ExpectCheckpointingIsBitwise("gpt-tiny", 0.1,
                               {"Embedding", "GPTBlock", "Head"}, 4);
}

// Llama has no dropout (models/config.h): the RNG plays no part.
TEST_F(ActivationCheckpointingTest, LlamaBlocksByTypeMatchBitwise) {
  ExpectCheckpointingIsBitwise("llama-tiny", 0.0, {"LlamaBlock"}, 2);
}

TEST_F(ActivationCheckpointingTest, LlamaAllUnitsMatchBitwise) {
  ExpectCheckpointingIsBitwise("llama-tiny", 0.0,
                               {"Embedding", "LlamaBlock", "Head"}, 4);
}

TEST_F(ActivationCheckpointingTest, ByNameCheckpointsOnlyThatUnit) {
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.1), 7);
  std::shared_ptr<ActivationCheckpointing> checkpointing =
      Checkpoint(*model, {"blocks.1"});
  ASSERT_NE(checkpointing, nullptr);
  EXPECT_EQ(checkpointing->selected_names(),
            std::vector<std::string>({"blocks.1"}));
  ExpectCheckpointingIsBitwise("gpt-tiny", 0.1, {"blocks.1"}, 1);
}

// Units embed, blocks.0 .. blocks.5, head, as a six-block GPT registers
// them.
std::vector<models::UnitInfo> SixBlockUnits() {
  std::vector<models::UnitInfo> units;
  units.push_back({"embed", "Embedding", 0, nullptr, {}});
  for (int i = 0; i < 6; ++i) {
    units.push_back(
        {"blocks." + std::to_string(i), "GPTBlock", i + 1, nullptr, {}});
  }
  units.push_back({"head", "Head", 7, nullptr, {}});
  return units;
}

// SelectCheckpointedUnits over SixBlockUnits(); a failure is a test failure.
std::vector<int> SelectSix(const ActivationCheckpointingOptions& options) {
  auto selected = SelectCheckpointedUnits(SixBlockUnits(), options, "m");
  EXPECT_THAT(selected, IsOk());
  return selected.ok() ? *selected : std::vector<int>{-1};
}

// Selective checkpointing: the every-th, 2 every-th, ... of the candidates.
TEST_F(ActivationCheckpointingTest, EveryKthSelectsTheKthCandidates) {
  ActivationCheckpointingOptions options;
  options.units = {"GPTBlock"};
  options.every = 2;
  EXPECT_THAT(SelectSix(options), ElementsAre(2, 4, 6));  // blocks.1, .3, .5
  options.every = 3;
  EXPECT_THAT(SelectSix(options), ElementsAre(3, 6));  // blocks.2, .5
  options.every = 7;
  EXPECT_THAT(SelectSix(options), ElementsAre());
}

// PyTorch's check_fn: a predicate adds candidates; `every` applies to them.
TEST_F(ActivationCheckpointingTest, PredicateAddsCandidates) {
  ActivationCheckpointingOptions options;
  options.units = {"Embedding"};
  options.predicate = [](const models::UnitInfo& unit) {
    return unit.name == "blocks.4" || unit.type == "Head";
  };
  EXPECT_THAT(SelectSix(options), ElementsAre(0, 5, 7));
  options.every = 2;
  EXPECT_THAT(SelectSix(options), ElementsAre(5));
}

TEST_F(ActivationCheckpointingTest, EveryBelowOneIsAnError) {
  ActivationCheckpointingOptions options;
  options.units = {"GPTBlock"};
  options.every = 0;
  EXPECT_THAT(SelectCheckpointedUnits(SixBlockUnits(), options, "m").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--checkpoint_every must be >= 1")));
}

// Every other unit of gpt-tiny (embed, blocks.0, blocks.1, head: blocks.0
// and the head) recomputed: still bitwise the run without checkpointing.
TEST_F(ActivationCheckpointingTest, EverySecondUnitMatchesBitwise) {
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.1), 7);
  model->train();
  const LossAndGrads plain = ForwardBackward(*model, /*rng_seed=*/3);
  ActivationCheckpointingOptions options;
  options.units = {"Embedding", "GPTBlock", "Head"};
  options.every = 2;
  auto created = ActivationCheckpointing::Create(*model, options);
  ASSERT_THAT(created, IsOk());
  EXPECT_EQ((*created)->selected_names(),
            std::vector<std::string>({"blocks.0", "head"}));
  model->AddInterceptor(*created);
  const LossAndGrads checkpointed = ForwardBackward(*model, /*rng_seed=*/3);
  EXPECT_EQ((*created)->num_recomputations(), 2);
  ExpectBitwiseEqual(checkpointed, plain, "every second unit");
}

TEST_F(ActivationCheckpointingTest, WithoutRngRestoreDropoutMasksDiffer) {
  // The control for the tests above: recomputing without restoring the RNG
  // state draws other dropout masks, so the gradients change (the loss does
  // not: it comes from the first forward).
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.1), 7);
  model->train();
  const LossAndGrads plain = ForwardBackward(*model, 3);
  model->AddInterceptor(
      Checkpoint(*model, {"GPTBlock"}, /*preserve_rng_state=*/false));
  const LossAndGrads checkpointed = ForwardBackward(*model, 3);
  EXPECT_TRUE(at::equal(checkpointed.loss, plain.loss));
  EXPECT_FALSE(at::equal(checkpointed.grads.at("blocks.0.mlp.fc.weight"),
                         plain.grads.at("blocks.0.mlp.fc.weight")));
}

TEST_F(ActivationCheckpointingTest, RestoresTheRngStateAfterRecomputation) {
  // Recomputation must not disturb the random stream of the code that runs
  // after backward: the state after backward is the state after forward.
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.1), 7);
  model->train();
  model->AddInterceptor(Checkpoint(*model, {"GPTBlock"}));
  const auto [tokens, targets] = Batch(256);
  at::manual_seed(5);
  at::Tensor loss = models::UnitModel::Loss(model->Forward(tokens), targets);
  const at::Tensor after_forward =
      at::detail::getDefaultCPUGenerator().get_state();
  loss.backward();
  EXPECT_TRUE(at::equal(at::detail::getDefaultCPUGenerator().get_state(),
                        after_forward));
}

TEST_F(ActivationCheckpointingTest, UnknownUnitIsAnErrorListingTheUnits) {
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.0), 7);
  ActivationCheckpointingOptions options;
  options.units = {"GPTBlock", "blocks.7"};
  auto created = ActivationCheckpointing::Create(*model, options);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(created.status().message(),
              HasSubstr("--checkpoint_units: 'blocks.7' matches no unit"));
  EXPECT_THAT(created.status().message(),
              HasSubstr("unit types are Embedding, GPTBlock, Head"));
  EXPECT_THAT(created.status().message(),
              HasSubstr("unit names are embed, blocks.0, blocks.1, head"));
}

TEST_F(ActivationCheckpointingTest, EmptyEntryIsAnError) {
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.0), 7);
  ActivationCheckpointingOptions options;
  options.units = {""};
  auto created = ActivationCheckpointing::Create(*model, options);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(created.status().message(), HasSubstr("empty entry"));
}

TEST_F(ActivationCheckpointingTest, WithoutGradModeRunsForwardDirectly) {
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.0), 7);
  const auto [tokens, targets] = Batch(256);
  at::Tensor plain;
  {
    at::NoGradGuard no_grad;
    plain = model->Forward(tokens);
  }
  std::shared_ptr<ActivationCheckpointing> checkpointing =
      Checkpoint(*model, {"GPTBlock"});
  model->AddInterceptor(checkpointing);
  at::NoGradGuard no_grad;
  const at::Tensor checkpointed = model->Forward(tokens);
  EXPECT_TRUE(at::equal(checkpointed, plain));
  EXPECT_FALSE(checkpointed.requires_grad());
  EXPECT_EQ(checkpointing->num_recomputations(), 0);
}

// Counts the calls it sees, per unit index.
class CountingInterceptor : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override {
    ++calls[unit.index];
    return forward(input);
  }
  std::map<int, int> calls;
};

TEST_F(ActivationCheckpointingTest, KeepsTheNestingOfOtherInterceptors) {
  // An interceptor added before checkpointing (outer, like FSDP's) runs once
  // per unit; one added after it (inner) runs again in the recomputation.
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.0), 7);
  auto outer = std::make_shared<CountingInterceptor>();
  auto inner = std::make_shared<CountingInterceptor>();
  model->AddInterceptor(outer);
  model->AddInterceptor(Checkpoint(*model, {"blocks.0"}));
  model->AddInterceptor(inner);
  const LossAndGrads result = ForwardBackward(*model, 1);
  EXPECT_EQ(outer->calls, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(inner->calls, (std::map<int, int>{{0, 1}, {1, 2}, {2, 1}, {3, 1}}));
}

// Mimics FSDP's handling of a unit's parameters (docs/ARCHITECTURE.md, "Freeing
// gathered parameters"): after the unit's forward it releases the storage of
// the unit's parameters (StorageImpl::reset; the values are kept aside, as
// FSDP keeps a shard) and re-allocates and refills it from a hook on the
// unit's output, which fires before the unit's backward. Blocks only (the
// embedding's table is read again by the head).
class FreeingInterceptor : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override {
    if (unit.type != "GPTBlock") return forward(input);
    std::vector<at::Tensor> params = unit.module->parameters();
    at::Tensor output = forward(input);
    auto kept = std::make_shared<std::vector<at::Tensor>>();
    for (at::Tensor& p : params) {
      kept->push_back(p.detach().clone());
      p.storage().unsafeGetStorageImpl()->reset();
      ++num_freed;
    }
    output.register_hook([params, kept, this](const at::Tensor& grad) {
      for (size_t i = 0; i < params.size(); ++i) {
        c10::StorageImpl* storage = params[i].storage().unsafeGetStorageImpl();
        const size_t nbytes = (*kept)[i].nbytes();
        storage->set_data_ptr_noswap(c10::GetCPUAllocator()->allocate(nbytes));
        storage->set_nbytes(nbytes);
        params[i].detach().copy_((*kept)[i]);
        ++num_regathered;
      }
      return grad;
    });
    return output;
  }
  int num_freed = 0;
  int num_regathered = 0;
};

TEST_F(ActivationCheckpointingTest, WorksInsideAnInterceptorFreeingParameters) {
  // Checkpointing added after (inside) it, as CreateStrategy does with FSDP:
  // the forward and the recomputation both run while the parameters are
  // allocated, and the gradients are those of the plain model.
  auto reference = testing::Build(TinyConfig("gpt-tiny", 0.1), 7);
  const LossAndGrads plain = ForwardBackward(*reference, 3);
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.1), 7);
  auto freeing = std::make_shared<FreeingInterceptor>();
  model->AddInterceptor(freeing);
  std::shared_ptr<ActivationCheckpointing> checkpointing =
      Checkpoint(*model, {"GPTBlock"});
  model->AddInterceptor(checkpointing);
  const LossAndGrads checkpointed = ForwardBackward(*model, 3);
  const int params_per_block = 12;
  EXPECT_EQ(freeing->num_freed, 2 * params_per_block);
  EXPECT_EQ(freeing->num_regathered, 2 * params_per_block);
  EXPECT_EQ(checkpointing->num_recomputations(), 2);
  ExpectBitwiseEqual(checkpointed, plain, "inside a freeing interceptor");
}

// bf16 autocast around each unit, as launch/train/trainer.cc's --precision=bf16
// does; added before checkpointing, so it is outside the recomputation.
class AutocastInterceptor : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override {
    torch_compat::SetAutocastEnabled(c10::kCPU, true);
    torch_compat::SetAutocastDtype(c10::kCPU, at::kBFloat16);
    at::Tensor output = forward(input);
    torch_compat::SetAutocastEnabled(c10::kCPU, false);
    at::autocast::clear_cache();
    return output;
  }
};

TEST_F(ActivationCheckpointingTest, RecomputesUnderTheForwardsAutocast) {
  auto model = testing::Build(TinyConfig("gpt-tiny", 0.1), 7);
  model->AddInterceptor(std::make_shared<AutocastInterceptor>());
  const LossAndGrads plain = ForwardBackward(*model, 3);
  std::shared_ptr<ActivationCheckpointing> checkpointing =
      Checkpoint(*model, {"GPTBlock", "Head"});
  model->AddInterceptor(checkpointing);
  const LossAndGrads checkpointed = ForwardBackward(*model, 3);
  EXPECT_EQ(checkpointing->num_recomputations(), 3);
  ExpectBitwiseEqual(checkpointed, plain, "bf16 autocast outside");
  EXPECT_FALSE(torch_compat::IsAutocastEnabled(c10::kCPU));
}

// A two-unit model whose head reads the embedding table, declared as shared
// or not.
class TiedBigram : public models::UnitModel {
 public:
  explicit TiedBigram(bool declare_shared)
      : UnitModel("TiedBigram"), declare_shared_(declare_shared) {
    embed_ = register_module("embed", std::make_shared<torch::nn::Module>());
    table_ = embed_->register_parameter("weight", at::randn({16, 8}) * 0.1);
    head_ = register_module("head", std::make_shared<torch::nn::Module>());
    bias_ = head_->register_parameter("bias", at::randn({16}) * 0.1);
    RegisterUnit("embed", "Embedding", embed_.get());
    RegisterUnit("head", "Head", head_.get());
  }

  at::Tensor Forward(const at::Tensor& tokens) override {
    at::Tensor x = CallUnit(0, tokens, [this](const at::Tensor& ids) {
      return at::embedding(table_, ids);
    });
    return CallUnit(1, x, [this](const at::Tensor& h) {
      return at::linear(h, table_, bias_);
    });
  }

  std::vector<std::pair<std::string, std::vector<std::string>>>
  SharedParameters() const override {
    if (!declare_shared_) return {};
    return {{"embed.weight", {"head"}}};
  }

 private:
  bool declare_shared_;
  std::shared_ptr<torch::nn::Module> embed_, head_;
  at::Tensor table_, bias_;
};

TEST_F(ActivationCheckpointingTest, DeclaredSharedParameterGetsItsGradient) {
  TiedBigram model(/*declare_shared=*/true);
  const at::Tensor tokens = at::randint(16, {2, 5}, at::kLong);
  auto run = [&] {
    for (at::Tensor& p : model.parameters()) p.mutable_grad() = at::Tensor();
    model.Forward(tokens).sum().backward();
    return model.named_parameters()["embed.weight"].grad().clone();
  };
  const at::Tensor plain = run();
  model.AddInterceptor(Checkpoint(model, {"Head"}));
  EXPECT_TRUE(at::equal(run(), plain));
}

TEST_F(ActivationCheckpointingTest, UndeclaredReadOfAnotherUnitIsAnError) {
  TiedBigram model(/*declare_shared=*/false);
  model.AddInterceptor(Checkpoint(model, {"Head"}));
  const at::Tensor tokens = at::randint(16, {2, 5}, at::kLong);
  at::Tensor loss = model.Forward(tokens).sum();
  try {
    loss.backward();
    ADD_FAILURE() << "backward did not throw";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("activation checkpointing of unit 'head'"));
    EXPECT_THAT(e.what(), HasSubstr("shape [16, 8]"));
  }
}

// Counts the calls of a gradient accumulator's post-hook (as DDP's bucket
// readiness uses) and how many brought a gradient.
class CountingPostHook : public torch::autograd::FunctionPostHook {
 public:
  CountingPostHook(int* calls, int* with_gradient)
      : calls_(calls), with_gradient_(with_gradient) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& inputs) override {
    ++*calls_;
    if (!inputs.empty() && inputs[0].defined()) ++*with_gradient_;
    return outputs;
  }

 private:
  int* calls_;
  int* with_gradient_;
};

// A two-unit model whose head owns a parameter it never reads.
class UnusedParameterModel : public models::UnitModel {
 public:
  UnusedParameterModel() : UnitModel("UnusedParameterModel") {
    embed_ = register_module("embed", std::make_shared<torch::nn::Module>());
    table_ = embed_->register_parameter("weight", at::randn({16, 8}));
    head_ = register_module("head", std::make_shared<torch::nn::Module>());
    weight_ = head_->register_parameter("weight", at::randn({16, 8}));
    unused_ = head_->register_parameter("unused", at::randn({4}));
    RegisterUnit("embed", "Embedding", embed_.get());
    RegisterUnit("head", "Head", head_.get());
  }
  at::Tensor Forward(const at::Tensor& tokens) override {
    at::Tensor x = CallUnit(0, tokens, [this](const at::Tensor& ids) {
      return at::embedding(table_, ids);
    });
    return CallUnit(
        1, x, [this](const at::Tensor& h) { return at::linear(h, weight_); });
  }
  const at::Tensor& unused() const { return unused_; }

 private:
  std::shared_ptr<torch::nn::Module> embed_, head_;
  at::Tensor table_, weight_, unused_;
};

TEST_F(ActivationCheckpointingTest,
       UnusedParameterOfACheckpointedUnitHasItsAccumulatorCalledEmpty) {
  // The limit documented in activation_checkpointing.h: the node passes no
  // gradient to the unused parameter, yet its accumulator (and post-hooks)
  // run; without checkpointing they do not.
  const at::Tensor tokens = at::randint(16, {2, 5}, at::kLong);
  for (bool checkpoint : {false, true}) {
    UnusedParameterModel model;
    if (checkpoint) model.AddInterceptor(Checkpoint(model, {"head"}));
    int calls = 0, with_gradient = 0;
    // Kept alive, as BucketReadiness does: the parameter holds its
    // accumulator only weakly.
    const std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(model.unused());
    accumulator->add_post_hook(
        std::make_unique<CountingPostHook>(&calls, &with_gradient));
    model.Forward(tokens).sum().backward();
    EXPECT_EQ(calls, checkpoint ? 1 : 0) << "checkpoint " << checkpoint;
    EXPECT_EQ(with_gradient, 0) << "checkpoint " << checkpoint;
    EXPECT_FALSE(model.unused().grad().defined())
        << "checkpoint " << checkpoint;
  }
}

// Strategy runs: gradients accumulated over 2 micro-batches, AdamW steps and
// clipping, with every unit checkpointed (the tied embedding included).
const std::vector<std::string> kAllGptUnits = {"Embedding", "GPTBlock", "Head"};

// Trains gpt-tiny (dropout 0.1) with SingleStrategy, 2 micro-batches per
// step; returns the parameters and appends the gradient norms to `norms`.
Params TrainSingleStrategy(std::vector<std::string> checkpoint_units,
                           at::ScalarType param_dtype,
                           std::vector<double>* norms) {
  StrategyOptions options;
  options.checkpoint_units = std::move(checkpoint_units);
  options.mixed_precision.param_dtype = param_dtype;
  auto created =
      CreateStrategy(options, testing::Build(TinyConfig("gpt-tiny", 0.1), 7),
                     nullptr, testing::Optimizer(), testing::Schedule());
  EXPECT_THAT(created, IsOk());
  if (!created.ok()) return Params();
  at::manual_seed(21);
  absl::Status status =
      testing::Train(**created, 0, 1, /*micro_batches=*/2, norms);
  EXPECT_THAT(status, IsOk());
  return testing::Snapshot(**created);
}

TEST_F(ActivationCheckpointingTest, SingleStrategyTrainingMatchesBitwise) {
  std::vector<double> plain_norms, checkpointed_norms;
  const Params plain = TrainSingleStrategy({}, at::kFloat, &plain_norms);
  const Params checkpointed =
      TrainSingleStrategy(kAllGptUnits, at::kFloat, &checkpointed_norms);
  EXPECT_EQ(checkpointed_norms, plain_norms);
  testing::ExpectEqual(checkpointed, plain, "single, all units checkpointed");
}

TEST_F(ActivationCheckpointingTest, Bf16ParametersTrainingMatchesBitwise) {
  // Mixed precision: bf16 model parameters (fp32 masters in the strategy).
  std::vector<double> plain_norms, checkpointed_norms;
  const Params plain = TrainSingleStrategy({}, at::kBFloat16, &plain_norms);
  const Params checkpointed =
      TrainSingleStrategy(kAllGptUnits, at::kBFloat16, &checkpointed_norms);
  EXPECT_EQ(checkpointed_norms, plain_norms);
  testing::ExpectEqual(checkpointed, plain,
                       "single bf16, all units checkpointed");
}

TEST_F(ActivationCheckpointingTest, CreateStrategyRejectsAnUnknownUnit) {
  StrategyOptions options;
  options.checkpoint_units = {"GPTBlock", "TransformerBlock"};
  auto created =
      CreateStrategy(options, testing::Build(TinyConfig("gpt-tiny", 0.0), 7),
                     nullptr, testing::Optimizer(), testing::Schedule());
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(created.status().message(),
              HasSubstr("'TransformerBlock' matches no unit"));
}

// Trains gpt-tiny (dropout 0: ranks are threads sharing the default CPU
// generator, see activation_checkpointing.h) with strategy `kind` on 2 ranks,
// 2 micro-batches per step. Small buckets: several reductions launched from
// gradient hooks during backward, the tied embedding's among them.
void TrainOnTwoRanks(const std::string& kind, at::ScalarType param_dtype,
                     const std::vector<std::string>& checkpoint_units,
                     std::vector<Params>* params,
                     std::vector<std::vector<double>>* norms) {
  params->assign(2, Params());
  norms->assign(2, {});
  ASSERT_TRUE(comm::testing::RunOnRanks(2, [&](comm::Group& group) {
                at::set_num_threads(1);
                StrategyOptions options =
                    testing::Kind(kind, /*bucket_bytes=*/64 << 10,
                                  /*first_bucket_bytes=*/16 << 10);
                options.checkpoint_units = checkpoint_units;
                options.mixed_precision.param_dtype = param_dtype;
                auto created = CreateStrategy(
                    options, testing::Build(TinyConfig("gpt-tiny", 0.0), 7),
                    &group, testing::Optimizer(), testing::Schedule());
                ASSERT_THAT(created, IsOk());
                absl::Status status = testing::Train(**created, group.rank(), 2,
                                                     /*micro_batches=*/2,
                                                     &(*norms)[group.rank()]);
                ASSERT_THAT(status, IsOk());
                (*params)[group.rank()] = testing::Snapshot(**created);
              }).ok());
}

void ExpectTwoRankTrainingMatchesBitwise(
    const std::string& kind, at::ScalarType param_dtype = at::kFloat) {
  std::vector<Params> plain, checkpointed;
  std::vector<std::vector<double>> plain_norms, checkpointed_norms;
  TrainOnTwoRanks(kind, param_dtype, {}, &plain, &plain_norms);
  TrainOnTwoRanks(kind, param_dtype, kAllGptUnits, &checkpointed,
                  &checkpointed_norms);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(checkpointed_norms[rank], plain_norms[rank])
        << kind << " rank " << rank;
    testing::ExpectEqual(
        checkpointed[rank], plain[rank],
        kind + ", all units checkpointed, rank " + std::to_string(rank));
  }
}

TEST_F(ActivationCheckpointingTest, DdpTrainingMatchesBitwise) {
  ExpectTwoRankTrainingMatchesBitwise("ddp");
}

TEST_F(ActivationCheckpointingTest, Zero2TrainingMatchesBitwise) {
  ExpectTwoRankTrainingMatchesBitwise("zero2");
}

TEST_F(ActivationCheckpointingTest, FsdpTrainingMatchesBitwise) {
  // FULL_SHARD, every unit wrapped: each block's parameters are freed after
  // its forward and re-gathered by FSDP's output hook before the
  // recomputation.
  ExpectTwoRankTrainingMatchesBitwise("fsdp");
}

TEST_F(ActivationCheckpointingTest, FsdpBf16TrainingMatchesBitwise) {
  // bf16 parameters gathered from fp32 master shards.
  ExpectTwoRankTrainingMatchesBitwise("fsdp", at::kBFloat16);
}

// Saved activations, counted by the tracking allocator: a gpt-tiny-like model
// with 4 blocks, batch 8 x 128.
TEST_F(ActivationCheckpointingTest, CheckpointingKeepsOnlyUnitOutputs) {
  ASSERT_THAT(TrackingAllocator::Install(), IsOk());
  models::ModelConfig config = TinyConfig("gpt-tiny", 0.0);
  config.num_layers = 4;
  const int64_t b = 8, t = 128, c = config.dim, v = config.vocab_size,
                h = config.num_heads, layers = config.num_layers;
  const std::pair<at::Tensor, at::Tensor> batch = Batch(v, b, t);
  const at::Tensor tokens = batch.first, targets = batch.second;
  const int64_t rng_state_bytes =
      at::detail::getDefaultCPUGenerator().get_state().nbytes();

  struct Figures {
    int64_t kept_bytes;  // Live after forward, minus live before.
    int64_t peak_bytes;  // Peak during forward, minus live before.
  };
  auto measure = [&](models::UnitModel& model, const std::string& tag) {
    MemoryTagScope scope(tag);
    // Warm-up: first-call allocations (none expected, but not measured).
    models::UnitModel::Loss(model.Forward(tokens), targets).backward();
    for (at::Tensor& p : model.parameters()) p.mutable_grad() = at::Tensor();
    const int64_t before = TrackingAllocator::Stats(tag).live_bytes;
    TrackingAllocator::ResetPeak(tag);
    at::Tensor logits = model.Forward(tokens);
    const MemoryStats after = TrackingAllocator::Stats(tag);
    return Figures{after.live_bytes - before, after.peak_bytes - before};
  };

  auto plain_model = testing::Build(config, 7);
  const Figures plain = measure(*plain_model, "ac-plain");
  auto model = testing::Build(config, 7);
  model->AddInterceptor(Checkpoint(*model, {"Embedding", "GPTBlock", "Head"}));
  const Figures checkpointed = measure(*model, "ac-checkpointed");

  // With every unit checkpointed, forward keeps exactly the unit outputs
  // (embedding and each block [B, T, C], logits [B, T, V], fp32) and one CPU
  // RNG state per unit.
  const int64_t fp32 = 4;
  EXPECT_EQ(checkpointed.kept_bytes, (layers + 1) * b * t * c * fp32 +
                                         b * t * v * fp32 +
                                         (layers + 2) * rng_state_bytes);
  // Without, each block keeps at least its attention probabilities
  // [B, H, T, T] (for the probabilities x values product's backward) besides
  // the unit outputs.
  EXPECT_GE(plain.kept_bytes, (layers + 1) * b * t * c * fp32 +
                                  b * t * v * fp32 +
                                  layers * b * h * t * t * fp32);
  EXPECT_LT(checkpointed.peak_bytes, plain.peak_bytes);
  RecordProperty("plain_kept_bytes", std::to_string(plain.kept_bytes));
  RecordProperty("plain_peak_bytes", std::to_string(plain.peak_bytes));
  RecordProperty("checkpointed_kept_bytes",
                 std::to_string(checkpointed.kept_bytes));
  RecordProperty("checkpointed_peak_bytes",
                 std::to_string(checkpointed.peak_bytes));
  std::cerr << "forward memory, plain: kept " << plain.kept_bytes << " peak "
            << plain.peak_bytes << "; checkpointed: kept "
            << checkpointed.kept_bytes << " peak " << checkpointed.peak_bytes
            << "\n";
}

}  // namespace
}  // namespace strata::strategies
