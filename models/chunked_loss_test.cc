#include "models/chunked_loss.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/torch_compat.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/init.h"
#include "models/unit.h"

namespace strata::models {
namespace {

constexpr int64_t kTokens = 48;
constexpr int64_t kHidden = 32;
constexpr int64_t kVocab = 300;
// fp32's unit roundoff.
constexpr double kUnitRoundoff = 5.9604644775390625e-8;  // 2^-24
// bf16's: a sum rounded to bf16 at every addition errs by this per term.
constexpr double kBf16SumRoundoff = 1.0 / 256;  // 2^-8

struct Inputs {
  at::Tensor hidden;   // [kTokens, kHidden], requires grad
  at::Tensor weight;   // [kVocab, kHidden], requires grad
  at::Tensor targets;  // [kTokens] int64
};

Inputs MakeInputs(at::ScalarType dtype = at::kFloat, uint64_t seed = 5) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  Inputs in;
  in.hidden = at::randn({kTokens, kHidden}, generator, at::kFloat)
                  .to(dtype)
                  .requires_grad_(true);
  in.weight = (at::randn({kVocab, kHidden}, generator, at::kFloat) * 0.2)
                  .to(dtype)
                  .requires_grad_(true);
  in.targets = at::randint(kVocab, {kTokens}, generator, at::kLong);
  return in;
}

struct Result {
  at::Tensor loss;
  at::Tensor grad_hidden;
  at::Tensor grad_weight;
};

// Gradients of 0.75 * loss (a loss weight, as strategies apply).
Result Backward(const at::Tensor& loss, const Inputs& in) {
  const std::vector<at::Tensor> grads =
      torch::autograd::grad({loss * 0.75}, {in.hidden, in.weight});
  return {loss.detach(), grads[0], grads[1]};
}

// The unfused path the models take today: logits [1, N, V] from at::linear,
// then UnitModel::Loss.
Result Unfused(const Inputs& in) {
  return Backward(UnitModel::Loss(at::linear(in.hidden.unsqueeze(0), in.weight),
                                  in.targets.unsqueeze(0)),
                  in);
}

Result Chunked(const Inputs& in, int64_t chunk_tokens) {
  return Backward(
      ChunkedLinearCrossEntropy(in.hidden, in.weight, in.targets, chunk_tokens),
      in);
}

bool BitwiseEqual(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         at::equal(a, b);
}

// An upper bound of |g|, g the gradient of 0.75 * loss with respect to the
// logits (in double): (softmax + onehot(target)) * 0.75 / N (an ignored
// target, -100, counts as class 0: a larger bound).
at::Tensor AbsLogitGradBound(const Inputs& in) {
  const at::Tensor softmax =
      at::softmax(at::linear(in.hidden.detach().to(at::kDouble),
                             in.weight.detach().to(at::kDouble)),
                  1);
  return (softmax +
          at::one_hot(in.targets.clamp_min(0), kVocab).to(at::kDouble)) *
         0.75 / kTokens;
}

// The largest |chunked - unfused| gradient of the weight may differ by, per
// element. Both are fp32 sums of the same N products g[i][v] * h[i][k] in
// different orders (one matmul over all N rows, or one per chunk added up);
// recursive summation of n terms errs by at most gamma_n * sum |terms|,
// gamma_n = n u / (1 - n u) < 1.01 n u, so the two differ by at most
// 2 * 1.01 * N * u * sum_i |g[i][v]| |h[i][k]|. The fused backward also
// computes g itself (exp of the log-probabilities, in place) where the
// unfused one calls log_softmax's backward kernel, whose exp may differ by an
// ulp: |dg| <= 2 u |g| (the exp and the product), adding 2 u * sum |g||h|
// per side, 4 u for both. `extra_relative` adds a relative term for a
// rounding of the result to a lower precision (bf16: 2^-8 covers one ulp).
//
// `unfused_roundoff` is the unit roundoff the unfused product's own sum runs
// in: fp32's, or for bf16 operands that of LibTorch's bf16 GEMM on this CPU,
// which without AVX-512 (oneDNN's bf16 kernels) may round its running sums
// to bf16 (2^-8, kBf16SumRoundoff); that side then errs by up to
// 1.01 N u_bf16 sum |terms|, where the chunked side sums in fp32.
at::Tensor WeightGradBound(const Inputs& in, const Result& unfused,
                           double extra_relative,
                           double unfused_roundoff = kUnitRoundoff) {
  const at::Tensor abs_sum = at::mm(AbsLogitGradBound(in).t(),
                                    in.hidden.detach().to(at::kDouble).abs());
  return ((1.01 * kTokens + 4) * kUnitRoundoff +
          1.01 * kTokens * unfused_roundoff) *
             abs_sum +
         extra_relative * unfused.grad_weight.to(at::kDouble).abs();
}

// The largest |chunked - unfused| gradient of the hidden states may differ
// by, per element. Each row is the same sum over V of g[i][v] * w[v][k], but
// the BLAS may take another kernel for a product with fewer rows (OpenBLAS
// does for chunks of one or two rows), summing in another order; as above
// they differ by at most (2 * 1.01 * V + 4) * u * sum_v |g[i][v]| |w[v][k]|.
at::Tensor HiddenGradBound(const Inputs& in, const Result& unfused,
                           double extra_relative) {
  const at::Tensor abs_sum =
      at::mm(AbsLogitGradBound(in), in.weight.detach().to(at::kDouble).abs());
  return (2 * 1.01 * kVocab + 4) * kUnitRoundoff * abs_sum +
         extra_relative * unfused.grad_hidden.to(at::kDouble).abs();
}

// Whether every element of |a - b| is within `bound`.
bool WithinBound(const at::Tensor& a, const at::Tensor& b,
                 const at::Tensor& bound) {
  return (a.to(at::kDouble) - b.to(at::kDouble))
      .abs()
      .le(bound)
      .all()
      .item<bool>();
}

// ||a - b|| / ||b|| (Frobenius).
double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor bd = b.to(at::kDouble);
  return ((a.to(at::kDouble) - bd).norm() / bd.norm()).item<double>();
}

