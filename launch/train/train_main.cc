// //launch/train:train — trains a model from flags or a --flagfile experiment
// (launch/train/configs/*.flags). With no flags it runs the default experiment:
// a small GPT on the synthetic Markov corpus, ending near its entropy floor.
//
//   bazel run //launch/train:train
//   bazel run //launch/train:train --
//   --flagfile=launch/train/configs/gpt_tiny_bf16.flags
//
// The flags are defined in launch/train/train_flags.cc.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/heartbeat.h"
#include "base/help_flags.h"
#include "base/process_memory.h"
#include "base/tracking_allocator.h"
#include "comm/environment.h"
#include "comm/group.h"
#include "comm/rendezvous.h"
#include "launch/plan/plan.h"
#include "launch/plan/plan_train.h"
#include "launch/self_launch.h"
#include "launch/train/evaluation.h"
#include "launch/train/train_flags.h"
#include "launch/train/trainer.h"
#include "strategies/options.h"

DEFINE_bool(
    plan_only, false,
    "Print the planner's per-rank memory breakdown (launch/plan/plan.h) "
    "for these flags on --nproc ranks (or the launcher's WORLD_SIZE) "
    "and exit, without joining a process group or building the "
    "model.");

DEFINE_int64(malloc_mmap_threshold_bytes, int64_t{4} << 20,
             "Every allocation of at least this many bytes gets its own mmap, "
             "returned to the kernel when freed (glibc's M_MMAP_THRESHOLD, "
             "at most 32 MiB), kept fixed instead of rising to each freed "
             "block's size as glibc's dynamic threshold does, so that freed "
             "units' and activations' buffers do not stay in a fragmented "
             "heap: FSDP's peak resident set follows what it holds. Lower "
             "values return more but page-fault every fresh buffer (128 KiB "
             "cost ~20% of tokens/s; BENCHMARKS.md). -1: glibc's dynamic "
             "threshold.");

DEFINE_bool(track_tensor_memory, true,
            "Install the tracking allocator (base/tracking_allocator.h) as "
            "LibTorch's CPU allocator, so that the end of the run compares "
            "the planner's predicted peak with the measured peak of tensor "
            "storage and metrics.jsonl records \"tensor_peak_bytes\" (it "
            "costs 20-150 ns per allocation, 0.015 % of a gpt-tiny step; "
            "BENCHMARKS.md \"Planner vs measured\").");

