#include "optim/flat_parameters.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::optim {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(5, 7))),
        fc2(register_module("fc2", torch::nn::Linear(7, 3))) {}
  at::Tensor forward(const at::Tensor& x) { return fc2(at::tanh(fc1(x))); }
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};
TORCH_MODULE(TinyNet);

// fc1.weight [7, 5], fc1.bias [7], fc2.weight [3, 7], fc2.bias [3].
constexpr int64_t kTinyNetNumel = 35 + 7 + 21 + 3;

// Two nets with identical parameter values.
TinyNet MakeNet() {
  at::manual_seed(7);
  return TinyNet();
}

std::vector<NamedParameter> NamedParameters(const torch::nn::Module& module) {
  std::vector<NamedParameter> params;
  for (const auto& item : module.named_parameters()) {
    params.push_back({item.key(), item.value()});
  }
  return params;
}

std::unique_ptr<FlatParameters> Flatten(const TinyNet& net,
                                        int64_t align_elems = 1) {
  absl::StatusOr<std::unique_ptr<FlatParameters>> flat =
      FlatParameters::Create(NamedParameters(*net), align_elems);
  EXPECT_THAT(flat, IsOk());
  return *std::move(flat);
}

at::Tensor Input(int seed) {
  at::manual_seed(seed);
  return at::randn({4, 5});
}

void Backward(TinyNet& net, const at::Tensor& x) {
  at::Tensor y = net->forward(x);
  (y * y).sum().backward();
}

// The gradient of entries()[i], read from the flat gradient buffer.
at::Tensor FlatGrad(const FlatParameters& flat, size_t i) {
  const FlatParameters::Entry& e = flat.entries()[i];
  return flat.grads().narrow(0, e.offset, e.numel).view(e.shape);
}

TEST(FlatParametersTest, ForwardIsUnchanged) {
  TinyNet net = MakeNet();
  const at::Tensor x = Input(1);
  const at::Tensor before = net->forward(x).detach().clone();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  EXPECT_TRUE(at::equal(net->forward(x), before));
}

TEST(FlatParametersTest, ParametersBecomeViewsOfTheFlatBuffer) {
  TinyNet net = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  for (size_t i = 0; i < flat->entries().size(); ++i) {
    const FlatParameters::Entry& e = flat->entries()[i];
    const at::Tensor& p = flat->parameter(i);
    EXPECT_EQ(p.data_ptr<float>(), flat->params().data_ptr<float>() + e.offset)
        << e.name;
  }
  // Writing the flat buffer changes the module's parameters.
  flat->params().fill_(0.5);
  EXPECT_TRUE(at::equal(net->fc2->bias, at::full({3}, 0.5)));
}

TEST(FlatParametersTest, EntriesDescribeTheLayoutInOrder) {
  TinyNet net = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  const std::vector<FlatParameters::Entry>& e = flat->entries();
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].name, "fc1.weight");
  EXPECT_EQ(e[0].offset, 0);
  EXPECT_EQ(e[0].shape, (std::vector<int64_t>{7, 5}));
  EXPECT_EQ(e[0].numel, 35);
  EXPECT_TRUE(e[0].requires_grad);
  EXPECT_EQ(e[1].name, "fc1.bias");
  EXPECT_EQ(e[1].offset, 35);
  EXPECT_EQ(e[2].name, "fc2.weight");
  EXPECT_EQ(e[2].offset, 42);
  EXPECT_EQ(e[3].name, "fc2.bias");
  EXPECT_EQ(e[3].offset, 63);
  EXPECT_EQ(e[3].shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(flat->numel(), kTinyNetNumel);
  EXPECT_EQ(flat->padded_numel(), kTinyNetNumel);
}