// Chunk sizes: one token, a divisor of kTokens, a non-divisor (48 = 3 * 13 +
// 9), all tokens in one chunk, and more than all.
class ChunkedLossTest : public ::testing::TestWithParam<int64_t> {};

INSTANTIATE_TEST_SUITE_P(ChunkSizes, ChunkedLossTest,
                         ::testing::Values(1, 16, 13, kTokens, 4 * kTokens));

TEST_P(ChunkedLossTest, LossIsBitwiseTheUnfusedLoss) {
  const Inputs in = MakeInputs();
  EXPECT_TRUE(BitwiseEqual(Chunked(in, GetParam()).loss, Unfused(in).loss));
}

TEST_P(ChunkedLossTest, HiddenGradientIsWithinTheSummationBound) {
  const Inputs in = MakeInputs();
  const Result unfused = Unfused(in);
  const Result chunked = Chunked(in, GetParam());
  EXPECT_TRUE(WithinBound(chunked.grad_hidden, unfused.grad_hidden,
                          HiddenGradBound(in, unfused, 0)));
  EXPECT_LE(RelativeError(chunked.grad_hidden, unfused.grad_hidden), 1e-6);
}

TEST_P(ChunkedLossTest, WeightGradientIsWithinTheSummationBound) {
  const Inputs in = MakeInputs();
  const Result unfused = Unfused(in);
  const Result chunked = Chunked(in, GetParam());
  EXPECT_TRUE(WithinBound(chunked.grad_weight, unfused.grad_weight,
                          WeightGradBound(in, unfused, 0)));
  // The criterion, in norm: 1e-6 relative.
  EXPECT_LE(RelativeError(chunked.grad_weight, unfused.grad_weight), 1e-6);
}

TEST_P(ChunkedLossTest, IgnoredTargetsAreLeftOutOfTheMean) {
  Inputs in = MakeInputs();
  in.targets.narrow(0, 3, 7).fill_(-100);
  const Result unfused = Unfused(in);
  const Result chunked = Chunked(in, GetParam());
  EXPECT_TRUE(BitwiseEqual(chunked.loss, unfused.loss));
  EXPECT_TRUE(WithinBound(chunked.grad_hidden, unfused.grad_hidden,
                          HiddenGradBound(in, unfused, 0)));
  EXPECT_TRUE(WithinBound(chunked.grad_weight, unfused.grad_weight,
                          WeightGradBound(in, unfused, 0)));
}

