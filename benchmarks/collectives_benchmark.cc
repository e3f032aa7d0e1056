// Bus bandwidth of comm::Group's collectives between ranks that are real
// processes talking over loopback TCP, in the NCCL-tests convention.
//
//   bazel run -c opt //benchmarks:collectives
//   bazel run -c opt //benchmarks:collectives -- --benchmark_filter=Reduce
//   bazel run -c opt //benchmarks:collectives -- --benchmark_out=/tmp/c.json
//
// Started without a rank environment (no RANK/WORLD_SIZE, Slurm or Open MPI
// variables), the binary re-launches itself as --nproc ranks through
// strata::launch::Launch and returns their exit code; every argument, Google
// Benchmark's --benchmark_* flags included, goes to the ranks unchanged. Each
// rank forms the world group and runs the same benchmarks with the same
// iteration counts; rank 0 reports them (console, --benchmark_format,
// --benchmark_out), the other ranks report nothing.
//
// Sizes are those of the full buffer: the all-reduce and broadcast tensor,
// the all-gather output, the reduce-scatter input. algbw = size / time;
// busbw = algbw * factor, with factor 2(n-1)/n for all-reduce, (n-1)/n for
// all-gather and reduce-scatter, 1 for broadcast. MB is 10^6 bytes.
//
// Collectives must run the same number of times on every rank, so iteration
// counts are fixed per message size (see Iterations()) instead of calibrated
// by Google Benchmark, whose --benchmark_min_time has no effect here.

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/environment.h"
#include "comm/group.h"
#include "comm/rendezvous.h"
#include "launch/self_launch.h"

DEFINE_int32(nproc, 2,
             "Ranks (processes) to launch when started without a rank "
             "environment. Ignored inside a rank.");
DEFINE_int64(ring_segment_bytes, int64_t{1} << 20,
             "GroupOptions::ring_segment_bytes: pipelining segment of the "
             "reduce-scatter ring, in bytes (>= 1024).");
DEFINE_double(seconds_per_benchmark, 0.4,
              "Approximate time each benchmark should take; iteration counts "
              "are derived from it and the message size with a fixed cost "
              "model, identically on every rank.");
DEFINE_int32(warmup_iterations, 3,
             "Untimed collectives before each benchmark's timed ones.");
DEFINE_int32(timeout_s, 300,
             "Group timeout: how long a collective may wait for a peer before "
             "failing.");

