#include "models/unit.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::models {
namespace {

// A float tensor of `values`.
at::Tensor Floats(std::initializer_list<double> values) {
  return at::tensor(at::ArrayRef<double>(values), at::dtype(at::kFloat));
}

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A toy model to the protocol: an embedding unit and a scaling unit.
class ToyModel : public UnitModel {
 public:
  ToyModel() : UnitModel("ToyModel") {
    embed_ = register_module("embed", std::make_shared<torch::nn::Module>());
    table_ =
        embed_->register_parameter("weight", at::arange(8.0).reshape({4, 2}));
    scale_ = register_module("scale", std::make_shared<torch::nn::Module>());
    factor_ = scale_->register_parameter("factor", at::full({1}, 3.0));
    RegisterUnit("embed", "Embedding", embed_.get());
    RegisterUnit("scale", "Scale", scale_.get());
  }

  at::Tensor Forward(const at::Tensor& tokens) override {
    CheckMaterialized();
    CheckTokens(tokens, /*vocab_size=*/4, /*max_seq_len=*/3);
    at::Tensor x = CallUnit(0, tokens, [this](const at::Tensor& ids) {
      return at::embedding(table_, ids);
    });
    return CallUnit(1, x, [this](const at::Tensor& h) { return h * factor_; });
  }

  at::Tensor table_;
  at::Tensor factor_;

 private:
  std::shared_ptr<torch::nn::Module> embed_;
  std::shared_ptr<torch::nn::Module> scale_;
};

// Records unit names on entry and exit.
class Recorder : public UnitInterceptor {
 public:
  Recorder(std::string tag, std::vector<std::string>* log)
      : tag_(std::move(tag)), log_(log) {}
  at::Tensor Run(const UnitInfo& unit, const at::Tensor& input,
                 const UnitForward& forward) override {
    log_->push_back(tag_ + ">" + unit.name);
    at::Tensor output = forward(input);
    log_->push_back(tag_ + "<" + unit.name);
    return output;
  }