TEST(FlatParametersTest, BackwardWritesGradientsIntoTheFlatBuffer) {
  TinyNet net = MakeNet();
  TinyNet reference = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  const at::Tensor x = Input(1);
  Backward(net, x);
  Backward(reference, x);
  const auto reference_params = reference->named_parameters();
  for (size_t i = 0; i < flat->entries().size(); ++i) {
    const FlatParameters::Entry& e = flat->entries()[i];
    EXPECT_TRUE(at::equal(FlatGrad(*flat, i), reference_params[e.name].grad()))
        << e.name;
    // No copy: .grad is the flat buffer's memory.
    EXPECT_EQ(flat->parameter(i).grad().data_ptr<float>(),
              flat->grads().data_ptr<float>() + e.offset);
  }
  EXPECT_THAT(flat->CheckGradViews(), IsOk());
}

TEST(FlatParametersTest, TwoBackwardsAccumulate) {
  TinyNet net = MakeNet();
  TinyNet reference = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  for (int seed : {1, 2}) {
    Backward(net, Input(seed));
    Backward(reference, Input(seed));
  }
  const auto reference_params = reference->named_parameters();
  for (size_t i = 0; i < flat->entries().size(); ++i) {
    const std::string& name = flat->entries()[i].name;
    EXPECT_TRUE(at::equal(FlatGrad(*flat, i), reference_params[name].grad()))
        << name;
  }
}

TEST(FlatParametersTest, ZeroGradZeroesTheBufferAndKeepsTheViews) {
  TinyNet net = MakeNet();
  TinyNet reference = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  Backward(net, Input(1));
  flat->ZeroGrad();
  EXPECT_TRUE(at::equal(flat->grads(), at::zeros({kTinyNetNumel})));
  EXPECT_THAT(flat->CheckGradViews(), IsOk());
  Backward(net, Input(2));
  Backward(reference, Input(2));
  EXPECT_TRUE(at::equal(FlatGrad(*flat, 0), reference->fc1->weight.grad()));
}

TEST(FlatParametersTest, ModuleZeroGradInPlaceKeepsTheViews) {
  TinyNet net = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  Backward(net, Input(1));
  net->zero_grad(/*set_to_none=*/false);
  EXPECT_THAT(flat->CheckGradViews(), IsOk());
  EXPECT_TRUE(at::equal(flat->grads(), at::zeros({kTinyNetNumel})));
}

TEST(FlatParametersTest, CheckGradViewsDetectsGradSetToNone) {
  TinyNet net = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  net->zero_grad(/*set_to_none=*/true);
  const absl::Status status = flat->CheckGradViews();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.ToString(), HasSubstr("'fc1.weight' has no .grad"));
  // What the check guards against: the gradient goes elsewhere.
  Backward(net, Input(1));
  EXPECT_TRUE(at::equal(flat->grads(), at::zeros({kTinyNetNumel})));
}

TEST(FlatParametersTest, CheckGradViewsDetectsReplacedGrad) {
  TinyNet net = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  net->fc2->bias.mutable_grad() = at::zeros({3});
  const absl::Status status = flat->CheckGradViews();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.ToString(), HasSubstr("'fc2.bias'"));
  EXPECT_THAT(status.ToString(), HasSubstr("not its view"));
}

TEST(FlatParametersTest, PadsWithZerosToAMultipleOfAlignElems) {
  TinyNet net = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net, /*align_elems=*/8);
  EXPECT_EQ(flat->numel(), 66);
  EXPECT_EQ(flat->padded_numel(), 72);
  EXPECT_EQ(flat->params().numel(), 72);
  EXPECT_EQ(flat->grads().numel(), 72);
  Backward(net, Input(1));
  EXPECT_TRUE(at::equal(flat->params().narrow(0, 66, 6), at::zeros({6})));
  EXPECT_TRUE(at::equal(flat->grads().narrow(0, 66, 6), at::zeros({6})));
}

TEST(FlatParametersTest, AlignedSizeIsNotPadded) {
  TinyNet net = MakeNet();
  std::unique_ptr<FlatParameters> flat = Flatten(net, /*align_elems=*/33);
  EXPECT_EQ(flat->padded_numel(), 66);
}

TEST(FlatParametersTest, FrozenParameterGetsNoGradView) {
  TinyNet net = MakeNet();
  net->fc1->bias.set_requires_grad(false);
  std::unique_ptr<FlatParameters> flat = Flatten(net);
  EXPECT_FALSE(flat->entries()[1].requires_grad);
  EXPECT_FALSE(net->fc1->bias.grad().defined());
  Backward(net, Input(1));
  EXPECT_TRUE(at::equal(FlatGrad(*flat, 1), at::zeros({7})));
  EXPECT_THAT(flat->CheckGradViews(), IsOk());
}

