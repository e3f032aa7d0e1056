#include "strategies/testing/parity.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "data/sampler.h"
#include "models/dropout.h"
#include "models/factory.h"
#include "optim/lr_schedule.h"
#include "strategies/factory.h"

namespace strata::strategies::testing {

models::ModelConfig Config(const std::string& name, double dropout) {
  auto config = models::ConfigByName(name);
  EXPECT_TRUE(config.ok()) << config.status();
  config->dropout = dropout;
  return *config;
}

std::shared_ptr<models::UnitModel> Build(const models::ModelConfig& config,
                                         uint64_t seed) {
  auto model = models::BuildModel(config, models::BuildOptions{seed});
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

optim::LrScheduleOptions Schedule(double base_lr) {
  optim::LrScheduleOptions lr;
  lr.kind = optim::LrScheduleKind::kCosine;
  lr.base_lr = base_lr;
  lr.warmup_steps = 2;
  lr.total_steps = kSteps;
  return lr;
}

OptimizerConfig Optimizer(double grad_clip) {
  OptimizerConfig config;  // weight decay 0.1.
  config.grad_clip = grad_clip;
  return config;
}

ParityOptimizer ParityAdamW() { return {"adamw", Optimizer(), 1e-4}; }

ParityOptimizer ParityAdam() {
  ParityOptimizer adam{"adam", Optimizer(), 1e-4};
  adam.config.kind = OptimizerKind::kAdam;
  return adam;
}

ParityOptimizer ParityAdamWInfNorm() {
  ParityOptimizer adamw{"adamw_inf_norm", Optimizer(/*grad_clip=*/1e-3), 1e-4};
  adamw.config.grad_clip_norm_type = std::numeric_limits<double>::infinity();
  return adamw;
}

ParityOptimizer ParitySgd() {
  ParityOptimizer sgd{"sgd", Optimizer(), 0.1};
  sgd.config.kind = OptimizerKind::kSgd;
  sgd.config.sgd.momentum = 0.9;
  sgd.config.sgd.dampening = 0.1;
  return sgd;
}

double ParityTolerance(const ParityOptimizer& optimizer, double scale) {
  const OptimizerConfig& config = optimizer.config;
  const double floor_scale = std::max(1.0, scale);
  if (config.kind != OptimizerKind::kSgd) return 1e-5 * floor_scale;
  // ExpectClose's G: the parameter change per unit of gradient noise.
  EXPECT_GT(config.grad_clip, 0) << "the SGD bound needs clipping";
  auto schedule = optim::LrSchedule::Create(Schedule(optimizer.base_lr));
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  const double momentum = config.sgd.momentum;
  double gain = 0;
  double buffer = 0;  // Of a unit gradient every step.
  for (int t = 1; t <= kSteps; ++t) {
    buffer = t == 1 || momentum == 0
                 ? 1.0
                 : momentum * buffer + (1 - config.sgd.dampening);
    gain += (*schedule)->LrAt(t - 1) * buffer;
  }
  return 1e-5 * config.grad_clip * gain + 1e-6 * floor_scale;
}

StrategyOptions Kind(const std::string& kind, int64_t bucket_bytes,
                     int64_t first_bucket_bytes) {
  StrategyOptions options;
  absl::StatusOr<StrategyKind> parsed = ParseStrategyKind(kind);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  options.kind = parsed.value_or(StrategyKind::kSingle);
  options.bucket_bytes = bucket_bytes;
  options.first_bucket_bytes = first_bucket_bytes;
  return options;
}

const data::MarkovCorpus& Corpus() {
  static const data::MarkovCorpus* corpus = [] {
    data::MarkovCorpusOptions options;
    options.vocab_size = 256;
    options.num_tokens = 20000;
    auto created = data::MarkovCorpus::Create(options);
    CHECK(created.ok()) << created.status();
    return created->release();
  }();
  return *corpus;
}

absl::Status Train(Strategy& strategy, int rank, int world, int micro_batches,
                   std::vector<double>* grad_norms, int steps) {
  data::SamplerOptions options;
  options.seq_len = kSeqLen;
  options.global_batch_size = kGlobalBatch;
  options.seed = 5;
  STRATA_ASSIGN_OR_RETURN(auto sampler,
                          data::DistributedSampler::Create(&Corpus(), options));
  for (int step = 0; step < steps; ++step) {
    // The rows of a global batch are dealt to ranks in order, `rows` each.
    const int64_t first_of_batch = sampler->position();
    STRATA_ASSIGN_OR_RETURN(at::Tensor batch, sampler->NextBatch(rank, world));
    const int64_t rows = batch.size(0);
    const int64_t first_sample = first_of_batch + int64_t{rank} * rows;
    strategy.ZeroGrad();
    int64_t start = 0;
    for (int m = 0; m < micro_batches; ++m) {
      const int64_t size = (rows * (m + 1)) / micro_batches - start;
      at::Tensor chunk = batch.narrow(0, start, size);
      auto dropout = std::make_shared<models::DropoutContext>();
      dropout->seed = kDropoutSeed;
      dropout->step = step;
      for (int64_t i = 0; i < size; ++i) {
        dropout->sample_ids.push_back(first_sample + start + i);
      }
      strategy.model().SetDropoutContext(std::move(dropout));
      start += size;
      STRATA_ASSIGN_OR_RETURN(
          double loss,
          strategy.ForwardBackward(chunk.narrow(1, 0, kSeqLen).contiguous(),
                                   chunk.narrow(1, 1, kSeqLen).contiguous(),
                                   static_cast<double>(size) / rows,
                                   m + 1 == micro_batches));
      (void)loss;
    }
    STRATA_ASSIGN_OR_RETURN(StepResult result, strategy.Step(step));
    if (grad_norms != nullptr) grad_norms->push_back(result.grad_norm);
  }
  return absl::OkStatus();
}

Params Snapshot(const Strategy& strategy) {
  Params params;
  for (const ShardedTensor& t : strategy.ModelState()) {
    params[t.name] = t.local.detach().clone();
  }
  return params;
}

Params TrainSingle(const std::string& model_name,
                   std::vector<double>* grad_norms, double dropout,
                   const ParityOptimizer& optimizer) {
  auto created =
      CreateStrategy(StrategyOptions(), Build(Config(model_name, dropout), 7),
                     nullptr, optimizer.config, Schedule(optimizer.base_lr));
  EXPECT_TRUE(created.ok()) << created.status();
  absl::Status status = Train(**created, 0, 1, 1, grad_norms);
  EXPECT_TRUE(status.ok()) << status;
  return Snapshot(**created);
}

void ExpectClose(const Params& actual, const Params& expected,
                 const std::string& what, const ParityOptimizer& optimizer) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, want] : expected) {
    auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << what << ": " << name;
    const double tolerance =
        ParityTolerance(optimizer, want.abs().max().item<double>());
    const double diff = (it->second - want).abs().max().item<double>();
    EXPECT_LE(diff, tolerance)
        << what << ": " << name << " (" << optimizer.name << ")";
  }
}

