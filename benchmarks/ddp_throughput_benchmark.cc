// Data-parallel training throughput at 2 ranks: Strata's DDP, ZeRO-1 and
// ZeRO-2 strategies (and DDP with bf16 parameters) against PyTorch's
// DistributedDataParallel (Gloo) on the same model, and against Strata's
// "single" strategy on the same global batch in one process with as many
// intra-op threads as there are ranks, measured alternating in one run
// (median of --repetitions).
//
//   bazel run -c opt //benchmarks:ddp_throughput
//   bazel run -c opt //benchmarks:ddp_throughput -- --batch=2
//
// Cases (random tokens; forward + cross-entropy + backward + global-norm
// clipping + AdamW, beta2 0.95, weight decay 0.1 on matrices):
//   1. Strata "single", one process, at::set_num_threads(--nproc), global
//      batch --nproc * --batch (OpenBLAS threads: its default).
//   2. Strata "ddp", --nproc ranks started by strata::launch::Launch (this
//      binary re-launched; OMP/OpenBLAS threads 1 per rank), --batch each.
//   3. PyTorch DDP (benchmarks/python/ddp_gpt.py, the model of train_gpt.py),
//      --nproc ranks started by the same launcher, torch.set_num_threads(1).
//   4. Strata "zero1" and "zero2", as 2.
//   5. Strata "ddp" with --param_dtype bf16 and --reduce_dtype bf16 (bf16
//      parameters and gradients, fp32 masters and AdamW state), as 2
//      (with --bf16_case; not comparable in numerics to the fp32 cases).
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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
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
DEFINE_string(python, "/usr/bin/python3", "Python with torch 1.13.");
DEFINE_string(script, "benchmarks/python/ddp_gpt.py",
              "The PyTorch DDP peer (path relative to the runfiles root).");
DEFINE_bool(bf16_case, true,
            "Also run Strata DDP with bf16 parameters and bf16 gradient "
            "reduction.");
DEFINE_string(result_file, "",
              "Internal: where rank 0 of a Strata DDP run writes its result.");
DEFINE_string(rank_case, "ddp",
              "Internal: the case a re-launched rank runs: ddp, zero1, zero2 "
              "or ddp_bf16.");

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

