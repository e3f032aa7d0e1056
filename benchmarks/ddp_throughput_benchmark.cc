// Data-parallel training throughput at 2 ranks: Strata's DDP, ZeRO-1,
// ZeRO-2 and FSDP strategies (and DDP with bf16 parameters) against PyTorch's
// DistributedDataParallel and FullyShardedDataParallel (Gloo) on the same
// model, and against Strata's "single" strategy on the same global batch in
// one process with as many intra-op threads as there are ranks, measured
// alternating in one run (median of --repetitions), with tokens/s and each
// rank's peak resident set (VmHWM).
//
//   bazel run -c opt //benchmarks:ddp_throughput
//   bazel run -c opt //benchmarks:ddp_throughput -- --batch=2
//
// Strata FSDP against PyTorch FSDP needs PyTorch >= 2 (Debian 12's
// python3-torch 1.13 cannot import FSDP under Python 3.11; the run then says
// so and reports no PyTorch FSDP figures): in the LibTorch 2.6 root, after
// building the target there with CMake (BENCHMARKS.md, "FSDP against
// PyTorch FSDP"),
//
//   tools/libtorch2/run.sh bash -c 'cd /var/cache/strata/cmake-build &&
//     cd runfiles/strata &&
//     benchmarks/ddp_throughput --cases=fsdp,pytorch_fsdp'
//
// Cases (--cases, run in that order each repetition; random tokens; forward
// + cross-entropy + backward + global-norm clipping + AdamW, beta2 0.95,
// weight decay 0.1 on matrices):
//   single: Strata "single", one process, at::set_num_threads(--nproc),
//     global batch --nproc * --batch (OpenBLAS threads: its default).
//   ddp: Strata "ddp", --nproc ranks started by strata::launch::Launch (this
//     binary re-launched; OMP/OpenBLAS threads 1 per rank), --batch each.
//   pytorch_ddp: PyTorch DDP (benchmarks/python/ddp_gpt.py, the model of
//     train_gpt.py), --nproc ranks started by the same launcher,
//     torch.set_num_threads(1).
//   zero1, zero2: Strata "zero1" and "zero2", as ddp.
//   ddp_bf16: Strata "ddp" with --param_dtype bf16 and --reduce_dtype bf16
//     (bf16 parameters and gradients, fp32 masters and AdamW state), as ddp
//     (not comparable in numerics to the fp32 cases).
//   fsdp: Strata "fsdp", FULL_SHARD, a unit per GPTBlock (the rest in the
//     root unit), the other FsdpOptions at their defaults (as the train
//     binary's), as ddp.
//   pytorch_fsdp: PyTorch FSDP1 (ddp_gpt.py --strategy=fsdp), FULL_SHARD, a
//     unit per block by an auto-wrap policy, use_orig_params=True, its other
//     options at their defaults, as pytorch_ddp.
// Ratios are to the PyTorch peer of the same kind: Strata FSDP's to PyTorch
// FSDP, the others' to PyTorch DDP. Peak resident sets are per rank, over
// the rank's life up to the end of its timed steps (model creation
// included, before sharding on both sides).
//
// Exposed communication of Strata DDP: DdpStrategy has no accessor for the
// time Step() waits on bucket all-reduces, so each rank times Step() (wait
// for outstanding buckets + clipping + AdamW) and, after the DDP steps, the
// Step() of a "single" strategy on an identical model with the same thread
// count and dtypes (clipping + AdamW, no communication). Exposed share =
// (DDP Step() - single Step()) / DDP step time, averaged over ranks. For
// ZeRO, Step() also all-gathers the updated parameters (never hidden) and
// its clipping + AdamW cover 1/N of the elements, so the reference is the
// single Step() / N (an estimate: clipping and AdamW are element-wise).
// Strata FSDP's exposed communication is the time its training thread waited
// for all-gathers and reductions (FsdpStrategy::Counters).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/process_memory.h"
#include "comm/environment.h"
#include "comm/group.h"
#include "comm/rendezvous.h"
#include "launch/launcher.h"
#include "launch/self_launch.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/ddp.h"
#include "strategies/factory.h"
#include "strategies/fsdp.h"
#include "strategies/strategy.h"
#include "strategies/zero.h"

