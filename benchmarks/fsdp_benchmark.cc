// FSDP at 2 ranks against Strata's DDP and ZeRO-2, in one run:
//
//   bazel run -c opt //benchmarks:fsdp                  # throughput + memory
//   bazel run -c opt //benchmarks:fsdp -- --mode=memory
//
// Throughput (--mode=throughput): tokens/s of DDP and FSDP FULL_SHARD (blocks
// wrapped, forward prefetch, backward prefetch "pre") training --model
// (default gpt-small50m) on --batch sequences of --seq_len tokens per rank,
// alternating DDP / FSDP --repetitions times in the same ranks (medians);
// forward + cross-entropy + backward + global-norm clipping + AdamW. FSDP's
// exposed communication is the time its training thread waited for
// all-gathers and reductions (FsdpStrategy::Counters), as a share of the step.
// --throughput_cases picks the cases (e.g. ddp,fsdp+reuse,fsdp+noreuse: FSDP
// with and without reusing unit buffers within a step).
//
// Memory (--mode=memory): peak per-rank bytes of tensor storage during two
// training steps of --memory_model (default gpt-100m, 91.5M parameters) for
// the --memory_cases (DDP, ZeRO-1, ZeRO-2 and FSDP FULL_SHARD: with the
// train binary's defaults, every unit wrapped, and with blocks wrapped and
// throughput or lean settings), counted by base/tracking_allocator.h
// (every CPU tensor allocation of the rank's process: parameters, gradients,
// optimizer state, communication buffers, activations), and the peak while
// the strategy is created (FSDP with deferred initialisation); beside them
// the peak resident set (VmHWM, reset before each case; with
// --malloc_mmap_threshold_bytes as the train binary's default, so freed
// buffers return to the kernel and it follows what is held; later cases
// run in a heap earlier ones used).
//
// With no rank environment the binary re-launches itself as --nproc ranks
// (1 thread each) through strata::launch; rank 0 prints the tables.
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

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/process_memory.h"
#include "base/tracking_allocator.h"
#include "comm/environment.h"
#include "comm/group.h"
#include "comm/rendezvous.h"
#include "launch/self_launch.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/fsdp.h"
#include "strategies/strategy.h"

DEFINE_int32(nproc, 2, "Ranks.");
DEFINE_string(mode, "all", "throughput, memory or all.");
DEFINE_string(model, "gpt-small50m", "Model of the throughput comparison.");
DEFINE_string(memory_model, "gpt-100m", "Model of the memory comparison.");
DEFINE_int64(batch, 2, "Sequences per rank per micro-batch.");
DEFINE_int32(micro_batches, 1,
             "Micro-batches per step (gradient accumulation).");
DEFINE_int64(seq_len, 256, "Tokens per sequence.");
DEFINE_int32(warmup_steps, 1, "Untimed steps before each timed run.");
DEFINE_int32(steps, 4, "Timed steps per run.");
DEFINE_int32(repetitions, 3, "Alternating DDP / FSDP runs (medians).");
DEFINE_string(throughput_cases, "ddp,fsdp",
              "--mode=throughput: comma-separated ddp, zero2, fsdp (blocks "
              "wrapped, prefetch), fsdp_lean or fsdp_default, run in turn "
              "each repetition; ratios are to the first. A +reuse (+noreuse) "
              "suffix on an FSDP case turns FsdpOptions::reuse_buffers on "
              "(off); +bwd_pre, +bwd_post, +bwd_none, +gathers1, "
              "+reductions0 and +reductions1 set backward prefetch pre / "
              "post / none, limit_all_gathers 1 and reductions_in_flight 0 "
              "/ 1.");
DEFINE_string(memory_cases,
              "ddp,zero1,zero2,fsdp_default,fsdp,fsdp_lean,ddp+ckpt,"
              "zero2+ckpt,fsdp_lean+ckpt",
              "--mode=memory: comma-separated ddp, zero1, zero2, "
              "fsdp_default (FsdpOptions' defaults, as the train binary's "
              "flags), fsdp (blocks wrapped, prefetch) or fsdp_lean; "
              "+reuse (+noreuse) turns FSDP's buffer reuse within a step on "
              "(off); the throughput cases' option overrides apply; +ckpt "
              "(last) checkpoints the blocks.");
// Both modes: an FSDP case's +no_sync suffix turns
// FsdpOptions::reduce_scatter_every_micro_step off (with --micro_batches > 1:
// full gradients kept between micro-batches, reduced once a step).
DEFINE_int64(malloc_mmap_threshold_bytes, int64_t{4} << 20,
             "As train's flag: allocations of at least this size are mmapped "
             "(returned to the kernel when freed); -1: glibc's default.");

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

void CheckOk(const absl::Status& status) { CHECK(status.ok()) << status; }