TEST_P(ChunkedLossTest, Bf16ParametersMatchTheUnfusedBf16Path) {
  const Inputs in = MakeInputs(at::kBFloat16);
  const Result unfused = Unfused(in);
  const Result chunked = Chunked(in, GetParam());
  EXPECT_TRUE(BitwiseEqual(chunked.loss, unfused.loss));
  EXPECT_TRUE(WithinBound(chunked.grad_hidden, unfused.grad_hidden,
                          HiddenGradBound(in, unfused, 1.0 / 256)));
  ASSERT_EQ(chunked.grad_weight.scalar_type(), at::kBFloat16);
  // Several chunks sum in fp32 and round once to bf16 like the one matmul.
  EXPECT_TRUE(
      WithinBound(chunked.grad_weight, unfused.grad_weight,
                  WeightGradBound(in, unfused, 1.0 / 256, kBf16SumRoundoff)));
}

TEST_P(ChunkedLossTest, Bf16AutocastMatchesTheUnfusedAutocastPath) {
  const Inputs in = MakeInputs();
  auto under_autocast = [](auto f) {
    const torch_compat::AutocastState was =
        torch_compat::GetAutocastState(c10::kCPU);
    torch_compat::SetAutocastState(c10::kCPU, {true, at::kBFloat16});
    at::Tensor loss = f();
    torch_compat::SetAutocastState(c10::kCPU, was);
    at::autocast::clear_cache();
    return loss;
  };
  const Result unfused = Backward(
      under_autocast([&] {
        return UnitModel::Loss(at::linear(in.hidden.unsqueeze(0), in.weight),
                               in.targets.unsqueeze(0));
      }),
      in);
  const Result chunked =
      Backward(under_autocast([&] {
                 return ChunkedLinearCrossEntropy(in.hidden, in.weight,
                                                  in.targets, GetParam());
               }),
               in);
  EXPECT_TRUE(BitwiseEqual(chunked.loss, unfused.loss));
  EXPECT_TRUE(WithinBound(chunked.grad_hidden, unfused.grad_hidden,
                          HiddenGradBound(in, unfused, 1.0 / 256)));
  ASSERT_EQ(chunked.grad_weight.scalar_type(), at::kFloat);
  EXPECT_TRUE(
      WithinBound(chunked.grad_weight, unfused.grad_weight,
                  WeightGradBound(in, unfused, 1.0 / 256, kBf16SumRoundoff)));
}

// One chunk runs the unfused path's very ops on the same arguments.
TEST(ChunkedLossOneChunkTest, GradientsAreBitwiseWithOneChunk) {
  const Inputs in = MakeInputs();
  const Result unfused = Unfused(in);
  const Result chunked = Chunked(in, kTokens);
  EXPECT_TRUE(BitwiseEqual(chunked.grad_hidden, unfused.grad_hidden));
  EXPECT_TRUE(BitwiseEqual(chunked.grad_weight, unfused.grad_weight));
}

TEST(ChunkedLossOneChunkTest, LossIsDifferentiableOnlyWhereAsked) {
  Inputs in = MakeInputs();
  in.weight.requires_grad_(false);
  const at::Tensor loss =
      ChunkedLinearCrossEntropy(in.hidden, in.weight, in.targets, 7);
  loss.backward();
  EXPECT_TRUE(in.hidden.grad().defined());
  EXPECT_FALSE(in.weight.grad().defined());
}

TEST(ChunkedLossArgumentsTest, RejectsChunkTokensBelowOne) {
  const Inputs in = MakeInputs();
  EXPECT_THROW(ChunkedLinearCrossEntropy(in.hidden, in.weight, in.targets, 0),
               std::invalid_argument);
}