DEFINE_string(model, "gpt-small50m", "Model config.");
DEFINE_int32(nproc, 2, "Ranks of the DDP cases.");
DEFINE_int64(batch, 4, "Sequences per rank per step.");
DEFINE_int64(seq_len, 256, "Tokens per sequence.");
DEFINE_int32(warmup_steps, 2, "Untimed steps before the timed ones.");
DEFINE_int32(steps, 3, "Timed steps per run.");
DEFINE_int32(repetitions, 3,
             "Runs of each case, alternating; medians are reported.");
DEFINE_string(python, "/usr/bin/python3",
              "Python with torch (1.13 on Debian 12: DDP only; 2.6 in "
              "tools/libtorch2's root).");
DEFINE_string(script, "benchmarks/python/ddp_gpt.py",
              "The PyTorch DDP/FSDP peer (path relative to the runfiles "
              "root).");
DEFINE_string(cases, "single,ddp,zero1,zero2,ddp_bf16,pytorch_ddp",
              "Comma-separated cases, run in this order each repetition: "
              "single, ddp, zero1, zero2, ddp_bf16, fsdp, pytorch_ddp, "
              "pytorch_fsdp.");
DEFINE_string(result_file, "",
              "Internal: where rank 0 of a Strata DDP run writes its result.");
DEFINE_string(rank_case, "ddp",
              "Internal: the case a re-launched rank runs: ddp, zero1, zero2, "
              "ddp_bf16 or fsdp.");