TEST(FlatParametersTest, ConvertsValuesToTheFlatDtype) {
  at::Tensor a = at::tensor({1.5, -2.25}, at::kDouble).requires_grad_();
  at::Tensor b = at::full({1, 1}, 3.0, at::kDouble).requires_grad_();
  auto flat = FlatParameters::Create({{"a", a}, {"b", b}});
  ASSERT_THAT(flat, IsOk());
  EXPECT_EQ((*flat)->params().scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal((*flat)->params(), at::tensor({1.5f, -2.25f, 3.0f})));
  EXPECT_EQ(a.scalar_type(), at::kFloat);
  EXPECT_EQ(b.sizes(), (std::vector<int64_t>{1, 1}));
}

TEST(FlatParametersTest, MatrixDecayRangesDecayOnlyMatricesAndMergeNeighbours) {
  // Layout: w1 [2, 3] (decay), w2 [1, 2] (decay), bias [4], gain [1], w3 [2,
  // 2].
  at::Tensor w1 = at::ones({2, 3}).requires_grad_();
  at::Tensor w2 = at::ones({1, 2}).requires_grad_();
  at::Tensor bias = at::ones({4}).requires_grad_();
  at::Tensor gain = at::ones({1}).requires_grad_();
  at::Tensor w3 = at::ones({2, 2}).requires_grad_();
  auto flat = FlatParameters::Create(
      {{"w1", w1}, {"w2", w2}, {"bias", bias}, {"gain", gain}, {"w3", w3}});
  ASSERT_THAT(flat, IsOk());
  std::vector<ParamRange> ranges = (*flat)->MatrixDecayRanges(0.1);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].offset, 0);
  EXPECT_EQ(ranges[0].numel, 8);
  EXPECT_EQ(ranges[0].weight_decay, 0.1);
  EXPECT_EQ(ranges[1].offset, 8);
  EXPECT_EQ(ranges[1].numel, 5);
  EXPECT_EQ(ranges[1].weight_decay, 0.0);
  EXPECT_EQ(ranges[2].offset, 13);
  EXPECT_EQ(ranges[2].numel, 4);
  EXPECT_EQ(ranges[2].weight_decay, 0.1);
}

TEST(FlatParametersTest, HonoursARequestedDtype) {
  at::Tensor a = at::tensor({1.5f, -2.0f}).requires_grad_();
  auto flat = FlatParameters::Create({{"a", a}}, 1, at::kBFloat16);
  ASSERT_THAT(flat, IsOk());
  EXPECT_EQ((*flat)->params().scalar_type(), at::kBFloat16);
  EXPECT_EQ((*flat)->grads().scalar_type(), at::kBFloat16);
  EXPECT_EQ(a.grad().scalar_type(), at::kBFloat16);
  (a * 2).sum().backward();
  EXPECT_TRUE(at::equal((*flat)->grads(), at::full({2}, 2.0, at::kBFloat16)));
}

TEST(FlatParametersTest, CopiesAnExistingGradient) {
  at::Tensor a = at::zeros({2}).requires_grad_();
  a.mutable_grad() = at::tensor({4.0f, 5.0f});
  auto flat = FlatParameters::Create({{"a", a}});
  ASSERT_THAT(flat, IsOk());
  EXPECT_TRUE(at::equal((*flat)->grads(), at::tensor({4.0f, 5.0f})));
}

TEST(FlatParametersTest, NonContiguousParameterIsCopiedInLogicalOrder) {
  at::Tensor a = at::arange(6, at::kFloat).view({2, 3}).t().contiguous().t();
  a.requires_grad_();
  ASSERT_FALSE(a.is_contiguous());
  const at::Tensor expected = a.detach().clone();
  auto flat = FlatParameters::Create({{"a", a}});
  ASSERT_THAT(flat, IsOk());
  EXPECT_TRUE(at::equal(a, expected));
  EXPECT_TRUE(at::equal((*flat)->params(), at::arange(6, at::kFloat)));
}