void ExpectEqual(const Params& actual, const Params& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, want] : expected) {
    auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << what << ": " << name;
    EXPECT_TRUE(at::equal(it->second, want)) << what << ": " << name;
  }
}

void ExpectMatchesSingle(const std::string& model_name,
                         const StrategyOptions& options,
                         const std::string& name,
                         const std::string& what_prefix, double dropout,
                         const ParityOptimizer& optimizer) {
  std::vector<double> expected_norms;
  const Params expected =
      TrainSingle(model_name, &expected_norms, dropout, optimizer);
  for (int world = 1; world <= 4; ++world) {
    for (int micro_batches : {1, 2}) {
      const std::string what =
          absl::StrCat(what_prefix, model_name, " ", optimizer.name, " world ",
                       world, " micro-batches ", micro_batches);
      ASSERT_TRUE(
          comm::testing::RunOnRanks(
              world,
              [&](comm::Group& group) {
                auto created = CreateStrategy(
                    options, Build(Config(model_name, dropout), 7), &group,
                    optimizer.config, Schedule(optimizer.base_lr));
                ASSERT_TRUE(created.ok()) << created.status();
                EXPECT_EQ((*created)->name(), name);
                std::vector<double> norms;
                absl::Status status = Train(**created, group.rank(), world,
                                            micro_batches, &norms);
                ASSERT_TRUE(status.ok()) << status;
                ExpectNormsNear(norms, expected_norms, 1e-5, what);
                ExpectClose(Snapshot(**created), expected,
                            absl::StrCat(what, " rank ", group.rank()),
                            optimizer);
              })
              .ok())
          << what;
    }
  }
}