namespace strata::benchmarks {
namespace {

using Clock = std::chrono::steady_clock;

void CheckOk(const absl::Status& status) { CHECK(status.ok()) << status; }

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

models::ModelConfig Config() {
  absl::StatusOr<models::ModelConfig> config =
      models::ConfigByName(FLAGS_model);
  CHECK(config.ok()) << config.status();
  config->seq_len = std::max<int64_t>(config->seq_len, FLAGS_seq_len);
  return *config;
}

strategies::OptimizerConfig Optimizer() {
  strategies::OptimizerConfig config;
  config.weight_decay = 0.1;
  config.adamw.beta2 = 0.95;
  config.grad_clip = 1.0;
  return config;
}

optim::LrScheduleOptions Schedule() {
  optim::LrScheduleOptions schedule;
  schedule.kind = optim::LrScheduleKind::kConstant;
  schedule.base_lr = 3e-4;
  return schedule;
}

// A strategy of `kind` over a fresh model; with `bf16`, bf16 parameters and
// gradient reduction (fp32 masters).
std::unique_ptr<strategies::Strategy> Make(const std::string& kind,
                                           comm::Group* group,
                                           bool bf16 = false) {
  absl::StatusOr<std::shared_ptr<models::UnitModel>> model =
      models::BuildModel(Config(), {});
  CHECK(model.ok()) << model.status();
  strategies::StrategyOptions options;
  absl::StatusOr<strategies::StrategyKind> parsed =
      strategies::ParseStrategyKind(kind);
  CHECK(parsed.ok()) << parsed.status();
  options.kind = *parsed;
  if (options.kind == strategies::StrategyKind::kFsdp) {
    // As PyTorch's peer: FULL_SHARD, a unit per block.
    options.fsdp.sharding = strategies::ShardingStrategy::kFullShard;
    options.fsdp.wrap_policy.unit_types = {"GPTBlock"};
  }
  if (bf16) {
    options.mixed_precision.param_dtype = at::kBFloat16;
    options.mixed_precision.reduce_dtype = at::kBFloat16;
  }
  absl::StatusOr<std::unique_ptr<strategies::Strategy>> strategy =
      strategies::CreateStrategy(options, *model, group, Optimizer(),
                                 Schedule());
  CHECK(strategy.ok()) << strategy.status();
  return std::move(*strategy);
}

struct StepTimes {
  double total_s = 0;  // Timed steps, wall clock.
  double step_s = 0;   // Sum of Step() calls.
};

// Warm-up and timed steps of `strategy` on one fixed batch [batch, seq+1].
StepTimes Train(strategies::Strategy& strategy, int64_t batch,
                comm::Group* group) {
  const models::ModelConfig config = Config();
  at::Tensor tokens =
      at::randint(config.vocab_size, {batch, FLAGS_seq_len + 1}, at::kLong);
  at::Tensor x = tokens.narrow(1, 0, FLAGS_seq_len).contiguous();
  at::Tensor y = tokens.narrow(1, 1, FLAGS_seq_len).contiguous();
  StepTimes times;
  int64_t step = 0;
  auto run = [&](bool timed) {
    strategy.ZeroGrad();
    absl::StatusOr<double> loss = strategy.ForwardBackward(x, y, 1.0, true);
    CHECK(loss.ok()) << loss.status();
    const auto t0 = Clock::now();
    absl::StatusOr<strategies::StepResult> result = strategy.Step(step++);
    CHECK(result.ok()) << result.status();
    if (timed) times.step_s += Seconds(t0, Clock::now());
  };
  for (int i = 0; i < FLAGS_warmup_steps; ++i) run(false);
  // FSDP's exposed communication over the timed steps only.
  if (auto* fsdp = dynamic_cast<strategies::FsdpStrategy*>(&strategy)) {
    fsdp->ResetCounters();
  }
  if (group != nullptr) CheckOk(group->Barrier());
  const auto start = Clock::now();
  for (int i = 0; i < FLAGS_steps; ++i) run(true);
  if (group != nullptr) CheckOk(group->Barrier());
  times.total_s = Seconds(start, Clock::now());
  return times;
}

// Step() of a "single" strategy (clipping + AdamW, no communication) on the
// same model and thread count: the reference for exposed communication.
double ReferenceStepSeconds(bool bf16) {
  std::unique_ptr<strategies::Strategy> single = Make("single", nullptr, bf16);
  const models::ModelConfig config = Config();
  at::Tensor tokens =
      at::randint(config.vocab_size, {1, FLAGS_seq_len + 1}, at::kLong);
  // Every Step() follows a step's last micro-batch (the Strategy contract);
  // only Step() is timed. Step 0 warms up.
  double seconds = 0;
  for (int i = 0; i <= FLAGS_steps; ++i) {
    single->ZeroGrad();
    CheckOk(single
                ->ForwardBackward(tokens.narrow(1, 0, FLAGS_seq_len),
                                  tokens.narrow(1, 1, FLAGS_seq_len), 1.0, true)
                .status());
    const auto start = Clock::now();
    CheckOk(single->Step(i).status());
    if (i > 0) seconds += Seconds(start, Clock::now());
  }
  return seconds / FLAGS_steps;
}

// One rank of a Strata case (--rank_case): trains, reads its peak resident
// set, then (DDP, ZeRO) measures the reference Step(); rank 0 writes
// "tokens_per_s step_ms strategy_step_ms ref_step_ms exposed_share
// buckets_in_backward buckets" (averaged over ranks) and then every rank's
// VmHWM in MiB to --result_file.
int RunRank(const comm::RendezvousInfo& info) {
  comm::GroupOptions options;
  options.timeout = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<comm::Group>> group =
      comm::ConnectWorld(info, options);
  CHECK(group.ok()) << group.status();
  at::manual_seed(1000 + info.rank);
  double row[4] = {0, 0, 0, 0};
  int64_t in_backward = 0, buckets = 0;
  const bool bf16 = FLAGS_rank_case == "ddp_bf16";
  const bool zero = FLAGS_rank_case == "zero1" || FLAGS_rank_case == "zero2";
  const bool fsdp = FLAGS_rank_case == "fsdp";
  CHECK(bf16 || zero || fsdp || FLAGS_rank_case == "ddp") << FLAGS_rank_case;
  {
    std::unique_ptr<strategies::Strategy> strategy =
        Make(bf16 ? "ddp" : FLAGS_rank_case, group->get(), bf16);
    const StepTimes times = Train(*strategy, FLAGS_batch, group->get());
    // Cumulative over warm-up and timed steps.
    if (auto* ddp = dynamic_cast<strategies::DdpStrategy*>(strategy.get())) {
      buckets = static_cast<int64_t>(ddp->buckets().size());
      in_backward = ddp->buckets_launched_in_backward() /
                    (FLAGS_warmup_steps + FLAGS_steps);
    } else if (auto* z =
                   dynamic_cast<strategies::ZeroStrategy*>(strategy.get())) {
      buckets = static_cast<int64_t>(z->buckets().size());
      in_backward = z->buckets_launched_in_backward() /
                    (FLAGS_warmup_steps + FLAGS_steps);
    } else {
      auto* f = dynamic_cast<strategies::FsdpStrategy*>(strategy.get());
      CHECK(f != nullptr);
      // Counters reset after the warm-up (Train).
      row[3] = f->counters().exposed_communication_ms / 1000 / times.total_s;
    }
    row[0] = times.total_s / FLAGS_steps;
    row[1] = times.step_s / FLAGS_steps;
  }
  // Before the reference strategy below allocates a whole model again.
  const absl::StatusOr<int64_t> resident = PeakResidentBytes();
  CheckOk(resident.status());
  CheckOk((*group)->Barrier());
  if (!fsdp) {
    row[2] = ReferenceStepSeconds(bf16) / (zero ? info.world_size : 1);
    row[3] = (row[1] - row[2]) / row[0];
  }
  at::Tensor all =
      at::tensor(std::vector<double>(row, row + 4), at::kDouble).to(at::kFloat);
  CheckOk((*group)->AllReduce(all));  // Sum.
  all = all.to(at::kDouble) / info.world_size;
  // Every rank's VmHWM in its own slot, summed into all slots.
  at::Tensor rss = at::zeros({info.world_size}, at::kFloat);
  rss[info.rank] = static_cast<double>(*resident) / (1 << 20);
  CheckOk((*group)->AllReduce(rss));
  if (info.rank == 0) {
    const auto* v = all.data_ptr<double>();
    const double tokens_per_s =
        FLAGS_batch * info.world_size * FLAGS_seq_len / v[0];
    std::ofstream out(FLAGS_result_file);
    out << absl::StrFormat("%.6f %.6f %.6f %.6f %.6f %d %d", tokens_per_s,
                           1000 * v[0], 1000 * v[1], 1000 * v[2], v[3],
                           in_backward, buckets);
    for (int r = 0; r < info.world_size; ++r) {
      out << absl::StrFormat(" %.1f", rss[r].item<float>());
    }
    out << "\n";
    CHECK(out.good()) << "cannot write " << FLAGS_result_file;
  }
  CheckOk((*group)->Barrier());
  return 0;
}

std::vector<double> ReadNumbers(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<double> numbers;
  for (absl::string_view part :
       absl::StrSplit(text.str(), absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    double d = 0;
    CHECK(absl::SimpleAtod(part, &d)) << path << ": " << text.str();
    numbers.push_back(d);
  }
  return numbers;
}

void LaunchOrDie(std::vector<std::string> command) {
  launch::LauncherOptions options;
  options.nproc_per_node = FLAGS_nproc;
  options.master_port = 0;
  options.num_threads_per_rank = 1;
  options.prefix_output = true;
  options.command = std::move(command);
  CheckOk(launch::ValidateLauncherOptions(options));
  CheckOk(launch::Launch(options));
}

// One run of a case. Strata's multi-rank cases fill every field but
// `unavailable`; the PyTorch peers tokens_per_s, step_ms and peak_rss_mib,
// or only `unavailable`; "single" only tokens_per_s.
struct RunResult {
  double tokens_per_s = 0, step_ms = 0, strategy_step_ms = 0, ref_step_ms = 0,
         exposed = 0, in_backward = 0, buckets = 0;
  std::vector<double> peak_rss_mib;  // VmHWM per rank.
  std::string unavailable;  // Why the peer could not run here; "": it ran.
};

RunResult RunStrata(const std::string& dir, const std::string& rank_case) {
  const std::string result = dir + "/strata_" + rank_case + ".txt";
  std::error_code error;
  std::filesystem::remove(result, error);
  launch::SelfLaunchSpec spec;
  spec.nproc = FLAGS_nproc;
  spec.args = {absl::StrCat("--model=", FLAGS_model),
               absl::StrCat("--batch=", FLAGS_batch),
               absl::StrCat("--seq_len=", FLAGS_seq_len),
               absl::StrCat("--warmup_steps=", FLAGS_warmup_steps),
               absl::StrCat("--steps=", FLAGS_steps),
               absl::StrCat("--rank_case=", rank_case),
               absl::StrCat("--result_file=", result)};
  spec.num_threads_per_rank = 1;
  CHECK_EQ(launch::LaunchSelf(spec), 0)
      << "the Strata " << rank_case << " ranks failed";
  const std::vector<double> v = ReadNumbers(result);
  CHECK_EQ(v.size(), 7u + FLAGS_nproc) << result;
  RunResult run;
  run.tokens_per_s = v[0];
  run.step_ms = v[1];
  run.strategy_step_ms = v[2];
  run.ref_step_ms = v[3];
  run.exposed = v[4];
  run.in_backward = v[5];
  run.buckets = v[6];
  run.peak_rss_mib.assign(v.begin() + 7, v.end());
  return run;
}

// The number, or the list of numbers, after "key": in the peer's one-line
// JSON; empty when the key is missing.
std::vector<double> JsonNumbers(const std::string& json,
                                const std::string& key) {
  const std::string tag = absl::StrCat("\"", key, "\": ");
  const size_t at = json.find(tag);
  if (at == std::string::npos) return {};
  size_t begin = at + tag.size();
  size_t end = std::string::npos;
  if (json[begin] == '[') {
    end = json.find(']', ++begin);
  } else {
    end = json.find_first_of(",}", begin);
  }
  CHECK(end != std::string::npos) << "unexpected output: " << json;
  std::vector<double> numbers;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(json).substr(begin, end - begin), ',',
                      absl::SkipWhitespace())) {
    double d = 0;
    CHECK(absl::SimpleAtod(part, &d)) << "unexpected output: " << json;
    numbers.push_back(d);
  }
  return numbers;
}

// One run of ddp_gpt.py --strategy=`strategy` (ddp or fsdp) at --nproc
// ranks: {"tokens_per_s": ..., "peak_rss_mib": [...], ...}, or
// {"unavailable": reason} where its torch cannot run the strategy.
RunResult RunPython(const std::string& dir, const std::string& strategy) {
  const models::ModelConfig config = Config();
  const std::string result = dir + "/python_" + strategy + ".json";
  std::error_code error;
  std::filesystem::remove(result, error);
  LaunchOrDie({FLAGS_python, FLAGS_script,
               absl::StrCat("--strategy=", strategy),
               absl::StrCat("--vocab=", config.vocab_size),
               absl::StrCat("--seq_len=", FLAGS_seq_len),
               absl::StrCat("--layers=", config.num_layers),
               absl::StrCat("--heads=", config.num_heads),
               absl::StrCat("--dim=", config.dim),
               absl::StrCat("--batch=", FLAGS_batch),
               absl::StrCat("--warmup_steps=", FLAGS_warmup_steps),
               absl::StrCat("--steps=", FLAGS_steps), "--threads=1",
               absl::StrCat("--out=", result)});
  std::ifstream in(result);
  std::stringstream text;
  text << in.rdbuf();
  const std::string out = text.str();
  RunResult run;
  constexpr absl::string_view kUnavailable = "{\"unavailable\": \"";
  if (absl::StartsWith(out, kUnavailable)) {
    run.unavailable = std::string(absl::StripSuffix(
        absl::StripTrailingAsciiWhitespace(out.substr(kUnavailable.size())),
        "\"}"));
    return run;
  }
  const std::vector<double> tokens_per_s = JsonNumbers(out, "tokens_per_s");
  const std::vector<double> step_ms = JsonNumbers(out, "step_ms");
  CHECK_EQ(tokens_per_s.size(), 1u) << "unexpected output: " << out;
  CHECK_EQ(step_ms.size(), 1u) << "unexpected output: " << out;
  run.tokens_per_s = tokens_per_s[0];
  run.step_ms = step_ms[0];
  run.peak_rss_mib = JsonNumbers(out, "peak_rss_mib");
  CHECK_EQ(run.peak_rss_mib.size(), static_cast<size_t>(FLAGS_nproc))
      << "unexpected output: " << out;
  return run;
}

RunResult RunStrataSingle() {
  at::set_num_threads(FLAGS_nproc);
  std::unique_ptr<strategies::Strategy> single = Make("single", nullptr);
  const StepTimes times =
      Train(*single, FLAGS_batch * FLAGS_nproc, /*group=*/nullptr);
  RunResult run;
  run.tokens_per_s =
      FLAGS_steps * FLAGS_batch * FLAGS_nproc * FLAGS_seq_len / times.total_s;
  run.step_ms = 1000 * times.total_s / FLAGS_steps;
  return run;
}

RunResult Median(std::vector<RunResult> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const RunResult& a, const RunResult& b) {
              return a.tokens_per_s < b.tokens_per_s;
            });
  return runs[runs.size() / 2];
}