namespace strata::launch {
namespace {

// One rank (or the only process) of a training run: joins the world for a
// data-parallel strategy and trains.
int TrainRank(const TrainOptions& o, const std::vector<std::string>& notes,
              const comm::RendezvousInfo& world) {
  if (world.world_size > 1 &&
      o.strategy.kind == strata::strategies::StrategyKind::kSingle) {
    LOG(ERROR) << "--strategy=single trains in one process, but this is rank "
               << world.rank << " of " << world.world_size << " ("
               << world.source
               << " variables); use --strategy=ddp (or zero1, zero2) to train "
                  "on all ranks";
    return 1;
  }
  if (world.rank == 0) {
    LOG(INFO) << "flags:" << TrainFlagsSummary();
    for (const std::string& note : notes) LOG(INFO) << note;
    if (auto plan = PlanInputOf(o, world.world_size); plan.ok()) {
      LOG(INFO) << PlanLine(*plan, PlanMemory(*plan));
    }
  }

  // Under `launch --heartbeat_timeout_s`: beat until the rank exits.
  std::unique_ptr<Heartbeat> heartbeat;
  if (world.heartbeat_fd >= 0) {
    auto started = Heartbeat::Start(
        world.heartbeat_fd, absl::Milliseconds(world.heartbeat_interval_ms));
    if (!started.ok()) {
      LOG(ERROR) << started.status().message();
      return 1;
    }
    heartbeat = *std::move(started);
  }
  std::unique_ptr<comm::Group> group;
  if (o.strategy.kind != strata::strategies::StrategyKind::kSingle) {
    comm::GroupOptions group_options;
    group_options.timeout = absl::Seconds(FLAGS_collective_timeout_s);
    group_options.check_collectives = FLAGS_debug_collectives;
    auto connected = comm::ConnectWorld(world, group_options);
    if (!connected.ok()) {
      LOG(ERROR) << connected.status().message();
      return 1;
    }
    group = std::move(*connected);
  }
  if (world.rank != 0) FLAGS_minloglevel = google::WARNING;

  TrainOptions rank_options = o;
  rank_options.local_rank = world.local_rank;
  rank_options.restart_count = world.restart_count;
  auto result = Train(rank_options, group.get());
  if (!result.ok()) {
    LOG(ERROR) << result.status().message();
    return 1;
  }
  if (o.eval_only) {
    // The product of --eval_only, on stdout once (rank 0).
    if (world.rank == 0) std::cout << EvalLine(result->eval) << std::endl;
    return 0;
  }
  auto plan = PlanInputOf(o, world.world_size);
  if (world.rank == 0 && plan.ok()) {
    LOG(INFO) << PlanEndLine(PlanMemory(*plan), result->tensor_peak_bytes,
                             result->peak_resident_bytes);
  }
  LOG(INFO) << "done: " << result->steps << " steps, final train loss "
            << result->final_train_loss << ", eval loss "
            << result->final_eval_loss;
  return 0;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> original_args(argv + 1, argv + argc);
  gflags::SetUsageMessage(
      "Trains a model. Flags may come from "
      "--flagfile=launch/train/configs/*.flags.");
  ::strata::NarrowHelp("launch/train/", argc, argv);  // --helpfull: every flag.
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1]
               << "': train takes only flags (see --help)";
    return 1;
  }
  if (FLAGS_nproc < 1) {
    LOG(ERROR) << "--nproc must be >= 1, got " << FLAGS_nproc;
    return 1;
  }
  if (FLAGS_track_tensor_memory) {
    // Before any tensor the run allocates (the tracking allocator counts
    // only what it allocated).
    if (const absl::Status installed = TrackingAllocator::Install();
        !installed.ok()) {
      LOG(ERROR) << "--track_tensor_memory: " << installed.message();
      return 1;
    }
  }
  if (FLAGS_malloc_mmap_threshold_bytes != -1) {
    const absl::Status set =
        SetMallocMmapThreshold(FLAGS_malloc_mmap_threshold_bytes);
    // At its default, an allocator without mallopt (a sanitizer's) only
    // costs the threshold's speed-up: a warning. Given explicitly: an error.
    const bool given =
        !gflags::GetCommandLineFlagInfoOrDie("malloc_mmap_threshold_bytes")
             .is_default;
    if (!set.ok() && (given || !absl::IsFailedPrecondition(set))) {
      LOG(ERROR) << "--malloc_mmap_threshold_bytes: " << set.message();
      return 1;
    }
    LOG_IF(WARNING, !set.ok())
        << "--malloc_mmap_threshold_bytes (default): " << set.message()
        << "; freed buffers stay in the heap";
  }
  std::vector<std::string> notes;
  absl::StatusOr<TrainOptions> options =
      TrainOptionsFromFlags(comm::ProcessEnv(), &notes);
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 1;
  }
  if (FLAGS_plan_only) {
    int world_size = FLAGS_nproc;
    auto env_world = comm::RendezvousInfoFromEnv(comm::ProcessEnv());
    if (env_world.ok() && env_world->world_size > 1) {
      world_size = env_world->world_size;
    }
    absl::StatusOr<PlanInput> plan = PlanInputOf(*options, world_size);
    if (!plan.ok()) {
      LOG(ERROR) << plan.status().message();
      return 1;
    }
    // The product of --plan_only, on stdout.
    std::cout << FormatMemoryPlan(*plan, PlanMemory(*plan)) << std::flush;
    return 0;
  }
  // The world: one process, or the ranks of the launcher, torchrun, srun or
  // mpirun (read from their environment variables); with --nproc > 1 and no
  // rank environment, train re-launches itself as --nproc ranks.
  if (FLAGS_nproc > 1 &&
      options->strategy.kind == strata::strategies::StrategyKind::kSingle) {
    LOG(ERROR) << "--nproc=" << FLAGS_nproc
               << " needs a data-parallel --strategy (ddp, zero1, zero2 "
                  "or fsdp); --strategy=single trains in one process";
    return 1;
  }
  if (FLAGS_max_restarts != 0 && FLAGS_nproc == 1) {
    LOG(WARNING) << "--max_restarts=" << FLAGS_max_restarts
                 << " has no effect with --nproc=1: train restarts only the "
                    "ranks it starts itself (under torchrun or launch, pass "
                    "their --max_restarts)";
  }
  SelfLaunchSpec spec;
  spec.nproc = FLAGS_nproc;
  spec.args = original_args;
  spec.max_restarts = FLAGS_max_restarts;
  spec.heartbeat_timeout_s = FLAGS_heartbeat_timeout_s;
  spec.heartbeat_startup_timeout_s = FLAGS_heartbeat_startup_timeout_s;
  return RunSelfLaunchedOrRank(spec, [&](const comm::RendezvousInfo& world) {
    return TrainRank(*options, notes, world);
  });
}

}  // namespace
}  // namespace strata::launch

int main(int argc, char** argv) { return strata::launch::Main(argc, argv); }
