// Single-process training throughput: Strata against the same model trained
// by PyTorch in Python (benchmarks/python/train_gpt.py, Debian python3-torch
// 1.13), measured side by side in one run, with MFU against this machine's
// matmul peak measured in the same run, and a per-phase profile of Strata's
// step (forward, backward, clipping, optimizer).
//
//   bazel run //benchmarks:train_throughput
//   bazel run //benchmarks:train_throughput -- --models=gpt-tiny
//   --precisions=fp32
//
// Both sides: random tokens, forward + cross-entropy + backward + global-norm
// clipping + AdamW, the same intra-op thread count (--threads); fp32 GEMMs use
// OpenBLAS's own threads on both sides.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/matmul_peak.h"
#include "base/torch_compat.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/unit.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/flat_parameters.h"

DEFINE_string(models, "gpt-tiny,gpt-small50m", "Model configs to measure.");
DEFINE_string(precisions, "fp32,bf16", "fp32 and/or bf16 (autocast).");
DEFINE_int32(threads, 1, "Intra-op threads on both sides.");
DEFINE_int32(steps, 0, "Timed steps (0: 60 for gpt-tiny, 3 otherwise).");
DEFINE_int32(repetitions, 3,
             "Runs of each side, alternating Strata and Python; medians are "
             "reported (this machine is noisy).");
DEFINE_string(python, "/usr/bin/python3", "Python with torch 1.13.");
DEFINE_string(script, "benchmarks/python/train_gpt.py",
              "The Python peer (path relative to the runfiles root).");

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Shape {
  int64_t batch;
  int64_t seq_len;
  int steps;
};

Shape ShapeFor(const std::string& model) {
  if (model == "gpt-tiny") return {32, 128, FLAGS_steps > 0 ? FLAGS_steps : 60};
  return {4, 256, FLAGS_steps > 0 ? FLAGS_steps : 3};
}

struct StrataResult {
  double tokens_per_s = 0;
  double forward_s = 0, backward_s = 0, clip_s = 0, optimizer_s = 0;
};

StrataResult RunStrata(const strata::models::ModelConfig& config,
                       const Shape& shape, bool bf16) {
  auto model = strata::models::BuildModel(config, {});
  CHECK(model.ok()) << model.status();
  std::vector<strata::optim::NamedParameter> named;
  for (const auto& p : (*model)->named_parameters()) {
    named.push_back({p.key(), p.value()});
  }
  auto flat = strata::optim::FlatParameters::Create(std::move(named));
  CHECK(flat.ok()) << flat.status();
  strata::optim::AdamWOptions adamw;
  adamw.beta2 = 0.95;
  auto optimizer =
      strata::optim::CreateAdamW((*flat)->params(), (*flat)->grads(),
                                 (*flat)->MatrixDecayRanges(0.1), adamw);
  CHECK(optimizer.ok()) << optimizer.status();
  at::Tensor tokens = at::randint(config.vocab_size,
                                  {shape.batch, shape.seq_len + 1}, at::kLong);
  at::Tensor x = tokens.narrow(1, 0, shape.seq_len);
  at::Tensor y = tokens.narrow(1, 1, shape.seq_len);

  StrataResult r;
  auto step = [&](bool timed) {
    const auto t0 = Clock::now();
    (*flat)->ZeroGrad();
    if (bf16) {
      strata::torch_compat::SetAutocastEnabled(c10::kCPU, true);
      strata::torch_compat::SetAutocastDtype(c10::kCPU, at::kBFloat16);
    }
    at::Tensor loss = strata::models::UnitModel::Loss((*model)->Forward(x), y);
    if (bf16) {
      strata::torch_compat::SetAutocastEnabled(c10::kCPU, false);
      at::autocast::clear_cache();
    }
    const auto t1 = Clock::now();
    loss.backward();
    const auto t2 = Clock::now();
    strata::optim::ClipGradNorm((*flat)->grads(), 1.0);
    const auto t3 = Clock::now();
    (*optimizer)->Step(3e-4);
    const auto t4 = Clock::now();
    if (timed) {
      r.forward_s += Seconds(t0, t1);
      r.backward_s += Seconds(t1, t2);
      r.clip_s += Seconds(t2, t3);
      r.optimizer_s += Seconds(t3, t4);
    }
  };
  for (int i = 0; i < 2; ++i) step(false);
  const auto start = Clock::now();
  for (int i = 0; i < shape.steps; ++i) step(true);
  r.tokens_per_s =
      shape.steps * shape.batch * shape.seq_len / Seconds(start, Clock::now());
  return r;
}