// "1234 / 1240": one figure per rank.
std::string RankMiB(const std::vector<double>& mib) {
  if (mib.empty()) return "-";
  return absl::StrJoin(mib, " / ", [](std::string* out, double d) {
    absl::StrAppend(out, absl::StrFormat("%.0f", d));
  });
}

// The table's label of each case.
std::string Label(const std::string& name) {
  const std::string ranks =
      absl::StrFormat(", %d ranks x 1 thread", FLAGS_nproc);
  if (name == "single") {
    return absl::StrFormat("Strata single, 1 process, %d intra-op threads",
                           FLAGS_nproc);
  }
  static const auto* const kLabels = new std::map<std::string, std::string>{
      {"ddp", "Strata DDP"},
      {"zero1", "Strata ZeRO-1"},
      {"zero2", "Strata ZeRO-2"},
      {"ddp_bf16", "Strata DDP, bf16 params + bf16 reduce"},
      {"fsdp", "Strata FSDP FULL_SHARD"},
      {"pytorch_ddp", "PyTorch DDP (Gloo)"},
      {"pytorch_fsdp", "PyTorch FSDP FULL_SHARD (Gloo)"}};
  const auto it = kLabels->find(name);
  CHECK(it != kLabels->end())
      << "--cases: unknown case '" << name
      << "' (single, ddp, zero1, zero2, ddp_bf16, fsdp, pytorch_ddp or "
         "pytorch_fsdp)";
  return it->second + ranks;
}