namespace strata::benchmarks {
namespace {

constexpr char kUsage[] =
    "Bus bandwidth of comm::Group's collectives (fp32, 4 KiB to 64 MiB) "
    "between ranks launched as processes.\n"
    "Usage: collectives [flags]\n"
    "Accepts Google Benchmark's flags too (--benchmark_filter, "
    "--benchmark_format,\n--benchmark_out (an absolute path under bazel run), "
    "--benchmark_out_format,\n--benchmark_repetitions, ...), passed to every "
    "rank; --benchmark_min_time is\nignored (iteration counts are fixed).";

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

enum class Op {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  // Reduce-scatter the naive way: all-reduce the whole buffer, keep this
  // rank's block.
  kReduceScatterViaAllReduce,
};

absl::string_view OpName(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "AllReduce";
    case Op::kAllGather:
      return "AllGather";
    case Op::kReduceScatter:
      return "ReduceScatter";
    case Op::kBroadcast:
      return "Broadcast";
    case Op::kReduceScatterViaAllReduce:
      return "ReduceScatterViaAllReduce";
  }
  return "?";
}

// NCCL-tests' bus bandwidth factors: busbw = algbw * factor is the bandwidth
// each rank's link sustains, comparable across operations.
double BusFactor(Op op, int n) {
  switch (op) {
    case Op::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Op::kAllGather:
    case Op::kReduceScatter:
    case Op::kReduceScatterViaAllReduce:
      return static_cast<double>(n - 1) / n;
    case Op::kBroadcast:
      return 1.0;
  }
  return 0.0;
}

std::string SizeLabel(int64_t bytes) {
  if (bytes >= kMiB && bytes % kMiB == 0)
    return absl::StrCat(bytes / kMiB, "MiB");
  if (bytes >= kKiB && bytes % kKiB == 0)
    return absl::StrCat(bytes / kKiB, "KiB");
  return absl::StrCat(bytes, "B");
}

// Timed iterations for a message of `bytes`: a fixed cost model of one
// collective over loopback (a per-call latency plus a conservative
// bandwidth), so every rank computes the same count. Between 10 and 100000.
int64_t Iterations(int64_t bytes) {
  constexpr double kLatencySeconds = 200e-6;
  constexpr double kBytesPerSecond = 1.2e9;
  const double estimate = kLatencySeconds + bytes / kBytesPerSecond;
  const double n = std::round(FLAGS_seconds_per_benchmark / estimate);
  return static_cast<int64_t>(std::clamp(n, 10.0, 100000.0));
}

// A failed collective leaves the group unusable and the peers' state
// unknown: log and end the process now (its closed sockets make the other
// ranks fail fast; the launcher stops them and reports this rank).
void CheckOk(const absl::Status& status, int rank) {
  if (status.ok()) return;
  LOG(ERROR) << "rank " << rank << ": " << status;
  std::cout.flush();
  google::FlushLogFiles(google::GLOG_INFO);
  _exit(1);
}

// The buffers of one benchmark. `full`: the all-reduce/broadcast tensor, the
// all-gather output, the reduce-scatter input; `shard`: 1/n of it.
struct Buffers {
  at::Tensor full;
  at::Tensor shard;
};

absl::Status RunOnce(Op op, comm::Group& group, Buffers& buffers) {
  switch (op) {
    case Op::kAllReduce:
      return group.AllReduce(buffers.full);
    case Op::kAllGather:
      return group.AllGather(buffers.shard, buffers.full);
    case Op::kReduceScatter:
      return group.ReduceScatter(buffers.full, buffers.shard);
    case Op::kBroadcast:
      return group.Broadcast(buffers.full, /*root=*/0);
    case Op::kReduceScatterViaAllReduce: {
      absl::Status status = group.AllReduce(buffers.full);
      if (!status.ok()) return status;
      const int64_t block = buffers.shard.numel();
      buffers.shard.copy_(buffers.full.narrow(0, group.rank() * block, block));
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown op");
}

// One collective on known values, checked: the benchmark measures working
// collectives. Every rank contributes rank + 1.
void RunAndVerify(Op op, comm::Group& group, Buffers& buffers) {
  const int n = group.size();
  const float mine = static_cast<float>(group.rank() + 1);
  const float sum = n * (n + 1) / 2.0f;
  buffers.full.fill_(mine);
  buffers.shard.fill_(mine);
  CheckOk(RunOnce(op, group, buffers), group.rank());
  bool ok = false;
  switch (op) {
    case Op::kAllReduce:
      ok = buffers.full.eq(sum).all().item<bool>();
      break;
    case Op::kAllGather:
      ok = buffers.full.view({n, -1})
               .eq(at::arange(1, n + 1, buffers.full.options()).unsqueeze(1))
               .all()
               .item<bool>();
      break;
    case Op::kReduceScatter:
    case Op::kReduceScatterViaAllReduce:
      ok = buffers.shard.eq(sum).all().item<bool>();
      break;
    case Op::kBroadcast:
      ok = buffers.full.eq(1.0f).all().item<bool>();
      break;
  }
  if (!ok) {
    CheckOk(absl::InternalError(absl::StrCat(
                OpName(op), " of ", buffers.full.numel(),
                " floats gave a wrong result in the verification run")),
            group.rank());
  }
}

void BM_Collective(benchmark::State& state, comm::Group* group, Op op,
                   int64_t bytes) {
  const int n = group->size();
  // Elements of the full buffer: a multiple of n, so blocks are even.
  const int64_t elements =
      std::max<int64_t>(n, bytes / static_cast<int64_t>(sizeof(float)) / n * n);
  const int64_t actual_bytes = elements * static_cast<int64_t>(sizeof(float));
  Buffers buffers{at::empty({elements}, at::kFloat),
                  at::empty({elements / n}, at::kFloat)};

  RunAndVerify(op, *group, buffers);
  // Zeros: repeated sums stay finite.
  buffers.full.zero_();
  buffers.shard.zero_();
  for (int i = 0; i < FLAGS_warmup_iterations; ++i) {
    CheckOk(RunOnce(op, *group, buffers), group->rank());
  }
  CheckOk(group->Barrier(), group->rank());

  double total_seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    CheckOk(RunOnce(op, *group, buffers), group->rank());
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    state.SetIterationTime(elapsed.count());
    total_seconds += elapsed.count();
  }
  const double iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(state.iterations() * actual_bytes);
  const double algbw = actual_bytes * iterations / total_seconds / 1e6;
  state.counters["algbw_MBps"] = benchmark::Counter(algbw);
  state.counters["busbw_MBps"] = benchmark::Counter(algbw * BusFactor(op, n));
}

void RegisterBenchmarks(comm::Group* group) {
  const std::vector<int64_t> sizes = {4 * kKiB,   16 * kKiB, 64 * kKiB,
                                      256 * kKiB, 1 * kMiB,  4 * kMiB,
                                      16 * kMiB,  64 * kMiB};
  auto add = [group](Op op, int64_t bytes) {
    const std::string name = absl::StrCat(OpName(op), "/", SizeLabel(bytes));
    benchmark::RegisterBenchmark(name.c_str(), BM_Collective, group, op, bytes)
        ->Iterations(Iterations(bytes))
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  };
  for (Op op :
       {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter, Op::kBroadcast}) {
    for (int64_t bytes : sizes) add(op, bytes);
  }
  for (int64_t bytes : {1 * kMiB, 16 * kMiB, 64 * kMiB}) {
    add(Op::kReduceScatterViaAllReduce, bytes);
  }
}

// The ranks other than 0 run every benchmark but print nothing.
class NullReporter : public benchmark::BenchmarkReporter {
 public:
  // Also drops --benchmark_list_tests' output and Google Benchmark's
  // messages (e.g. a filter matching nothing), which rank 0 prints.
  NullReporter() {
    SetOutputStream(&null_stream_);
    SetErrorStream(&null_stream_);
  }
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}

 private:
  std::ostream null_stream_{nullptr};  // No buffer: output is dropped.
};

int RunRank(const comm::RendezvousInfo& info) {
  comm::GroupOptions options;
  options.ring_segment_bytes = FLAGS_ring_segment_bytes;
  options.timeout = absl::Seconds(FLAGS_timeout_s);
  absl::StatusOr<std::unique_ptr<comm::Group>> group =
      comm::ConnectWorld(info, options);
  if (!group.ok()) {
    LOG(ERROR) << "rank " << info.rank << ": " << group.status();
    return 1;
  }
  RegisterBenchmarks(group->get());
  if (info.rank == 0) {
    benchmark::AddCustomContext("ranks", absl::StrCat(info.world_size));
    benchmark::AddCustomContext("ring_segment_bytes",
                                absl::StrCat(FLAGS_ring_segment_bytes));
    benchmark::RunSpecifiedBenchmarks();
  } else {
    NullReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
  }
  benchmark::Shutdown();
  // Leave together, so no rank sees its peer's sockets close mid-collective.
  CheckOk((*group)->Barrier(), info.rank);
  return 0;
}

bool IsHelpFlag(absl::string_view arg) {
  for (absl::string_view help : {"help", "helpfull", "helpshort", "helpon",
                                 "helpmatch", "helppackage", "helpxml"}) {
    if (arg == absl::StrCat("--", help) || arg == absl::StrCat("-", help) ||
        absl::StartsWith(arg, absl::StrCat("--", help, "=")) ||
        absl::StartsWith(arg, absl::StrCat("-", help, "="))) {
      return true;
    }
  }
  return false;
}

int Main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  const std::vector<std::string> original_args(argv + 1, argv + argc);