models::ModelConfig ConfigOf(const std::string& name) {
  auto config = models::ConfigByName(name);
  CHECK(config.ok()) << config.status();
  return *config;
}

// kind: "ddp", "zero2", "fsdp" (throughput settings: forward prefetch,
// backward prefetch "pre", 2 all-gathers and 1 reduction in flight) or
// "fsdp_lean" (no prefetch, 1 all-gather and no reduction in flight: the
// least memory); a "+reuse" ("+noreuse") suffix turns FsdpOptions::
// reuse_buffers on (off; without either, its default).
std::unique_ptr<strategies::Strategy> Make(std::string kind,
                                           const models::ModelConfig& config,
                                           comm::Group* group,
                                           bool deferred = false,
                                           bool checkpoint_blocks = false) {
  absl::string_view base = kind;
  // Option overrides, after the base kind's settings.
  constexpr const char* kOverrides[] = {
      "+bwd_pre",     "+bwd_post",    "+bwd_none", "+gathers1",
      "+reductions0", "+reductions1", "+no_sync"};
  std::vector<std::string> overrides;
  std::string stripped(base);
  for (const char* o : kOverrides) {
    if (!absl::StrContains(stripped, o)) continue;
    overrides.emplace_back(o);
    stripped = absl::StrReplaceAll(stripped, {{o, ""}});
  }
  base = stripped;
  const bool no_reuse = absl::ConsumeSuffix(&base, "+noreuse");
  const bool reuse = !no_reuse && absl::ConsumeSuffix(&base, "+reuse");
  kind = std::string(base);
  models::BuildOptions build;
  build.seed = 1;
  build.deferred = deferred;
  auto model = models::BuildModel(config, build);
  CHECK(model.ok()) << model.status();
  strategies::StrategyOptions options;
  absl::StatusOr<strategies::StrategyKind> parsed =
      strategies::ParseStrategyKind(kind.rfind("fsdp", 0) == 0 ? "fsdp" : kind);
  CHECK(parsed.ok()) << parsed.status();
  options.kind = *parsed;
  if (checkpoint_blocks) options.checkpoint_units = {"GPTBlock"};
  if (reuse || no_reuse) options.fsdp.reuse_buffers = reuse;
  if (kind == "fsdp_default") {
    options.fsdp.init_seed = 1;  // Every other FSDP option at its default.
  } else if (options.kind == strategies::StrategyKind::kFsdp) {
    const bool lean = kind == "fsdp_lean";
    options.fsdp.sharding = strategies::ShardingStrategy::kFullShard;
    options.fsdp.wrap_policy.unit_types = {"GPTBlock"};
    options.fsdp.forward_prefetch = !lean;
    options.fsdp.backward_prefetch =
        lean ? strategies::BackwardPrefetch::kNone
             : strategies::BackwardPrefetch::kBackwardPre;
    options.fsdp.limit_all_gathers = lean ? 1 : 2;
    options.fsdp.reductions_in_flight = lean ? 0 : 1;
    options.fsdp.init_seed = 1;
  }
  for (const std::string& o : overrides) {
    CHECK(options.kind == strategies::StrategyKind::kFsdp)
        << o << " applies to FSDP cases only";
    if (o == "+bwd_pre") {
      options.fsdp.backward_prefetch =
          strategies::BackwardPrefetch::kBackwardPre;
    } else if (o == "+bwd_post") {
      options.fsdp.backward_prefetch =
          strategies::BackwardPrefetch::kBackwardPost;
    } else if (o == "+bwd_none") {
      options.fsdp.backward_prefetch = strategies::BackwardPrefetch::kNone;
    } else if (o == "+gathers1") {
      options.fsdp.limit_all_gathers = 1;
    } else if (o == "+reductions0") {
      options.fsdp.reductions_in_flight = 0;
    } else if (o == "+reductions1") {
      options.fsdp.reductions_in_flight = 1;
    } else if (o == "+no_sync") {
      options.fsdp.reduce_scatter_every_micro_step = false;
    }
  }
  strategies::OptimizerConfig optimizer;
  optim::LrScheduleOptions schedule;
  schedule.kind = optim::LrScheduleKind::kConstant;
  schedule.base_lr = 1e-4;
  schedule.total_steps = 1000;
  auto strategy =
      strategies::CreateStrategy(options, *model, group, optimizer, schedule);
  CHECK(strategy.ok()) << strategy.status();
  return *std::move(strategy);
}