void ExpectNormsNear(const std::vector<double>& actual,
                     const std::vector<double>& expected, double relative,
                     const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t s = 0; s < expected.size(); ++s) {
    EXPECT_NEAR(actual[s], expected[s], relative * expected[s])
        << what << " step " << s;
  }
}

TrainLoop TokenLoop(int micro_batches) {
  return [micro_batches](Strategy& strategy, int rank, int world,
                         std::vector<double>* norms) {
    return Train(strategy, rank, world, micro_batches, norms);
  };
}

namespace {

// Trains a strategy made with `options` as rank `rank` of `world` (`group`
// null when world is 1) and returns its RunResult.
RunResult TrainOneRank(const StrategyOptions& options,
                       const MakeModel& make_model, comm::Group* group,
                       int world, const TrainLoop& train) {
  auto created =
      CreateStrategy(options, make_model(), group, Optimizer(), Schedule());
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return {};
  RunResult result;
  const absl::Status trained =
      train(**created, group ? group->rank() : 0, world, &result.norms);
  EXPECT_TRUE(trained.ok()) << trained;
  if (!trained.ok()) return {};
  auto full = (*created)->FullModelState();
  EXPECT_TRUE(full.ok()) << full.status();
  if (!full.ok()) return {};
  for (auto& [name, tensor] : *full) result.params[name] = tensor;
  return result;
}

}  // namespace

RunResult TrainRun(const StrategyOptions& options, const MakeModel& make_model,
                   int world, const TrainLoop& train) {
  if (world == 1) return TrainOneRank(options, make_model, nullptr, 1, train);
  std::vector<RunResult> results(world);
  const absl::Status formed =
      comm::testing::RunOnRanks(world, [&](comm::Group& group) {
        results[group.rank()] =
            TrainOneRank(options, make_model, &group, world, train);
      });
  EXPECT_TRUE(formed.ok()) << formed;
  return results[0];
}

void ExpectRunMatches(const RunResult& actual, const RunResult& expected,
                      const std::string& what) {
  ExpectClose(actual.params, expected.params, what);
  ExpectNormsNear(actual.norms, expected.norms, 1e-5, what);
}

StrategyOptions MixedKind(const std::string& kind, at::ScalarType reduce_dtype,
                          int64_t bucket_bytes, int64_t first_bucket_bytes) {
  StrategyOptions options = Kind(kind, bucket_bytes, first_bucket_bytes);
  options.mixed_precision.param_dtype = at::kBFloat16;
  options.mixed_precision.reduce_dtype = reduce_dtype;
  return options;
}

Params Assemble(const std::vector<ShardedTensor>& runs) {
  Params full;
  for (const ShardedTensor& t : runs) {
    auto it = full.find(t.name);
    if (it == full.end()) {
      it = full.emplace(t.name, at::zeros(t.global_shape, at::kFloat)).first;
    }
    EXPECT_EQ(it->second.sizes(), at::IntArrayRef(t.global_shape)) << t.name;
    it->second.view({-1})
        .narrow(0, t.offset, t.local.numel())
        .copy_(t.local.detach().reshape({-1}));
  }
  return full;
}

Params ParametersOf(const models::UnitModel& model) {
  Params params;
  for (const auto& item : model.named_parameters()) {
    params[item.key()] = item.value().detach().to(at::kFloat).clone();
  }
  return params;
}

Params TrainSingleWith(const std::string& model_name,
                       const StrategyOptions& options, int micro_batches,
                       std::vector<double>* grad_norms,
                       const std::function<void(models::UnitModel&)>& prepare) {
  std::shared_ptr<models::UnitModel> model = Build(Config(model_name), 7);
  if (prepare) prepare(*model);
  auto created =
      CreateStrategy(options, model, nullptr, Optimizer(), Schedule());
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return {};
  absl::Status status = Train(**created, 0, 1, micro_batches, grad_norms);
  EXPECT_TRUE(status.ok()) << status;
  return Assemble((*created)->ModelState());
}