 private:
  std::string tag_;
  std::vector<std::string>* log_;
};

at::Tensor Tokens() { return at::tensor({0, 3, 1}, at::kLong).view({1, 3}); }

TEST(UnitModelTest, UnitsInRegistrationOrderWithFullParameterNames) {
  ToyModel model;
  ASSERT_EQ(model.units().size(), 2);
  EXPECT_EQ(model.units()[0].name, "embed");
  EXPECT_EQ(model.units()[0].type, "Embedding");
  EXPECT_EQ(model.units()[0].index, 0);
  EXPECT_THAT(model.units()[0].parameters, ElementsAre("embed.weight"));
  EXPECT_EQ(model.units()[1].index, 1);
  EXPECT_THAT(model.units()[1].parameters, ElementsAre("scale.factor"));
}

TEST(UnitModelTest, ForwardWithoutInterceptors) {
  ToyModel model;
  // Rows 0, 3, 1 of [[0,1],[2,3],[4,5],[6,7]], times 3.
  EXPECT_TRUE(at::equal(model.Forward(Tokens()),
                        Floats({0., 3., 18., 21., 6., 9.}).view({1, 3, 2})));
}

TEST(UnitModelTest, InterceptorsNestFirstAddedOutermost) {
  ToyModel model;
  std::vector<std::string> log;
  model.AddInterceptor(std::make_shared<Recorder>("A", &log));
  model.AddInterceptor(std::make_shared<Recorder>("B", &log));
  model.Forward(Tokens());
  EXPECT_THAT(log, ElementsAre("A>embed", "B>embed", "B<embed", "A<embed",
                               "A>scale", "B>scale", "B<scale", "A<scale"));
}

TEST(UnitModelTest, ClearInterceptorsRemovesThem) {
  ToyModel model;
  std::vector<std::string> log;
  model.AddInterceptor(std::make_shared<Recorder>("A", &log));
  model.ClearInterceptors();
  EXPECT_EQ(model.num_interceptors(), 0);
  model.Forward(Tokens());
  EXPECT_TRUE(log.empty());
}

// Keeps the chain it was given, as activation checkpointing does for
// recomputation in backward.
class Keeper : public UnitInterceptor {
 public:
  at::Tensor Run(const UnitInfo& unit, const at::Tensor& input,
                 const UnitForward& forward) override {
    kept.push_back(forward);
    inputs.push_back(input);
    return forward(input);
  }
  std::vector<UnitForward> kept;
  std::vector<at::Tensor> inputs;
};

TEST(UnitModelTest, CapturedForwardOutlivesForwardAndInterceptorChanges) {
  ToyModel model;
  std::vector<std::string> log;
  auto keeper = std::make_shared<Keeper>();
  model.AddInterceptor(keeper);
  model.AddInterceptor(std::make_shared<Recorder>("R", &log));
  const at::Tensor out = model.Forward(Tokens());
  model.ClearInterceptors();
  log.clear();
  // Re-running the kept "scale" forward still goes through the recorder
  // that was active during the forward, and gives the same output.
  const at::Tensor again = keeper->kept[1](keeper->inputs[1]);
  EXPECT_TRUE(at::equal(again, out));
  EXPECT_THAT(log, ElementsAre("R>scale", "R<scale"));
}

TEST(UnitModelTest, LossIsLogVocabForUniformLogits) {
  const at::Tensor logits = at::zeros({2, 3, 5});
  const at::Tensor targets =
      at::tensor({0, 1, 2, 3, 4, 0}, at::kLong).view({2, 3});
  EXPECT_NEAR(UnitModel::Loss(logits, targets).item<double>(), std::log(5.0),
              1e-6);
}

TEST(UnitModelTest, LossRejectsMismatchedShapes) {
  EXPECT_THROW(
      UnitModel::Loss(at::zeros({2, 3, 5}), at::zeros({2, 4}, at::kLong)),
      std::invalid_argument);
}

TEST(UnitModelTest, TokenOutOfRangeNamesMaxIdAndVocab) {
  ToyModel model;
  try {
    model.Forward(at::tensor({0, 7}, at::kLong).view({1, 2}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("vocab_size 4"));
    EXPECT_THAT(e.what(), HasSubstr("to 7"));
  }
}

TEST(UnitModelTest, SequenceTooLongNamesBothLengths) {
  ToyModel model;
  try {
    model.Forward(at::zeros({1, 5}, at::kLong));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("sequence length 5"));
    EXPECT_THAT(e.what(), HasSubstr("seq_len = 3"));
  }
}

TEST(UnitModelTest, NonIntegerTokensRejected) {
  ToyModel model;
  EXPECT_THROW(model.Forward(at::zeros({1, 2})), std::invalid_argument);
}

// The example of models/README.md, verbatim.
class Bigram : public strata::models::UnitModel {
 public:
  Bigram(int64_t vocab, int64_t dim) : UnitModel("Bigram"), vocab_(vocab) {
    embed_ = register_module("embed", std::make_shared<torch::nn::Module>());
    table_ =
        embed_->register_parameter("weight", at::randn({vocab, dim}) * 0.02);
    head_ = register_module("head", std::make_shared<torch::nn::Module>());
    proj_ = head_->register_parameter("weight", at::randn({vocab, dim}) * 0.02);
    RegisterUnit("embed", "Embedding", embed_.get());
    RegisterUnit("head", "Head", head_.get());
  }

  at::Tensor Forward(const at::Tensor& tokens) override {
    CheckMaterialized();
    CheckTokens(tokens, vocab_, /*max_seq_len=*/1024);
    at::Tensor x = CallUnit(0, tokens, [this](const at::Tensor& ids) {
      return at::embedding(table_, ids);  // reads the parameter when called
    });
    return CallUnit(
        1, x, [this](const at::Tensor& h) { return at::linear(h, proj_); });
  }

 private:
  int64_t vocab_;
  std::shared_ptr<torch::nn::Module> embed_, head_;
  at::Tensor table_, proj_;  // handles: stay valid when storage is replaced
};

TEST(UnitModelTest, ReadmeExampleWorks) {
  Bigram model(16, 4);
  std::vector<std::string> log;
  model.AddInterceptor(std::make_shared<Recorder>("R", &log));
  const at::Tensor logits = model.Forward(at::zeros({2, 3}, at::kLong));
  EXPECT_EQ(logits.sizes(), at::IntArrayRef({2, 3, 16}));
  EXPECT_THAT(log, ElementsAre("R>embed", "R<embed", "R>head", "R<head"));
  EXPECT_THAT(model.units()[1].parameters, ElementsAre("head.weight"));
}

TEST(UnitModelTest, DefaultInitialParameterIsUnimplemented) {
  ToyModel model;
  EXPECT_EQ(model.InitialParameter("embed.weight", 0).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace strata::models