TEST(ChunkedLossArgumentsTest, RejectsMismatchedShapes) {
  const Inputs in = MakeInputs();
  EXPECT_THROW(ChunkedLinearCrossEntropy(in.hidden, in.weight,
                                         in.targets.narrow(0, 0, 5), 8),
               std::invalid_argument);
}

TEST(ChunkedLossArgumentsTest, RejectsNonInt64Targets) {
  const Inputs in = MakeInputs();
  EXPECT_THROW(ChunkedLinearCrossEntropy(in.hidden, in.weight,
                                         in.targets.to(at::kInt), 8),
               std::invalid_argument);
}

// --- The models' heads (Gpt, Llama) ----------------------------------------

// A named tiny config, optionally with Llama's head tied to its embedding.
ModelConfig TinyConfig(const std::string& name, bool tied,
                       int64_t loss_chunk_tokens) {
  absl::StatusOr<ModelConfig> config = ConfigByName(name);
  EXPECT_TRUE(config.ok()) << config.status();
  if (tied) config->tie_embeddings = true;
  config->loss_chunk_tokens = loss_chunk_tokens;
  return *config;
}

std::shared_ptr<UnitModel> BuildTiny(const ModelConfig& config) {
  BuildOptions options;
  options.seed = 3;
  absl::StatusOr<std::shared_ptr<UnitModel>> model =
      BuildModel(config, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

struct ModelCase {
  std::string name;
  bool tied = false;
};

class ChunkedHeadTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  // [2, 24] tokens and their targets: 48 tokens, chunks of 13 (not a
  // divisor).
  static constexpr int64_t kChunk = 13;
  void SetUp() override {
    at::Generator generator = at::detail::createCPUGenerator(9);
    const at::Tensor data = at::randint(256, {2, 25}, generator, at::kLong);
    tokens_ = data.narrow(1, 0, 24);
    targets_ = data.narrow(1, 1, 24);
  }
  std::shared_ptr<UnitModel> Model(int64_t loss_chunk_tokens) const {
    return BuildTiny(
        TinyConfig(GetParam().name, GetParam().tied, loss_chunk_tokens));
  }
  at::Tensor tokens_;
  at::Tensor targets_;
};

INSTANTIATE_TEST_SUITE_P(
    Models, ChunkedHeadTest,
    ::testing::Values(ModelCase{"gpt-tiny"}, ModelCase{"llama-tiny"},
                      ModelCase{"llama-tiny", /*tied=*/true}),
    [](const ::testing::TestParamInfo<ModelCase>& info) {
      return (info.param.name == "gpt-tiny" ? std::string("Gpt")
                                            : std::string("Llama")) +
             (info.param.tied ? "Tied" : "");
    });

TEST_P(ChunkedHeadTest, UnfusedForwardLossIsLossOfForward) {
  std::shared_ptr<UnitModel> model = Model(0);
  EXPECT_TRUE(BitwiseEqual(model->ForwardLoss(tokens_, targets_),
                           UnitModel::Loss(model->Forward(tokens_), targets_)));
}

// How far the chunked model's loss may be from the unfused one's. Each
// chunk's logits come from a product with fewer rows than the unfused one,
// which the BLAS may compute with another kernel, summing the D products of
// a logit in another order (OpenBLAS's AVX2 kernels do for the tied Llama
// head; elsewhere the two are bitwise equal). Recursive summation errs by at
// most 1.01 D u sum_k |h_k||w_k| <= 1.01 D u ||h|| ||w_v|| per side, so a
// logit moves by E <= 2.02 D u max ||h|| max ||w_v||, with ||h|| <= sqrt(D)
// max|gamma| + ||beta|| after the final norm (RMSNorm or LayerNorm). A
// token's loss, log-sum-exp minus the target's logit, moves by at most 2E
// (each is 1-Lipschitz in the largest logit change), and so does their mean;
// 8 u |loss| more covers log_softmax rounding the moved values.
double LossBound(const UnitModel& model, double loss) {
  double max_gamma = 0;
  double beta_norm = 0;
  int64_t dim = 0;
  at::Tensor head;
  at::Tensor embedding;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const at::Tensor value = item.value().detach().to(at::kDouble);
    if (name == "norm.weight" || name == "ln_f.weight") {
      max_gamma = value.abs().max().item<double>();
      dim = value.numel();
    } else if (name == "ln_f.bias") {
      beta_norm = value.norm().item<double>();
    } else if (name == "output.weight") {
      head = value;
    } else if (name == "tok_embeddings.weight" || name == "wte.weight") {
      embedding = value;
    }
  }
  if (!head.defined()) head = embedding;  // Tied.
  EXPECT_GT(dim, 0) << "no final norm found";
  EXPECT_TRUE(head.defined()) << "no head weight found";
  if (dim == 0 || !head.defined()) return 0;
  const double hidden_norm =
      std::sqrt(static_cast<double>(dim)) * max_gamma + beta_norm;
  const double max_row_norm = head.norm(2, {1}).max().item<double>();
  const double logit_error = 2.02 * static_cast<double>(dim) * kUnitRoundoff *
                             hidden_norm * max_row_norm;
  return 2 * logit_error + 8 * kUnitRoundoff * std::abs(loss);
}