double AdamWTotalUpdateBound() {
  const OptimizerConfig config = Optimizer();
  const double b1 = config.adamw.beta1, b2 = config.adamw.beta2;
  auto schedule = optim::LrSchedule::Create(Schedule());
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  double total = 0;
  for (int t = 1; t <= kSteps; ++t) {
    double sum = 0;
    for (int i = 1; i <= t; ++i) {
      const double a = (1 - b1) * std::pow(b1, t - i) / (1 - std::pow(b1, t));
      const double b = (1 - b2) * std::pow(b2, t - i) / (1 - std::pow(b2, t));
      sum += a * a / b;
    }
    total += (*schedule)->LrAt(t - 1) * std::sqrt(sum);
  }
  return total;
}

void ExpectWithinBf16Noise(const Params& actual, const Params& expected,
                           const Params& initial, double mean_ratio,
                           const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const double bound = 2 * AdamWTotalUpdateBound();
  std::vector<std::pair<double, std::string>> ratios;
  for (const auto& [name, want] : expected) {
    auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << what << ": " << name;
    auto init = initial.find(name);
    ASSERT_NE(init, initial.end()) << what << ": " << name;
    const at::Tensor diff = (it->second - want).abs();
    const double scale = std::max(1.0, want.abs().max().item<double>());
    EXPECT_LE(diff.max().item<double>(), bound + 1e-6 * scale)
        << what << ": " << name;
    // The key third of an attention qkv bias (q, k, v = split(qkv, C)) has
    // an exactly zero gradient: q . (k + b) adds q . b to every score of a
    // query, which softmax ignores. Its gradient is pure rounding noise, so
    // AdamW steps it by ~lr with a random sign in each run (held only to the
    // max bound); the mean check covers the q and v thirds.
    at::Tensor moved_elems = (want - init->second).abs().reshape({-1});
    at::Tensor diff_elems = diff.reshape({-1});
    if (absl::EndsWith(name, "attn.qkv.bias")) {
      const int64_t c = want.numel() / 3;
      moved_elems = at::cat(
          {moved_elems.narrow(0, 0, c), moved_elems.narrow(0, 2 * c, c)});
      diff_elems =
          at::cat({diff_elems.narrow(0, 0, c), diff_elems.narrow(0, 2 * c, c)});
    }
    const double moved = moved_elems.mean().item<double>();
    const double mean_diff = diff_elems.mean().item<double>();
    EXPECT_LE(mean_diff, mean_ratio * moved)
        << what << ": " << name << " moved " << moved;
    if (moved > 0) ratios.emplace_back(mean_diff / moved, name);
  }
  std::sort(ratios.rbegin(), ratios.rend());
  std::string top;
  for (size_t i = 0; i < ratios.size() && i < 3; ++i) {
    absl::StrAppend(&top, " ", ratios[i].second, " ", ratios[i].first);
  }
  LOG(INFO) << what << ": largest mean |difference| / mean |movement|:" << top;
}

void ExpectMixedMatchesSingle(
    const std::string& model_name, const StrategyOptions& options,
    const std::string& name, const std::vector<int>& worlds,
    const std::function<void(Strategy&)>& before_snapshot) {
  const Params initial = ParametersOf(*Build(Config(model_name), 7));
  for (int micro_batches : {1, 2}) {
    StrategyOptions single_options = options;
    single_options.kind = StrategyKind::kSingle;
    std::vector<double> expected_norms;
    const Params expected = TrainSingleWith(model_name, single_options,
                                            micro_batches, &expected_norms);
    for (int world : worlds) {
      const std::string what = absl::StrCat(
          name, " bf16 reduce ",
          c10::toString(options.mixed_precision.reduce_dtype), " ", model_name,
          " world ", world, " micro-batches ", micro_batches);
      std::mutex mu;
      std::vector<ShardedTensor> runs;
      std::vector<Params> compute(world);
      std::vector<double> norms;
      ASSERT_TRUE(
          comm::testing::RunOnRanks(
              world,
              [&](comm::Group& group) {
                auto created =
                    CreateStrategy(options, Build(Config(model_name), 7),
                                   &group, Optimizer(), Schedule());
                ASSERT_TRUE(created.ok()) << created.status();
                EXPECT_EQ((*created)->name(), name);
                std::vector<double> local_norms;
                absl::Status status = Train(**created, group.rank(), world,
                                            micro_batches, &local_norms);
                ASSERT_TRUE(status.ok()) << status;
                if (before_snapshot) before_snapshot(**created);
                for (const auto& item :
                     (*created)->model().named_parameters()) {
                  EXPECT_EQ(item.value().scalar_type(), at::kBFloat16)
                      << what << ": " << item.key();
                }
                std::lock_guard<std::mutex> lock(mu);
                compute[group.rank()] = ParametersOf((*created)->model());
                for (const ShardedTensor& t : (*created)->ModelState()) {
                  EXPECT_EQ(t.local.scalar_type(), at::kFloat)
                      << what << ": " << t.name;
                  runs.push_back({t.name, t.global_shape, t.offset,
                                  t.local.detach().clone()});
                }
                if (group.rank() == 0) norms = local_norms;
              })
              .ok())
          << what;
      ExpectNormsNear(norms, expected_norms, 1.0 / 64, what);
      const Params masters = Assemble(runs);
      ExpectWithinBf16Noise(masters, expected, initial, kBf16MeanRatio, what);
      for (int rank = 0; rank < world; ++rank) {
        ASSERT_EQ(compute[rank].size(), masters.size()) << what;
        for (const auto& [param, master] : masters) {
          EXPECT_TRUE(at::equal(compute[rank].at(param),
                                master.to(at::kBFloat16).to(at::kFloat)))
              << what << " rank " << rank << ": bf16 " << param
              << " is not its master cast";
        }
      }
    }
  }
}