// The PyTorch case a case's ratio is to.
std::string PeerOf(const std::string& name) {
  return name == "fsdp" || name == "pytorch_fsdp" ? "pytorch_fsdp"
                                                  : "pytorch_ddp";
}

// Below the table: the communication figures of Strata's multi-rank cases
// (median runs) and every run of every case.
void PrintDetails(const std::vector<std::string>& cases,
                  const std::map<std::string, std::vector<RunResult>>& runs,
                  const std::map<std::string, RunResult>& medians) {
  for (const std::string& name : cases) {
    if (name == "single" || absl::StartsWith(name, "pytorch_") ||
        runs.count(name) == 0) {
      continue;
    }
    const RunResult& m = medians.at(name);
    std::vector<std::string> exposed_runs;
    for (const RunResult& d : runs.at(name)) {
      exposed_runs.push_back(absl::StrFormat("%.1f%%", 100 * d.exposed));
    }
    if (name == "fsdp") {
      std::printf(
          "%s (median run): step %.1f ms; waiting for all-gathers and "
          "reductions %.1f ms = %.1f%% of the step; exposed share per run: "
          "%s.\n",
          Label(name).c_str(), m.step_ms, m.exposed * m.step_ms,
          100 * m.exposed, absl::StrJoin(exposed_runs, ", ").c_str());
      continue;
    }
    std::printf(
        "%s (median run): step %.1f ms; Step() %.1f ms, reference clipping + "
        "AdamW %.1f ms, exposed %.1f ms = %.1f%% of the step; buckets "
        "launched during backward %.0f of %.0f; exposed share per run: "
        "%s.\n",
        Label(name).c_str(), m.step_ms, m.strategy_step_ms, m.ref_step_ms,
        m.strategy_step_ms - m.ref_step_ms, 100 * m.exposed, m.in_backward,
        m.buckets, absl::StrJoin(exposed_runs, ", ").c_str());
  }
  std::printf("runs, tokens/s (peak RSS per rank, MiB):\n");
  for (const std::string& name : cases) {
    if (runs.count(name) == 0) continue;
    std::vector<std::string> list;
    for (const RunResult& d : runs.at(name)) {
      list.push_back(d.peak_rss_mib.empty()
                         ? absl::StrFormat("%.0f", d.tokens_per_s)
                         : absl::StrFormat("%.0f (%s)", d.tokens_per_s,
                                           RankMiB(d.peak_rss_mib)));
    }
    std::printf("  %s: %s\n", Label(name).c_str(),
                absl::StrJoin(list, ", ").c_str());
  }
}