// `steps` optimizer steps of --micro_batches micro-batches each.
void TrainSteps(strategies::Strategy& strategy, int steps,
                const models::ModelConfig& config) {
  const int k = FLAGS_micro_batches;
  for (int s = 0; s < steps; ++s) {
    strategy.ZeroGrad();
    for (int m = 0; m < k; ++m) {
      at::Tensor tokens = at::randint(
          config.vocab_size, {FLAGS_batch, FLAGS_seq_len + 1}, at::kLong);
      CheckOk(strategy
                  .ForwardBackward(tokens.narrow(1, 0, FLAGS_seq_len),
                                   tokens.narrow(1, 1, FLAGS_seq_len), 1.0 / k,
                                   /*last_micro_batch=*/m == k - 1)
                  .status());
    }
    CheckOk(strategy.Step(s).status());
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The mean over ranks.
double WorldMean(comm::Group& group, double local) {
  at::Tensor t = at::full({1}, local, at::kDouble);
  CheckOk(group.AllReduce(t));
  return t.item<double>() / group.size();
}

double WorldMax(comm::Group& group, double local) {
  at::Tensor t = at::full({1}, local, at::kDouble);
  CheckOk(group.AllReduce(t, comm::ReduceOp::kMax));
  return t.item<double>();
}

void Throughput(comm::Group& group) {
  const models::ModelConfig config = ConfigOf(FLAGS_model);
  const std::vector<std::string> kinds =
      absl::StrSplit(FLAGS_throughput_cases, ',', absl::SkipEmpty());
  CHECK(!kinds.empty()) << "--throughput_cases is empty";
  // Per case: tokens/s and FSDP's exposed communication share per run.
  std::vector<std::vector<double>> tps_of(kinds.size()),
      exposed_of(kinds.size());
  for (int rep = 0; rep < FLAGS_repetitions; ++rep) {
    for (size_t k = 0; k < kinds.size(); ++k) {
      const std::string& kind = kinds[k];
      std::unique_ptr<strategies::Strategy> strategy =
          Make(kind, config, &group);
      TrainSteps(*strategy, FLAGS_warmup_steps, config);
      auto* fsdp = dynamic_cast<strategies::FsdpStrategy*>(strategy.get());
      if (fsdp != nullptr) fsdp->ResetCounters();
      CheckOk(group.Barrier());
      const auto start = Clock::now();
      TrainSteps(*strategy, FLAGS_steps, config);
      CheckOk(group.Barrier());
      const double seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      const double tps = FLAGS_batch * FLAGS_seq_len * FLAGS_micro_batches *
                         group.size() * FLAGS_steps / seconds;
      tps_of[k].push_back(tps);
      if (fsdp != nullptr) {
        exposed_of[k].push_back(WorldMean(
            group, fsdp->counters().exposed_communication_ms / 1000 / seconds));
      }
      if (group.rank() == 0) {
        LOG(INFO) << absl::StrFormat("rep %d %s: %.0f tokens/s", rep, kind,
                                     tps);
      }
    }
  }
  if (group.rank() != 0) return;
  std::printf(
      "\nThroughput, %s, %d ranks x %d micro-batches x %lld sequences x "
      "%lld tokens, medians of %d alternating runs of %d steps (malloc mmap "
      "threshold %lld):\n\n"
      "| case | tokens/s (runs) | ratio to %s | exposed communication |\n"
      "| --- | --- | --- | --- |\n",
      FLAGS_model.c_str(), group.size(), FLAGS_micro_batches,
      static_cast<long long>(FLAGS_batch),
      static_cast<long long>(FLAGS_seq_len), FLAGS_repetitions, FLAGS_steps,
      static_cast<long long>(FLAGS_malloc_mmap_threshold_bytes),
      kinds[0].c_str());
  const double first = Median(tps_of[0]);
  for (size_t k = 0; k < kinds.size(); ++k) {
    std::string runs;
    for (double tps : tps_of[k]) {
      absl::StrAppend(&runs, runs.empty() ? "" : ", ",
                      absl::StrFormat("%.0f", tps));
    }
    const std::string exposed =
        exposed_of[k].empty() ? ""
                              : absl::StrFormat("%.1f%% of the step",
                                                100 * Median(exposed_of[k]));
    std::printf("| %s | %.0f (%s) | %.2f | %s |\n", kinds[k].c_str(),
                Median(tps_of[k]), runs.c_str(), Median(tps_of[k]) / first,
                exposed.c_str());
  }
  std::fflush(stdout);
}

void Memory(comm::Group& group) {
  const models::ModelConfig config = ConfigOf(FLAGS_memory_model);
  struct Row {
    std::string name;
    bool checkpoint = false;
    double create_peak_mb = 0;
    double train_peak_mb = 0;
    double steady_mb = 0;
    double resident_peak_mib = 0;  // VmHWM during creation and training.
  };
  std::vector<Row> rows;
  const std::string tag = absl::StrCat("rank", group.rank());
  MemoryTagScope scope(tag);
  std::vector<std::pair<std::string, bool>> cases;
  for (absl::string_view item : absl::StrSplit(FLAGS_memory_cases, ',')) {
    const bool checkpoint = absl::ConsumeSuffix(&item, "+ckpt");
    cases.emplace_back(std::string(item), checkpoint);
  }
  for (const auto& [kind, checkpoint] : cases) {
    const int64_t base = TrackingAllocator::Stats(tag).live_bytes;
    TrackingAllocator::ResetPeak(tag);
    CheckOk(ResetPeakResident());
    std::unique_ptr<strategies::Strategy> strategy =
        Make(kind, config, &group, /*deferred=*/kind.rfind("fsdp", 0) == 0,
             checkpoint);
    Row row;
    row.name = kind;
    row.checkpoint = checkpoint;
    row.create_peak_mb = WorldMax(
        group, (TrackingAllocator::Stats(tag).peak_bytes - base) / 1e6);
    TrackingAllocator::ResetPeak(tag);
    TrainSteps(*strategy, 2, config);
    row.train_peak_mb = WorldMax(
        group, (TrackingAllocator::Stats(tag).peak_bytes - base) / 1e6);
    row.steady_mb = WorldMax(
        group, (TrackingAllocator::Stats(tag).live_bytes - base) / 1e6);
    const absl::StatusOr<int64_t> resident = PeakResidentBytes();
    CheckOk(resident.status());
    row.resident_peak_mib = WorldMax(group, *resident / 1048576.0);
    rows.push_back(row);
    strategy.reset();
    CheckOk(group.Barrier());
  }
  if (group.rank() != 0) return;
  const double psi = models::NumParameters(config);
  std::printf(
      "\nPeak per-rank memory (tensor storage, tracking allocator), %s "
      "(%.1fM parameters, 16 Psi = %.0f MB), %d ranks x %d micro-batches x "
      "%lld sequences x %lld tokens, fp32 AdamW:\n\n"
      "| strategy | peak in training (MB) | ratio to DDP (same "
      "checkpointing) | between steps (MB) | peak at creation (MB) | "
      "VmHWM (MiB) |\n"
      "| --- | --- | --- | --- | --- | --- |\n",
      FLAGS_memory_model.c_str(), psi / 1e6, 16 * psi / 1e6, group.size(),
      FLAGS_micro_batches, static_cast<long long>(FLAGS_batch),
      static_cast<long long>(FLAGS_seq_len));
  double ddp_peak[2] = {0, 0};
  for (const Row& row : rows) {
    if (row.name == "ddp") ddp_peak[row.checkpoint] = row.train_peak_mb;
  }
  for (const Row& row : rows) {
    const std::string name =
        row.name == "fsdp_default" ? "FSDP FULL_SHARD, defaults (every unit "
                                     "wrapped, deferred init)"
        : row.name == "fsdp"       ? "FSDP FULL_SHARD, prefetch (deferred init)"
        : row.name == "fsdp_lean"
            ? "FSDP FULL_SHARD, no prefetch, 1 all-gather "
              "and no reduction in flight (deferred "
              "init)"
            : row.name;
    std::printf("| %s%s | %.0f | %.2f | %.0f | %.0f | %.0f |\n", name.c_str(),
                row.checkpoint ? ", checkpointed blocks" : "",
                row.train_peak_mb, row.train_peak_mb / ddp_peak[row.checkpoint],
                row.steady_mb, row.create_peak_mb, row.resident_peak_mib);
  }
  std::fflush(stdout);
}

int RunRank(const comm::RendezvousInfo& info) {
  CheckOk(TrackingAllocator::Install());
  if (FLAGS_malloc_mmap_threshold_bytes != -1) {
    CheckOk(SetMallocMmapThreshold(FLAGS_malloc_mmap_threshold_bytes));
  }
  at::set_num_threads(1);
  comm::GroupOptions options;
  options.timeout = absl::Minutes(10);
  auto group = comm::ConnectWorld(info, options);
  CHECK(group.ok()) << group.status();
  at::manual_seed(1000 + info.rank);
  if (FLAGS_mode == "throughput" || FLAGS_mode == "all") Throughput(**group);
  if (FLAGS_mode == "memory" || FLAGS_mode == "all") Memory(**group);
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
  if (FLAGS_mode != "throughput" && FLAGS_mode != "memory" &&
      FLAGS_mode != "all") {
    LOG(ERROR) << "--mode must be throughput, memory or all, got '"
               << FLAGS_mode << "'";
    return 1;
  }
  strata::launch::SelfLaunchSpec spec;
  spec.nproc = FLAGS_nproc;
  spec.args = args;
  spec.num_threads_per_rank = 1;
  spec.prefix_output = false;
  return strata::launch::RunSelfLaunchedOrRank(spec, strata::RunRank);
}