  absl::StatusOr<comm::RendezvousInfo> info =
      comm::RendezvousInfoFromEnv(comm::ProcessEnv());
  if (!info.ok()) {
    LOG(ERROR) << info.status().message();
    return 1;
  }
  const bool is_rank = info->source != "single-process";

  // Google Benchmark's flags first (it removes them), then ours. Help flags
  // go to gflags, whose usage message names the benchmark flags. Ranks other
  // than 0 drop --benchmark_out: Google Benchmark would open (truncate) the
  // file on every rank, not only the one writing it.
  std::vector<char*> benchmark_args = {argv[0]};
  std::vector<char*> help_args;
  bool random_interleaving = false;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (IsHelpFlag(arg)) {
      help_args.push_back(argv[i]);
    } else if (is_rank && info->rank != 0 &&
               absl::StartsWith(arg, "--benchmark_out=")) {
      continue;
    } else {
      benchmark_args.push_back(argv[i]);
    }
    if (absl::StartsWith(arg, "--benchmark_enable_random_interleaving") &&
        !absl::EndsWith(arg, "=false") && !absl::EndsWith(arg, "=0")) {
      random_interleaving = true;
    }
  }
  int num_args = static_cast<int>(benchmark_args.size());
  benchmark_args.push_back(nullptr);
  benchmark::Initialize(&num_args, benchmark_args.data());
  std::vector<char*> flag_args(benchmark_args.begin(),
                               benchmark_args.begin() + num_args);
  flag_args.insert(flag_args.end(), help_args.begin(), help_args.end());
  num_args = static_cast<int>(flag_args.size());
  flag_args.push_back(nullptr);
  char** remaining = flag_args.data();
  gflags::SetUsageMessage(kUsage);
  gflags::ParseCommandLineFlags(&num_args, &remaining, /*remove_flags=*/true);
  if (num_args > 1) {
    LOG(ERROR) << "unexpected argument '" << remaining[1] << "'; see --help";
    return 1;
  }

  if (random_interleaving) {
    LOG(ERROR) << "--benchmark_enable_random_interleaving is not supported: "
                  "every rank must run the collectives in the same order";
    return 1;
  }
  if (FLAGS_nproc < 1) {
    LOG(ERROR) << "--nproc must be >= 1, got " << FLAGS_nproc;
    return 1;
  }
  if (FLAGS_ring_segment_bytes < 1024) {
    LOG(ERROR) << "--ring_segment_bytes must be >= 1024, got "
               << FLAGS_ring_segment_bytes;
    return 1;
  }
  if (!(FLAGS_seconds_per_benchmark > 0)) {
    LOG(ERROR) << "--seconds_per_benchmark must be > 0, got "
               << FLAGS_seconds_per_benchmark;
    return 1;
  }
  if (FLAGS_warmup_iterations < 0) {
    LOG(ERROR) << "--warmup_iterations must be >= 0, got "
               << FLAGS_warmup_iterations;
    return 1;
  }
  if (FLAGS_timeout_s < 1) {
    LOG(ERROR) << "--timeout_s must be >= 1, got " << FLAGS_timeout_s;
    return 1;
  }

  // Only rank 0 prints results: unprefixed, so --benchmark_format=json on
  // stdout stays parseable. Errors name their rank.
  launch::SelfLaunchSpec spec;
  spec.nproc = FLAGS_nproc;
  spec.args = original_args;
  spec.prefix_output = false;
  return launch::RunSelfLaunchedOrRank(*info, spec, RunRank);
}

}  // namespace
}  // namespace strata::benchmarks

int main(int argc, char** argv) { return strata::benchmarks::Main(argc, argv); }
