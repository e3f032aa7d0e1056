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

// The named model configuration (models::ConfigByName); a failure is a test
// failure.
models::ModelConfig Config(const std::string& name);
// A fresh model with weights from `seed`; a failure is a test failure.
std::shared_ptr<models::UnitModel> Build(const models::ModelConfig& config,
                                         uint64_t seed);
// Cosine, base lr 1e-4, 2 warm-up steps over kSteps.
optim::LrScheduleOptions Schedule();
// The default optimizer (weight decay 0.1) clipping at `grad_clip`.
OptimizerConfig Optimizer(double grad_clip = 1.0);
// Options for strategy `kind` with the given bucket caps.
StrategyOptions Kind(const std::string& kind,
                     int64_t bucket_bytes = int64_t{25} << 20,
                     int64_t first_bucket_bytes = int64_t{1} << 20);
// A process-wide corpus (vocabulary 256), built on first use, never freed.
const data::MarkovCorpus& Corpus();

// Trains `steps` steps on this rank's part of each global batch, split into
// `micro_batches` micro-batches of (nearly) equal size; appends each step's
// pre-clip gradient norm to `grad_norms` when given.
absl::Status Train(Strategy& strategy, int rank, int world, int micro_batches,
                   std::vector<double>* grad_norms = nullptr,
                   int steps = kSteps);
// A copy of the strategy's model state.
Params Snapshot(const Strategy& strategy);
// Trains `model_name` (seed 7) single-process for kSteps steps; returns its
// parameters and appends the gradient norms to `grad_norms`.
Params TrainSingle(const std::string& model_name,
                   std::vector<double>* grad_norms);

// Expects `actual` to hold the parameters of `expected`, each within
// 1e-5 * max(1, max|expected|).
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
void ExpectClose(const Params& actual, const Params& expected,
                 const std::string& what);
// Expects `actual` to hold the parameters of `expected`, bitwise equal.
void ExpectEqual(const Params& actual, const Params& expected,
                 const std::string& what);

// Trains `model_name` with strategy `options` (CreateStrategy) on 1 to 4
// ranks, with 1 and 2 micro-batches, and expects the strategy's name to be
// `name`, its gradient norms within 1e-5 relative and its parameters
// ExpectClose to TrainSingle's. Failure messages start with
// what_prefix + model_name.
void ExpectMatchesSingle(const std::string& model_name,
                         const StrategyOptions& options,
                         const std::string& name,
                         const std::string& what_prefix);

}  // namespace strata::strategies::testing

#endif  // STRATA_STRATEGIES_TESTING_PARITY_H_