absl::Status CreateError(std::vector<NamedParameter> params,
                         int64_t align_elems = 1,
                         at::ScalarType dtype = at::kFloat) {
  auto flat = FlatParameters::Create(std::move(params), align_elems, dtype);
  EXPECT_FALSE(flat.ok());
  return flat.status();
}

TEST(FlatParametersTest, RejectsAnEmptyList) {
  EXPECT_THAT(CreateError({}).ToString(), HasSubstr("at least one parameter"));
}

TEST(FlatParametersTest, RejectsDuplicateNames) {
  EXPECT_THAT(
      CreateError({{"w", at::zeros({2})}, {"w", at::zeros({2})}}).ToString(),
      HasSubstr("parameter 'w' is given twice"));
}

TEST(FlatParametersTest, RejectsAnUndefinedTensor) {
  EXPECT_THAT(CreateError({{"w", at::Tensor()}}).ToString(),
              HasSubstr("parameter 'w' is an undefined tensor"));
}

TEST(FlatParametersTest, RejectsATensorNeitherOnCpuNorCuda) {
  EXPECT_THAT(
      CreateError(
          {{"w", at::empty({2}, at::TensorOptions().device(at::kMeta))}})
          .ToString(),
      HasSubstr("parameter 'w' must be on the CPU or a CUDA device, got meta"));
}

TEST(FlatParametersTest, RejectsANonFloatingTensor) {
  EXPECT_THAT(CreateError({{"w", at::zeros({2}, at::kLong)}}).ToString(),
              HasSubstr("parameter 'w' must have a floating dtype"));
}

TEST(FlatParametersTest, RejectsTiedWeightsPassedTwice) {
  at::Tensor w = at::zeros({2, 2}).requires_grad_();
  const absl::Status status =
      CreateError({{"embed.weight", w}, {"head.weight", w}});
  EXPECT_THAT(status.ToString(),
              HasSubstr("parameter 'head.weight' shares storage with "
                        "parameter 'embed.weight'"));
}

TEST(FlatParametersTest, RejectsViewsOfOneStorage) {
  at::Tensor base = at::zeros({4});
  EXPECT_THAT(
      CreateError({{"a", base.narrow(0, 0, 2)}, {"b", base.narrow(0, 2, 2)}})
          .ToString(),
      HasSubstr("'b' shares storage with parameter 'a'"));
}

TEST(FlatParametersTest, RejectsMixedDtypes) {
  EXPECT_THAT(
      CreateError({{"a", at::zeros({2})}, {"b", at::zeros({2}, at::kDouble)}})
          .ToString(),
      HasSubstr("parameter 'b' has dtype Double but parameter 'a' has Float"));
}

TEST(FlatParametersTest, RejectsANonLeafTensor) {
  at::Tensor w = at::zeros({2}).requires_grad_();
  EXPECT_THAT(CreateError({{"w2", w * 2}}).ToString(),
              HasSubstr("parameter 'w2' is not a leaf tensor"));
}

TEST(FlatParametersTest, RejectsAlignElemsBelowOne) {
  EXPECT_THAT(CreateError({{"w", at::zeros({2})}}, 0).ToString(),
              HasSubstr("align_elems must be >= 1, got 0"));
}

TEST(FlatParametersTest, RejectsANonFloatingFlatDtype) {
  EXPECT_THAT(CreateError({{"w", at::zeros({2})}}, 1, at::kInt).ToString(),
              HasSubstr("dtype must be a floating type, got Int"));
}

TEST(FlatParametersTest, FailedCreateLeavesParametersUntouched) {
  at::Tensor a = at::ones({2}).requires_grad_();
  const void* data = a.data_ptr();
  EXPECT_FALSE(CreateError({{"a", a}, {"b", at::zeros({2}, at::kLong)}}).ok());
  EXPECT_EQ(a.data_ptr(), data);
  EXPECT_FALSE(a.grad().defined());
}

}  // namespace
}  // namespace strata::optim
