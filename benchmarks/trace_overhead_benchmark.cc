// The timeline trace's cost (train --trace_steps): the same training steps
// with the recorder off and on, alternating in the same ranks.
//
//   bazel run -c opt //benchmarks:trace_overhead
//   bazel run -c opt //benchmarks:trace_overhead -- --model=gpt-small50m
//
// Each strategy of --strategies (default ddp and fsdp: FULL_SHARD, blocks
// wrapped, forward and backward prefetch) trains --model on --batch
// sequences of --seq_len tokens per rank. The unit tracing interceptor is
// added in both modes (a run without --trace_steps has none, so "off" here
// includes its one relaxed load per unit call); "on" records every span
// train --trace_steps records: unit forward/backward, collectives, clipping,
// optimizer step. Per repetition, one "off" run and one "on" run of --steps
// steps each, in alternating order; reported: the median step time of each
// mode, the median of the per-repetition on/off ratios, and the spans
// recorded per step. With no rank environment the binary re-launches itself
// as --nproc ranks (1 thread each); rank 0 prints the table.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/trace.h"
#include "comm/environment.h"
#include "comm/group.h"
#include "comm/rendezvous.h"
#include "launch/self_launch.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/strategy.h"
#include "strategies/trace_interceptor.h"

DEFINE_int32(nproc, 2, "Ranks.");
DEFINE_string(strategies, "ddp,fsdp", "Strategies to measure.");
DEFINE_string(model, "gpt-tiny", "Model config.");
DEFINE_int64(batch, 8, "Sequences per rank per step.");
DEFINE_int64(seq_len, 128, "Tokens per sequence.");
DEFINE_int32(warmup_steps, 2, "Untimed steps per strategy.");
DEFINE_int32(steps, 10, "Timed steps per run.");
DEFINE_int32(repetitions, 5, "Off/on pairs (medians; the machine is noisy).");

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

void CheckOk(const absl::Status& status) { CHECK(status.ok()) << status; }

std::unique_ptr<strategies::Strategy> Make(const std::string& kind,
                                           const models::ModelConfig& config,
                                           comm::Group* group) {
  models::BuildOptions build;
  build.seed = 1;
  auto model = models::BuildModel(config, build);
  CHECK(model.ok()) << model.status();
  strategies::StrategyOptions options;
  auto parsed = strategies::ParseStrategyKind(kind);
  CHECK(parsed.ok()) << parsed.status();
  options.kind = *parsed;
  if (options.kind == strategies::StrategyKind::kFsdp) {
    options.fsdp.sharding = strategies::ShardingStrategy::kFullShard;
    options.fsdp.wrap_policy.unit_types = {"GPTBlock"};
    options.fsdp.forward_prefetch = true;
    options.fsdp.backward_prefetch = strategies::BackwardPrefetch::kBackwardPre;
    options.fsdp.init_seed = 1;
  }
  strategies::OptimizerConfig optimizer;
  // grad_clip 1.0 (the default): clipping is traced too.
  optim::LrScheduleOptions schedule;
  schedule.kind = optim::LrScheduleKind::kConstant;
  schedule.base_lr = 1e-4;
  schedule.total_steps = 100000;
  auto strategy =
      strategies::CreateStrategy(options, *model, group, optimizer, schedule);
  CHECK(strategy.ok()) << strategy.status();
  // As train --trace_steps does: after the strategy's own interceptors.
  (*model)->AddInterceptor(std::make_shared<strategies::TraceInterceptor>());
  return *std::move(strategy);
}

// Seconds per step of `steps` steps, the slowest rank's.
double TimeSteps(strategies::Strategy& strategy, int steps,
                 const models::ModelConfig& config, comm::Group& group,
                 int64_t* step_counter) {
  CheckOk(group.Barrier());
  const auto start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    at::Tensor tokens = at::randint(
        config.vocab_size, {FLAGS_batch, FLAGS_seq_len + 1}, at::kLong);
    strategy.ZeroGrad();
    CheckOk(strategy
                .ForwardBackward(tokens.narrow(1, 0, FLAGS_seq_len),
                                 tokens.narrow(1, 1, FLAGS_seq_len), 1.0, true)
                .status());
    CheckOk(strategy.Step((*step_counter)++).status());
  }
  const double local =
      std::chrono::duration<double>(Clock::now() - start).count() / steps;
  at::Tensor t = at::full({1}, local, at::kDouble);
  CheckOk(group.AllReduce(t, comm::ReduceOp::kMax));
  return t.item<double>();
}

// Nanoseconds per instrumentation point: a scoped span with tracing off,
// and with it on a span named and argued as the unit spans are (StrCat'ed
// name, two arguments), and a collective's span on a lane track.
struct SpanCost {
  double off_ns = 0, on_ns = 0, track_ns = 0;
};