int Drive(int argc, char** argv) {
  char dir_template[] = "/tmp/ddp_throughput.XXXXXX";
  CHECK(mkdtemp(dir_template) != nullptr) << "mkdtemp";
  const std::string dir = dir_template;
  const models::ModelConfig config = Config();
  const std::vector<std::string> cases =
      absl::StrSplit(FLAGS_cases, ',', absl::SkipEmpty());
  CHECK(!cases.empty()) << "--cases is empty";
  for (const std::string& name : cases) Label(name);  // Dies on unknown ones.
  // Per case, in --cases order: its runs, or why it could not run here.
  std::map<std::string, std::vector<RunResult>> runs;
  std::map<std::string, std::string> unavailable;
  for (int r = 0; r < FLAGS_repetitions; ++r) {
    std::vector<std::string> line;
    for (const std::string& name : cases) {
      if (unavailable.count(name) > 0) continue;
      RunResult run = name == "single" ? RunStrataSingle()
                      : absl::StartsWith(name, "pytorch_")
                          ? RunPython(dir, name.substr(8))
                          : RunStrata(dir, name);
      if (!run.unavailable.empty()) {
        LOG(WARNING) << Label(name)
                     << ": cannot run here, not measured: " << run.unavailable;
        unavailable[name] = run.unavailable;
        continue;
      }
      line.push_back(absl::StrFormat("%s %.1f", name, run.tokens_per_s));
      runs[name].push_back(std::move(run));
    }
    LOG(INFO) << "repetition " << r + 1 << ": " << absl::StrJoin(line, ", ")
              << " tok/s";
  }
  std::map<std::string, RunResult> medians;
  for (const auto& [name, list] : runs) medians[name] = Median(list);

  std::string command = "ddp_throughput";
  for (int i = 1; i < argc; ++i) absl::StrAppend(&command, " ", argv[i]);
  std::printf("\ncommand: %s\n", command.c_str());
  std::printf(
      "model %s (%.1fM params), %d ranks, %lld x %lld tokens per rank "
      "(global %lld x %lld), %d warm-up + %d timed steps per run, median of "
      "%d alternating runs\n\n",
      FLAGS_model.c_str(), models::NumParameters(config) / 1e6, FLAGS_nproc,
      static_cast<long long>(FLAGS_batch),
      static_cast<long long>(FLAGS_seq_len),
      static_cast<long long>(FLAGS_batch) * FLAGS_nproc,
      static_cast<long long>(FLAGS_seq_len), FLAGS_warmup_steps, FLAGS_steps,
      FLAGS_repetitions);
  std::printf(
      "| case | tokens/s | ratio to PyTorch (FSDP for FSDP, else DDP) | "
      "peak RSS per rank (MiB) | exposed communication |\n"
      "|---|--:|--:|--:|--:|\n");
  for (const std::string& name : cases) {
    if (unavailable.count(name) > 0) {
      std::printf("| %s | not measured (see below) | - | - | - |\n",
                  Label(name).c_str());
      continue;
    }
    const RunResult& m = medians.at(name);
    const auto peer = medians.find(PeerOf(name));
    const std::string ratio =
        peer == medians.end()
            ? "-"
            : absl::StrFormat("%.2fx",
                              m.tokens_per_s / peer->second.tokens_per_s);
    const std::string exposed =
        name == "single" ? "-"
        : absl::StartsWith(name, "pytorch_")
            ? "not measured"
            : absl::StrFormat("%.1f%%", 100 * m.exposed);
    std::printf("| %s | %.0f | %s | %s | %s |\n", Label(name).c_str(),
                m.tokens_per_s, ratio.c_str(), RankMiB(m.peak_rss_mib).c_str(),
                exposed.c_str());
  }
  std::printf("\n");
  for (const auto& [name, reason] : unavailable) {
    std::printf("%s: not measured, its Python (%s) cannot run it: %s\n",
                Label(name).c_str(), FLAGS_python.c_str(), reason.c_str());
  }
  PrintDetails(cases, runs, medians);
  std::fflush(stdout);
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  return 0;
}

int Main(int argc, char** argv) {
  const std::vector<char*> original(argv, argv + argc);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  CHECK_GE(FLAGS_nproc, 1) << "--nproc";
  CHECK_GE(FLAGS_batch, 1) << "--batch";
  CHECK_GE(FLAGS_steps, 1) << "--steps";
  CHECK_GE(FLAGS_repetitions, 1) << "--repetitions";
  absl::StatusOr<comm::RendezvousInfo> info =
      comm::RendezvousInfoFromEnv(comm::ProcessEnv());
  CHECK(info.ok()) << info.status();
  if (info->source != "single-process") return RunRank(*info);
  return Drive(static_cast<int>(original.size()),
               const_cast<char**>(original.data()));
}

}  // namespace
}  // namespace strata::benchmarks

int main(int argc, char** argv) { return strata::benchmarks::Main(argc, argv); }
