// Test helpers shared by the data-parallel strategy tests (ddp_test.cc,
// zero_test.cc): model building, the sampler's batches, training a strategy
// single-process or on one rank of a group, and comparing parameters with the
// single-process result.
//
// Every function may be called from any test thread (the corpus is built once,
// thread-safely); the gtest assertions report on the calling thread's test.
#ifndef STRATA_STRATEGIES_TESTING_PARITY_H_
#define STRATA_STRATEGIES_TESTING_PARITY_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "data/markov_corpus.h"
#include "models/config.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/strategy.h"

namespace strata::strategies::testing {

// Parameters by name.
using Params = std::map<std::string, at::Tensor>;

constexpr int64_t kGlobalBatch = 12;
constexpr int64_t kSeqLen = 32;
constexpr int kSteps = 5;

// The named model configuration (models::ConfigByName) with dropout
// probability `dropout` (GPT models only); a failure is a test failure.
models::ModelConfig Config(const std::string& name, double dropout = 0.0);

// The dropout probability of the parity runs with dropout, and the seed of
// the DropoutContext Train sets on the model before every micro-batch.
constexpr double kParityDropout = 0.1;
constexpr uint64_t kDropoutSeed = 11;
// A fresh model with weights from `seed`; a failure is a test failure.
std::shared_ptr<models::UnitModel> Build(const models::ModelConfig& config,
                                         uint64_t seed);
// Cosine, base lr `base_lr`, 2 warm-up steps over kSteps.
optim::LrScheduleOptions Schedule(double base_lr = 1e-4);
// The default optimizer (AdamW, weight decay 0.1) clipping at `grad_clip`.
OptimizerConfig Optimizer(double grad_clip = 1.0);

// An optimizer the parity tests train with, and the peak lr of its cosine
// Schedule(base_lr). Adam-family updates are ~lr per element per step
// whatever the gradient, so they run at 1e-4; SGD's is lr times the
// (clipped) gradient, ~1e-3 of it per element, so it runs at 0.1 to move
// parameters by a comparable amount.
struct ParityOptimizer {
  std::string name;  // For messages.
  OptimizerConfig config;
  double base_lr = 1e-4;
};
// AdamW (Optimizer()) at 1e-4: what every parity test uses by default.
ParityOptimizer ParityAdamW();
// Adam (L2 weight decay 0.1) at 1e-4.
ParityOptimizer ParityAdam();
// SGD with momentum 0.9, dampening 0.1 and L2 weight decay 0.1, at 0.1.
ParityOptimizer ParitySgd();
// AdamW at 1e-4 clipping by the infinity norm (the largest |gradient|) at
// 1e-3, which every step of the parity runs exceeds: sharded strategies
// combine their shards' parts with a max, not a sum. AdamW's update is
// invariant to the clipping scale up to eps, so AdamW's tolerance holds.
ParityOptimizer ParityAdamWInfNorm();

// The largest difference ExpectClose allows between a data-parallel run and
// single-process training of a parameter whose largest |value| is `scale`
// (the derivations are at ExpectClose).
double ParityTolerance(const ParityOptimizer& optimizer, double scale);
// Options for strategy `kind` with the given bucket caps.
StrategyOptions Kind(const std::string& kind,
                     int64_t bucket_bytes = int64_t{25} << 20,
                     int64_t first_bucket_bytes = int64_t{1} << 20);
// A process-wide corpus (vocabulary 256), built on first use, never freed.
const data::MarkovCorpus& Corpus();

// Trains `steps` steps on this rank's part of each global batch, split into
// `micro_batches` micro-batches of (nearly) equal size; appends each step's
// pre-clip gradient norm to `grad_norms` when given. Before each micro-batch
// it sets a DropoutContext on the strategy's model as launch/train/trainer.cc
// does (kDropoutSeed, the step, the global sample index of every row), so
// dropout masks follow the global batch whatever the world size and micro-batch
// split (models/dropout.h); without dropout in the model it has no effect.
absl::Status Train(Strategy& strategy, int rank, int world, int micro_batches,
                   std::vector<double>* grad_norms = nullptr,
                   int steps = kSteps);
// A copy of the strategy's model state.
Params Snapshot(const Strategy& strategy);
// Trains `model_name` (seed 7, dropout `dropout`) single-process for kSteps
// steps with `optimizer`; returns its parameters and appends the gradient
// norms to `grad_norms`.
Params TrainSingle(const std::string& model_name,
                   std::vector<double>* grad_norms, double dropout = 0.0,
                   const ParityOptimizer& optimizer = ParityAdamW());

// Expects `actual` to hold the parameters of `expected`, each within
// ParityTolerance(optimizer, max|expected|).
//
// The tolerance of the data-parallel-vs-single comparison. Both compute the
// same gradient with float sums in different orders: each rank's loss mean
// over its rows, accumulated micro-batches, then an average over ranks,
// instead of one mean over all rows. A reordered float sum of n terms differs
// by up to ~n * 2^-24 of the sum of magnitudes, so gradient elements differ by
// ~1e-7 relative to their terms. AdamW's update is
// lr * m_hat / (sqrt(v_hat) + eps), bounded by ~lr per step per element
// whatever the gradient; an element whose gradient is well above its rounding
// noise changes its update by ~1e-7 * lr, but one whose gradient is near zero
// (a cancellation, where the noise is comparable to the gradient itself) can
// change its update by up to ~lr. Such elements are rare and do not repeat
// every step, so with lr = 1e-4 over 5 steps the worst element moves a
// fraction of 5 * lr = 5e-4 apart: measured up to 1.1e-6 (at lr = 1e-3:
// 1.6e-5; it scales with lr). 1e-5 * max(1, max|param|) bounds this with
// margin while a missing bucket, skipped rank or wrong gradient direction
// moves most elements by ~lr = 1e-4 per step. A gradient scaled as a whole (a
// missing average) barely changes AdamW's update, so the pre-clip gradient
// norms are compared too (ExpectMatchesSingle), to 1e-5 relative (their
// rounding is ~1e-7 relative).
//
// Adam: its update is AdamW's update of g + wd * p (L2 decay), so it is
// bounded by ~lr per step in the same way and the same 1e-5 * max(1,
// max|param|) holds; the decay term is computed identically on both sides
// from parameters that agree to that tolerance. Measured: up to 2.7e-7 on
// gpt-tiny (DDP, ZeRO, FSDP at 1..4 ranks).
//
// SGD: the update is linear in the gradient, so reordered sums move it by
// lr times the gradient's rounding noise, not by up to lr. With buffer
// b_t = momentum * b_(t-1) + (1 - dampening) * d_t and step lr_t * b_t, a
// gradient difference of at most delta per step moves the parameter by at
// most delta * G, G = sum_t lr_t * sum_(s<=t) momentum^(t-s) c_s (c_1 = 1:
// the buffer starts as d_1; later c_s = 1 - dampening): G = 0.81 for
// ParitySgd(). Clipping to grad_clip bounds every gradient element by
// grad_clip, and its rounding noise (~1e-7 relative to its terms) by
// delta = 1e-5 * grad_clip, leaving a factor 100 for elements whose terms
// cancel. Hence 1e-5 * grad_clip * G, plus 1e-6 * max(1, max|param|) for
// the float rounding of the parameter itself: 1e-5 absolute for gpt-tiny,
// while a missing bucket or average leaves elements behind by lr * |g|
// (1e-4 to 1e-2 at lr 0.1) and the pre-clip norms catch a scaled gradient.
// Measured: up to 1.9e-8 (DDP, ZeRO, FSDP at 1..4 ranks).
void ExpectClose(const Params& actual, const Params& expected,
                 const std::string& what,
                 const ParityOptimizer& optimizer = ParityAdamW());
// Expects `actual` to hold the parameters of `expected`, bitwise equal.
void ExpectEqual(const Params& actual, const Params& expected,
                 const std::string& what);

// Trains `model_name` with strategy `options` (CreateStrategy) and
// `optimizer` on 1 to 4 ranks, with 1 and 2 micro-batches, and expects the
// strategy's name to be `name`, its gradient norms within 1e-5 relative and
// its parameters ExpectClose to TrainSingle's with the same optimizer.
// Failure messages start with what_prefix + model_name. With `dropout` > 0
// both sides train with that dropout probability: the masks are a function
// of the global sample, so the same tolerance holds (dropout multiplies
// activations by the same 0 or 1 / (1 - p) on both sides and adds no
// rounding difference).
void ExpectMatchesSingle(const std::string& model_name,
                         const StrategyOptions& options,
                         const std::string& name,
                         const std::string& what_prefix, double dropout = 0.0,
                         const ParityOptimizer& optimizer = ParityAdamW());

// Expects `actual` to hold one pre-clip gradient norm per step of
// `expected`, each within `relative` of it. The norms catch a gradient scaled
// as a whole (a missing or doubled average), which AdamW's update would hide.
void ExpectNormsNear(const std::vector<double>& actual,
                     const std::vector<double>& expected, double relative,
                     const std::string& what);

// --- Runs of any model with its own training loop.

// What a run leaves: rank 0's full parameters (Strategy::FullModelState) and
// its pre-clip gradient norms, one per step.
struct RunResult {
  Params params;
  std::vector<double> norms;
};
// A fresh model with the run's initial weights; called once per rank.
using MakeModel = std::function<std::shared_ptr<models::UnitModel>()>;
// One rank's training loop: trains `strategy` as rank `rank` of `world` and
// appends each step's pre-clip gradient norm to `norms`.
using TrainLoop = std::function<absl::Status(
    Strategy& strategy, int rank, int world, std::vector<double>* norms)>;
// Train(strategy, rank, world, micro_batches, norms) on the token corpus.
TrainLoop TokenLoop(int micro_batches);

// Creates a strategy with `options` (Optimizer(), Schedule()) over
// make_model() on each of `world` ranks (world 1: single-process, no group),
// runs `train` on it and returns rank 0's RunResult. Any failure is a test
// failure (the result is then empty).
RunResult TrainRun(const StrategyOptions& options, const MakeModel& make_model,
                   int world, const TrainLoop& train);

// ExpectClose on the parameters and ExpectNormsNear within 1e-5 relative
// (the norms' rounding is ~1e-7): a data-parallel run against single-process
// training in fp32.
void ExpectRunMatches(const RunResult& actual, const RunResult& expected,
                      const std::string& what);

// --- Mixed precision and frozen parameters.

// Options for strategy `kind` with bf16 parameters and gradients reduced in
// `reduce_dtype`.
StrategyOptions MixedKind(const std::string& kind, at::ScalarType reduce_dtype,
                          int64_t bucket_bytes = int64_t{25} << 20,
                          int64_t first_bucket_bytes = int64_t{1} << 20);

// Full tensors from sharded state: every run of `runs` (all ranks' ModelState
// pooled) copied to its offset. Runs of replicated state overwrite each other
// (with equal values when the replicas agree).
Params Assemble(const std::vector<ShardedTensor>& runs);

// The fp32 parameters of `model` (a copy).
Params ParametersOf(const models::UnitModel& model);

// Trains `model_name` (seed 7) single-process with `options` (kind
// "single"; mixed precision allowed) and `micro_batches`; returns its
// ModelState and appends the pre-clip gradient norms to `grad_norms`.
// `prepare`, when given, runs on the model before the strategy is created
// (to freeze parameters).
Params TrainSingleWith(
    const std::string& model_name, const StrategyOptions& options,
    int micro_batches, std::vector<double>* grad_norms,
    const std::function<void(models::UnitModel&)>& prepare = nullptr);

// The largest total change kSteps AdamW steps of Optimizer() under
// Schedule() can make to any element, whatever the gradients: sum over
// steps t of lr_t * U_t, where U_t bounds |m_hat_t / sqrt(v_hat_t)|. With
// m_hat_t = sum_i a_i g_i and v_hat_t = sum_i b_i g_i^2
// (a_i = (1 - b1) b1^(t-i) / (1 - b1^t), b_i = (1 - b2) b2^(t-i) /
// (1 - b2^t)), Cauchy-Schwarz gives |m_hat_t| <= sqrt(sum_i a_i^2 / b_i) *
// sqrt(v_hat_t), so U_t = sqrt(sum_i a_i^2 / b_i) (1 at t = 1, ~1.002 by
// t = 5 with b1 = 0.9, b2 = 0.999); eps only shrinks the update and decoupled
// weight decay (p *= 1 - lr wd) only shrinks differences.
double AdamWTotalUpdateBound();

// Mixed-precision comparison of `actual` with `expected`, both trained from
// `initial`. bf16 compute makes two runs that reduce gradients in different
// orders differ by bf16 rounding (2^-8 relative) of partial gradient sums,
// not by fp32 rounding, so an element whose gradient is comparable to that
// noise can take a different AdamW step. Two bounds, per parameter:
//   max |actual - expected| <= 2 * AdamWTotalUpdateBound() (each run's steps
//     lie within [-bound, bound] whatever the gradients; plus 1e-6 of the
//     parameter's scale for fp32 rounding of the updates) — holds
//     unconditionally;
//   mean |actual - expected| <= mean_ratio * mean |expected - initial|: the
//     runs agree on most of how far training moved the parameter. A
//     parameter that missed its gradient reduction or an update moves by the
//     full movement (ratio ~1 or more).
void ExpectWithinBf16Noise(const Params& actual, const Params& expected,
                           const Params& initial, double mean_ratio,
                           const std::string& what);

// The mean_ratio the mixed-precision tests use. Measured on gpt-tiny (5
// steps): up to 0.03 for ddp/zero1/zero2 at 2 to 4 ranks vs bf16 single
// (either reduce dtype, with and without accumulation), and 0.022 for bf16
// single vs fp32 single, always on norm gains and biases; 0.1 leaves a
// factor 3 while a parameter that misses its update or its gradient
// reduction scores about 1. Measured where both sides run the same bf16
// kernels; for bf16 against fp32 training see kBf16VsFp32MeanRatio.
constexpr double kBf16MeanRatio = 0.1;

// The mean_ratio for bf16 training against fp32 training, where the bf16
// side's noise is that of this CPU's bf16 GEMM. Measured on gpt-tiny (bf16
// single vs fp32 single, 5 steps, worst on biases): 0.022 where LibTorch
// runs bf16 products on oneDNN's AVX-512 kernels (fp32 accumulation), 0.119
// on an AVX2-only CPU (AMD EPYC), where its own bf16 GEMM rounds running
// sums to bf16. 0.3 leaves a factor 2.5 over the worst measured, and a
// parameter that misses its update still scores about 1.
constexpr double kBf16VsFp32MeanRatio = 0.3;

// Trains `model_name` with mixed-precision `options` on `worlds` ranks,
// with 1 and 2 micro-batches, and expects: the strategy's name `name`;
// pre-clip gradient norms within 2^-6 relative of bf16 single's (bf16
// rounding of each gradient element is 2^-8 relative; per-rank partial sums
// rounded separately at most double it, and a norm averages them: 2^-6
// leaves a factor 2 of margin); the fp32 masters (ModelState of all ranks,
// assembled) ExpectWithinBf16Noise of bf16 single's with
// kBf16MeanRatio; and every rank's bf16 model parameters equal to
// the masters cast to bf16, bitwise.
// `before_snapshot`, when given, runs on each rank's strategy after training
// and before the model's parameters are read (FSDP gathers them there).
void ExpectMixedMatchesSingle(
    const std::string& model_name, const StrategyOptions& options,
    const std::string& name, const std::vector<int>& worlds,
    const std::function<void(Strategy&)>& before_snapshot = nullptr);

// Freezes (requires_grad false) the parameters of `model` named in
// kFrozenParameters.
void Freeze(models::UnitModel& model);
// gpt-tiny parameters frozen by Freeze: the position embedding (a matrix:
// weight decay would change it) and one block's first norm gain.
extern const char* const kFrozenParameters[2];

// Trains gpt-tiny with `options` (fp32 or mixed precision) with Freeze()
// applied, on 2 and 3 ranks with 2 micro-batches, and expects the frozen
// parameters bitwise equal to their initial values (ModelState and, with
// mixed precision, the bf16 model parameters equal to their initial values
// cast) and the other parameters to match single with the same frozen
// parameters: ExpectClose (fp32) or ExpectWithinBf16Noise (mixed).
void ExpectFrozenParametersUnchanged(const StrategyOptions& options);

}  // namespace strata::strategies::testing

#endif  // STRATA_STRATEGIES_TESTING_PARITY_H_