// One rank of a Strata case (--rank_case): trains, then measures the
// reference Step(); rank 0 writes "tokens_per_s step_ms ddp_step_ms
// ref_step_ms exposed_share buckets_in_backward buckets" (averaged over
// ranks) to --result_file.
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
  CHECK(bf16 || zero || FLAGS_rank_case == "ddp") << FLAGS_rank_case;
  {
    std::unique_ptr<strategies::Strategy> strategy =
        Make(bf16 ? "ddp" : FLAGS_rank_case, group->get(), bf16);
    const StepTimes times = Train(*strategy, FLAGS_batch, group->get());
    // Cumulative over warm-up and timed steps.
    if (auto* ddp = dynamic_cast<strategies::DdpStrategy*>(strategy.get())) {
      buckets = static_cast<int64_t>(ddp->buckets().size());
      in_backward = ddp->buckets_launched_in_backward() /
                    (FLAGS_warmup_steps + FLAGS_steps);
    } else {
      auto* z = dynamic_cast<strategies::ZeroStrategy*>(strategy.get());
      CHECK(z != nullptr);
      buckets = static_cast<int64_t>(z->buckets().size());
      in_backward = z->buckets_launched_in_backward() /
                    (FLAGS_warmup_steps + FLAGS_steps);
    }
    row[0] = times.total_s / FLAGS_steps;
    row[1] = times.step_s / FLAGS_steps;
  }
  CheckOk((*group)->Barrier());
  row[2] = ReferenceStepSeconds(bf16) / (zero ? info.world_size : 1);
  row[3] = (row[1] - row[2]) / row[0];
  at::Tensor all =
      at::tensor(std::vector<double>(row, row + 4), at::kDouble).to(at::kFloat);
  CheckOk((*group)->AllReduce(all));  // Sum.
  all = all.to(at::kDouble) / info.world_size;
  if (info.rank == 0) {
    const auto* v = all.data_ptr<double>();
    const double tokens_per_s =
        FLAGS_batch * info.world_size * FLAGS_seq_len / v[0];
    std::ofstream out(FLAGS_result_file);
    out << absl::StrFormat("%.6f %.6f %.6f %.6f %.6f %d %d\n", tokens_per_s,
                           1000 * v[0], 1000 * v[1], 1000 * v[2], v[3],
                           in_backward, buckets);
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

struct DdpResult {
  double tokens_per_s = 0, step_ms = 0, ddp_step_ms = 0, ref_step_ms = 0,
         exposed = 0, in_backward = 0, buckets = 0;
};

DdpResult RunStrata(const std::string& dir, const std::string& rank_case) {
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
  CHECK_EQ(v.size(), 7u);
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
}

double RunPythonDdp(const std::string& dir) {
  const models::ModelConfig config = Config();
  const std::string result = dir + "/python_ddp.json";
  std::error_code error;
  std::filesystem::remove(result, error);
  LaunchOrDie({FLAGS_python, FLAGS_script,
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
  // {"tokens_per_s": 12345.6, ...}
  const size_t at = out.find("\"tokens_per_s\": ");
  CHECK(at != std::string::npos) << "unexpected output: " << out;
  double tokens_per_s = 0;
  CHECK(absl::SimpleAtod(out.substr(at + 16, out.find(',', at) - at - 16),
                         &tokens_per_s))
      << out;
  return tokens_per_s;
}

double RunStrataSingle() {
  at::set_num_threads(FLAGS_nproc);
  std::unique_ptr<strategies::Strategy> single = Make("single", nullptr);
  const StepTimes times =
      Train(*single, FLAGS_batch * FLAGS_nproc, /*group=*/nullptr);
  return FLAGS_steps * FLAGS_batch * FLAGS_nproc * FLAGS_seq_len /
         times.total_s;
}

template <typename T, typename Key>
T Median(std::vector<T> runs, Key key) {
  std::sort(runs.begin(), runs.end(),
            [&](const T& a, const T& b) { return key(a) < key(b); });
  return runs[runs.size() / 2];
}

std::string Joined(const std::vector<double>& runs) {
  return absl::StrJoin(runs, ", ", [](std::string* out, double d) {
    absl::StrAppend(out, absl::StrFormat("%.0f", d));
  });
}

int Drive(int argc, char** argv) {
  char dir_template[] = "/tmp/ddp_throughput.XXXXXX";
  CHECK(mkdtemp(dir_template) != nullptr) << "mkdtemp";
  const std::string dir = dir_template;
  const models::ModelConfig config = Config();
  std::vector<std::string> cases = {"ddp", "zero1", "zero2"};
  if (FLAGS_bf16_case) cases.emplace_back("ddp_bf16");
  std::vector<double> single_runs, python_runs;
  std::vector<std::vector<DdpResult>> strata_runs(cases.size());
  for (int r = 0; r < FLAGS_repetitions; ++r) {
    single_runs.push_back(RunStrataSingle());
    std::string line = absl::StrFormat("repetition %d: single %.1f", r + 1,
                                       single_runs.back());
    for (size_t c = 0; c < cases.size(); ++c) {
      strata_runs[c].push_back(RunStrata(dir, cases[c]));
      absl::StrAppendFormat(&line, ", Strata %s %.1f", cases[c],
                            strata_runs[c].back().tokens_per_s);
    }
    python_runs.push_back(RunPythonDdp(dir));
    LOG(INFO) << line
              << absl::StrFormat(", Python DDP %.1f tok/s", python_runs.back());
  }
  auto identity = [](double d) { return d; };
  const double single = Median(single_runs, identity);
  const double python = Median(python_runs, identity);

  std::string command = "bazel run -c opt //benchmarks:ddp_throughput --";
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
      "| case | tokens/s | ratio to Python DDP | exposed communication |\n"
      "|---|--:|--:|--:|\n");
  std::printf(
      "| Strata single, 1 process, %d intra-op threads | %.0f | "
      "%.2fx | - |\n",
      FLAGS_nproc, single, single / python);
  const std::map<std::string, std::string> labels = {
      {"ddp", "Strata DDP"},
      {"zero1", "Strata ZeRO-1"},
      {"zero2", "Strata ZeRO-2"},
      {"ddp_bf16", "Strata DDP, bf16 params + bf16 reduce"}};
  std::vector<DdpResult> medians;
  for (size_t c = 0; c < cases.size(); ++c) {
    medians.push_back(Median(
        strata_runs[c], [](const DdpResult& d) { return d.tokens_per_s; }));
    const DdpResult& m = medians.back();
    std::printf("| %s, %d ranks x 1 thread | %.0f | %.2fx | %.1f%% |\n",
                labels.at(cases[c]).c_str(), FLAGS_nproc, m.tokens_per_s,
                m.tokens_per_s / python, 100 * m.exposed);
  }
  std::printf(
      "| PyTorch DDP (Gloo), %d ranks x 1 thread | %.0f | 1.00x | "
      "not measured |\n\n",
      FLAGS_nproc, python);
  for (size_t c = 0; c < cases.size(); ++c) {
    const DdpResult& m = medians[c];
    std::vector<std::string> exposed_runs;
    std::vector<double> tokens;
    for (const DdpResult& d : strata_runs[c]) {
      exposed_runs.push_back(absl::StrFormat("%.1f%%", 100 * d.exposed));
      tokens.push_back(d.tokens_per_s);
    }
    std::printf(
        "%s (median run): step %.1f ms; Step() %.1f ms, reference clipping + "
        "AdamW %.1f ms, exposed %.1f ms = %.1f%% of the step; buckets "
        "launched during backward %.0f of %.0f. Runs (tokens/s): %s; "
        "exposed share per run: %s.\n",
        labels.at(cases[c]).c_str(), m.step_ms, m.ddp_step_ms, m.ref_step_ms,
        m.ddp_step_ms - m.ref_step_ms, 100 * m.exposed, m.in_backward,
        m.buckets, Joined(tokens).c_str(),
        absl::StrJoin(exposed_runs, ", ").c_str());
  }
  std::printf("runs (tokens/s): single %s; Python DDP %s\n",
              Joined(single_runs).c_str(), Joined(python_runs).c_str());
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