SpanCost MeasureSpanCost() {
  constexpr int kOff = 10000000, kOn = 200000;
  SpanCost cost;
  trace::Stop();
  auto start = Clock::now();
  for (int i = 0; i < kOff; ++i) {
    trace::Span span("off", "benchmark");
  }
  cost.off_ns =
      std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
      kOff;
  trace::Start();
  start = Clock::now();
  for (int i = 0; i < kOn; ++i) {
    const int64_t begin = trace::NowMicros();
    trace::Record(
        absl::StrCat("forward blocks.", i % 12), "unit", begin,
        trace::NowMicros(),
        {trace::StringArg("unit", "blocks.0"), trace::IntArg("index", i % 12)});
  }
  cost.on_ns =
      std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
      kOn;
  start = Clock::now();
  for (int i = 0; i < kOn; ++i) {
    const int64_t begin = trace::NowMicros();
    trace::RecordOnTrack("world collectives", "all_gather", "comm", begin,
                         trace::NowMicros(),
                         {trace::IntArg("bytes", i), trace::IntArg("seq", i),
                          trace::StringArg("group", "world")});
  }
  cost.track_ns =
      std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
      kOn;
  trace::Stop();
  trace::Start();  // Drops the events.
  trace::Stop();
  return cost;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Measure(comm::Group& group) {
  auto config = models::ConfigByName(FLAGS_model);
  CHECK(config.ok()) << config.status();
  SpanCost cost;
  if (group.rank() == 0) {
    cost = MeasureSpanCost();
    std::printf(
        "\nper instrumentation point: off %.2f ns (a scoped span), on %.0f "
        "ns (a unit span), %.0f ns (a collective span on a lane track)\n",
        cost.off_ns, cost.on_ns, cost.track_ns);
    std::printf(
        "\n%s, %d ranks x %lld sequences x %lld tokens, %d steps per run, "
        "%d off/on pairs\n\n"
        "| strategy | step off (ms) | step on (ms) | on/off (median of "
        "pairs) | spans per step (rank 0) | spans x cost per span / step "
        "off |\n"
        "| --- | --- | --- | --- | --- | --- |\n",
        FLAGS_model.c_str(), group.size(), static_cast<long long>(FLAGS_batch),
        static_cast<long long>(FLAGS_seq_len), FLAGS_steps, FLAGS_repetitions);
  }
  for (absl::string_view kind : absl::StrSplit(FLAGS_strategies, ',')) {
    std::unique_ptr<strategies::Strategy> strategy =
        Make(std::string(kind), *config, &group);
    int64_t step = 0;
    TimeSteps(*strategy, FLAGS_warmup_steps, *config, group, &step);
    std::vector<double> off, on, ratios;
    size_t spans = 0;
    for (int rep = 0; rep < FLAGS_repetitions; ++rep) {
      double pair[2] = {0, 0};  // off, on
      // Alternate which mode goes first, so that drift cancels.
      for (int i = 0; i < 2; ++i) {
        const bool tracing = (i + rep) % 2 == 1;
        if (tracing) trace::Start();
        pair[tracing] =
            TimeSteps(*strategy, FLAGS_steps, *config, group, &step);
        if (tracing) {
          trace::Stop();
          spans = trace::Collect().events.size();
        }
      }
      off.push_back(pair[0]);
      on.push_back(pair[1]);
      ratios.push_back(pair[1] / pair[0]);
    }
    if (group.rank() == 0) {
      const double per_step = static_cast<double>(spans) / FLAGS_steps;
      std::printf("| %s | %.2f | %.2f | %.4f | %.0f | %.3f %% |\n",
                  std::string(kind).c_str(), Median(off) * 1e3,
                  Median(on) * 1e3, Median(ratios), per_step,
                  100 * per_step * std::max(cost.on_ns, cost.track_ns) * 1e-9 /
                      Median(off));
      std::fflush(stdout);
    }
  }
}

int RunRank(const comm::RendezvousInfo& info) {
  at::set_num_threads(1);
  comm::GroupOptions options;
  options.timeout = absl::Minutes(10);
  auto group = comm::ConnectWorld(info, options);
  CHECK(group.ok()) << group.status();
  at::manual_seed(1000 + info.rank);
  Measure(**group);
  CheckOk((*group)->Barrier());
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  strata::launch::SelfLaunchSpec spec;
  spec.nproc = FLAGS_nproc;
  spec.args = args;
  spec.num_threads_per_rank = 1;
  spec.prefix_output = false;
  return strata::launch::RunSelfLaunchedOrRank(spec, strata::RunRank);
}