double RunPython(const strata::models::ModelConfig& config, const Shape& shape,
                 bool bf16) {
  const std::string command = absl::StrFormat(
      "%s %s --vocab %d --seq_len %d --layers %d --heads %d --dim %d --batch "
      "%d --steps %d --warmup_steps 2 --threads %d --precision %s",
      FLAGS_python, FLAGS_script, config.vocab_size, shape.seq_len,
      config.num_layers, config.num_heads, config.dim, shape.batch, shape.steps,
      FLAGS_threads, bf16 ? "bf16" : "fp32");
  FILE* pipe = popen(command.c_str(), "r");
  CHECK(pipe != nullptr) << "cannot run " << command;
  std::string out;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  const int status = pclose(pipe);
  CHECK_EQ(status, 0) << "the Python peer failed: " << command << "\n" << out;
  // {"tokens_per_s": 12345.6, ...}
  const size_t at = out.find("\"tokens_per_s\": ");
  CHECK(at != std::string::npos) << "unexpected output: " << out;
  double tokens_per_s = 0;
  CHECK(absl::SimpleAtod(out.substr(at + 16, out.find(',', at) - at - 16),
                         &tokens_per_s))
      << out;
  return tokens_per_s;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  at::set_num_threads(FLAGS_threads);
  const double peak_fp32 =
      strata::MeasureMatmulPeakFlops(at::kFloat, 2048, 1.0);
  const double peak_bf16 =
      strata::MeasureMatmulPeakFlops(at::kBFloat16, 2048, 1.0);
  std::printf(
      "matmul peak measured in this run: fp32 %.1f GFLOP/s, bf16 %.1f "
      "GFLOP/s (2048^3, intra-op threads %d)\n\n",
      peak_fp32 / 1e9, peak_bf16 / 1e9, FLAGS_threads);
  std::printf(
      "| model | params | precision | batch x seq | Strata tok/s | "
      "MFU | Python tok/s | Strata / Python | fwd / bwd / clip / "
      "optim (ms/step) |\n|---|--:|---|---|--:|--:|--:|--:|---|\n");
  for (const std::string& name :
       std::vector<std::string>(absl::StrSplit(FLAGS_models, ','))) {
    auto config = strata::models::ConfigByName(name);
    CHECK(config.ok()) << config.status();
    const Shape shape = ShapeFor(name);
    if (config->seq_len < shape.seq_len) config->seq_len = shape.seq_len;
    for (const std::string& precision :
         std::vector<std::string>(absl::StrSplit(FLAGS_precisions, ','))) {
      const bool bf16 = precision == "bf16";
      std::vector<StrataResult> strata_runs;
      std::vector<double> python_runs;
      for (int r = 0; r < FLAGS_repetitions; ++r) {
        strata_runs.push_back(RunStrata(*config, shape, bf16));
        python_runs.push_back(RunPython(*config, shape, bf16));
      }
      std::sort(strata_runs.begin(), strata_runs.end(),
                [](const StrataResult& a, const StrataResult& b) {
                  return a.tokens_per_s < b.tokens_per_s;
                });
      std::sort(python_runs.begin(), python_runs.end());
      const StrataResult s = strata_runs[strata_runs.size() / 2];
      const double python = python_runs[python_runs.size() / 2];
      const double mfu =
          s.tokens_per_s *
          strata::models::TrainingFlopsPerToken(*config, shape.seq_len) /
          (bf16 ? peak_bf16 : peak_fp32);
      const double ms = 1000.0 / shape.steps;
      std::printf(
          "| %s | %.1fM | %s | %lld x %lld | %.0f | %.1f%% | %.0f | %.2fx | "
          "%.1f / "
          "%.1f / %.1f / %.1f |\n",
          name.c_str(), strata::models::NumParameters(*config) / 1e6,
          precision.c_str(), static_cast<long long>(shape.batch),
          static_cast<long long>(shape.seq_len), s.tokens_per_s, 100 * mfu,
          python, s.tokens_per_s / python, s.forward_s * ms, s.backward_s * ms,
          s.clip_s * ms, s.optimizer_s * ms);
      std::fflush(stdout);
    }
  }
  return 0;
}