TEST_P(ChunkedHeadTest, ChunkedLossIsTheUnfusedLossWithinTheLogitBound) {
  std::shared_ptr<UnitModel> unfused_model = Model(0);
  const at::Tensor unfused = unfused_model->ForwardLoss(tokens_, targets_);
  const at::Tensor chunked = Model(kChunk)->ForwardLoss(tokens_, targets_);
  ASSERT_EQ(chunked.scalar_type(), unfused.scalar_type());
  const double want = unfused.item<double>();
  const double bound = LossBound(*unfused_model, want);
  // Far below what a wrong chunk would do (a token left out or counted
  // twice moves the mean by about loss / N, 0.1 here).
  EXPECT_LT(bound, 1e-3);
  EXPECT_NEAR(chunked.item<double>(), want, bound);
}

// The head's gradients differ from the unfused ones by a few fp32 ulps
// (above); backward carries them through every unit, each op adding its own
// rounding of a few ulps relative, so every parameter's gradient stays
// within 1e-5 relative in norm (observed: ~1e-7).
TEST_P(ChunkedHeadTest, ChunkedGradientsMatchTheUnfusedGradients) {
  std::shared_ptr<UnitModel> unfused = Model(0);
  std::shared_ptr<UnitModel> chunked = Model(kChunk);
  unfused->ForwardLoss(tokens_, targets_).backward();
  chunked->ForwardLoss(tokens_, targets_).backward();
  const auto expected = unfused->named_parameters();
  for (const auto& item : chunked->named_parameters()) {
    const at::Tensor& want = expected[item.key()].grad();
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_LE(RelativeError(item.value().grad(), want), 1e-5) << item.key();
  }
}

// Records the dimensions of the head unit's output.
class HeadOutputRecorder : public UnitInterceptor {
 public:
  at::Tensor Run(const UnitInfo& unit, const at::Tensor& input,
                 const UnitForward& forward) override {
    at::Tensor output = forward(input);
    if (unit.name == "head") head_output_dims.push_back(output.dim());
    return output;
  }
  std::vector<int64_t> head_output_dims;
};

TEST_P(ChunkedHeadTest, ChunkedHeadUnitReturnsTheLoss) {
  std::shared_ptr<UnitModel> model = Model(kChunk);
  auto recorder = std::make_shared<HeadOutputRecorder>();
  model->AddInterceptor(recorder);
  model->ForwardLoss(tokens_, targets_);
  EXPECT_EQ(recorder->head_output_dims, std::vector<int64_t>{0});
}

TEST_P(ChunkedHeadTest, ForwardStillReturnsLogitsWhenChunked) {
  EXPECT_EQ(Model(kChunk)->Forward(tokens_).sizes(),
            at::IntArrayRef({2, 24, 256}));
}

TEST_P(ChunkedHeadTest, TargetsOfAnotherShapeAreRejected) {
  EXPECT_THROW(Model(kChunk)->ForwardLoss(tokens_, targets_.narrow(1, 0, 5)),
               std::invalid_argument);
}

}  // namespace
}  // namespace strata::models