const char* const kFrozenParameters[2] = {"wpe.weight", "blocks.1.ln_1.weight"};

void Freeze(models::UnitModel& model) {
  auto params = model.named_parameters();
  for (const char* name : kFrozenParameters) {
    at::Tensor* p = params.find(name);
    ASSERT_NE(p, nullptr) << name;
    p->set_requires_grad(false);
  }
}

void ExpectFrozenParametersUnchanged(const StrategyOptions& options) {
  const bool mixed = options.mixed_precision.param_dtype != at::kFloat;
  const Params initial = ParametersOf(*Build(Config("gpt-tiny"), 7));
  StrategyOptions single_options = options;
  single_options.kind = StrategyKind::kSingle;
  const Params expected =
      TrainSingleWith("gpt-tiny", single_options, 2, nullptr, Freeze);
  for (const char* name : kFrozenParameters) {
    ASSERT_TRUE(expected.count(name)) << name;
    EXPECT_TRUE(at::equal(expected.at(name), initial.at(name)))
        << "single: frozen " << name << " changed";
  }
  for (int world : {2, 3}) {
    const std::string what =
        absl::StrCat(StrategyKindName(options.kind), mixed ? " bf16" : " fp32",
                     " with frozen parameters, world ", world);
    std::mutex mu;
    std::vector<ShardedTensor> runs;
    std::vector<Params> compute(world);
    ASSERT_TRUE(comm::testing::RunOnRanks(
                    world,
                    [&](comm::Group& group) {
                      std::shared_ptr<models::UnitModel> model =
                          Build(Config("gpt-tiny"), 7);
                      Freeze(*model);
                      auto created = CreateStrategy(options, model, &group,
                                                    Optimizer(), Schedule());
                      ASSERT_TRUE(created.ok()) << created.status();
                      absl::Status status =
                          Train(**created, group.rank(), world, 2);
                      ASSERT_TRUE(status.ok()) << status;
                      std::lock_guard<std::mutex> lock(mu);
                      compute[group.rank()] = ParametersOf(*model);
                      for (const ShardedTensor& t : (*created)->ModelState()) {
                        runs.push_back({t.name, t.global_shape, t.offset,
                                        t.local.detach().clone()});
                      }
                    })
                    .ok())
        << what;
    const Params actual = Assemble(runs);
    for (const char* name : kFrozenParameters) {
      ASSERT_TRUE(actual.count(name)) << what << ": " << name;
      EXPECT_TRUE(at::equal(actual.at(name), initial.at(name)))
          << what << ": frozen " << name << " changed";
      for (int rank = 0; rank < world; ++rank) {
        const at::Tensor want =
            mixed ? initial.at(name).to(at::kBFloat16).to(at::kFloat)
                  : initial.at(name);
        EXPECT_TRUE(at::equal(compute[rank].at(name), want))
            << what << " rank " << rank << ": model's frozen " << name
            << " changed";
      }
    }
    if (mixed) {
      ExpectWithinBf16Noise(actual, expected, initial, kBf16MeanRatio, what);
    } else {
      ExpectClose(actual, expected, what);
    }
  }
}

}  // namespace strata::strategies::testing
