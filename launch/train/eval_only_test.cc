// train --eval_only through the binary: the weights of a short training
// run's checkpoint evaluate to the same loss in one process, under ddp with
// 2 ranks (--load_weights) and under fsdp with 2 ranks (--resume), equal to
// the eval_loss the training run logged for its last step (the same
// batches, the same weights); perplexity = exp(loss); --eval_batches=0
// evaluates the whole eval split (also with other batch flags, from
// --resume=auto); without weights the run is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/json.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::MetricsColumn;
using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;

// Tolerance between evaluations of the same fp32 weights on the same
// batches. Every strategy evaluates with the full weights on every rank
// (FSDP all-gathers exact copies of the shards) and every rank runs the same
// forwards, so the kernels see the same inputs; the only freedom left is the
// order of fp32 reductions inside them. Reassociating a sum of n fp32 terms
// of one sign changes it by at most (n - 1) eps relative (eps = 2^-23); the
// longest such reduction per token is the log-softmax over gpt-tiny's 256
// vocabulary ids (the dot products run over 64 features), so each token's
// loss moves by at most ~256 eps relative, and so does their mean (the mean
// itself is taken in double). The metrics file's 9 significant digits add
// 5e-9 relative. Hence |a - b| <= 256 eps |a| (~1.6e-4 at a loss of 5.3).
// (In practice the results are bitwise equal.)
double Tolerance(double loss) {
  return 256 * std::numeric_limits<float>::epsilon() * std::abs(loss);
}

constexpr int kSeqLen = 32;

// The data and batch flags shared by the training run and the evaluations.
std::vector<std::string> DataFlags() {
  return {absl::StrCat("--seq_len=", kSeqLen),
          "--markov_tokens=20000",
          "--global_batch=4",
          "--micro_batch=2",
          "--eval_batches=3",
          "--threads=1"};
}

RunResult Train(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {RunfilePath("launch/train/train")};
  const std::vector<std::string> data = DataFlags();
  args.insert(args.end(), data.begin(), data.end());
  args.insert(args.end(), flags.begin(), flags.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(120));
}

// 4 steps in one process, logged, evaluated and saved (sharded) at step 4;
// trained once per test process.
const std::string& TrainedRun() {
  static const std::string* dir = [] {
    auto* d = new std::string(TempDir("trained"));
    RunResult r = Train({"--steps=4", "--warmup_steps=1", "--log_interval=4",
                         "--eval_interval=0", "--lr=1e-3", "--min_lr=1e-4",
                         "--save_every=4", "--output_dir=" + *d});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return d;
  }();
  return *dir;
}

std::string Step4() { return TrainedRun() + "/checkpoints/step_00000004"; }

struct Eval {
  double loss = std::nan("");
  double perplexity = std::nan("");
  int64_t tokens = 0;
  int64_t batches = 0;
  std::string strategy;
  int world_size = 0;
  std::string out;  // stdout.
};

// Runs train --eval_only with `flags` into a fresh output directory and
// reads its eval.json.
Eval EvalOnly(const std::string& name, const std::vector<std::string>& flags) {
  const std::string out = TempDir("eval_" + name);
  std::vector<std::string> all = {"--eval_only", "--output_dir=" + out};
  all.insert(all.end(), flags.begin(), flags.end());
  RunResult r = Train(all);
  Eval e;
  EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
  e.out = r.out;
  EXPECT_FALSE(std::filesystem::exists(out + "/metrics.jsonl")) << name;
  EXPECT_FALSE(std::filesystem::exists(out + "/model.pt")) << name;
  const std::string text = ReadFile(out + "/eval.json");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  auto json = ParseJson(text, out + "/eval.json");
  EXPECT_TRUE(json.ok()) << name << ": " << json.status();
  if (!json.ok()) return e;
  e.loss = (*json)["loss"].get<double>();
  e.perplexity = (*json)["perplexity"].get<double>();
  e.tokens = (*json)["tokens"].get<int64_t>();
  e.batches = (*json)["batches"].get<int64_t>();
  e.strategy = (*json)["strategy"].get<std::string>();
  e.world_size = (*json)["world_size"].get<int>();
  return e;
}

TEST(EvalOnlyTest, SameLossUnderEveryStrategyAndAsTheTrainingRunLogged) {
  const std::vector<double> logged =
      MetricsColumn(TrainedRun() + "/metrics.jsonl", "eval_loss");
  ASSERT_EQ(logged.size(), 1u);  // One line, at step 4, with eval_loss.
  const double trained_eval = logged.back();
  ASSERT_TRUE(std::isfinite(trained_eval));

  const Eval single = EvalOnly("single", {"--load_weights=" + Step4()});
  EXPECT_EQ(single.strategy, "single");
  EXPECT_EQ(single.world_size, 1);
  EXPECT_EQ(single.batches, 3);
  EXPECT_EQ(single.tokens, 3 * 2 * kSeqLen);
  EXPECT_NEAR(single.loss, trained_eval, Tolerance(trained_eval));
  EXPECT_NEAR(single.perplexity, std::exp(single.loss),
              1e-12 * single.perplexity);
  EXPECT_THAT(single.out, HasSubstr(absl::StrCat("over 192 tokens (3 "
                                                 "batches)")));
  EXPECT_THAT(single.out, HasSubstr("eval: loss "));

  const Eval ddp = EvalOnly(
      "ddp", {"--nproc=2", "--strategy=ddp", "--load_weights=" + Step4()});
  const Eval fsdp =
      EvalOnly("fsdp", {"--nproc=2", "--strategy=fsdp", "--resume=" + Step4()});
  for (const Eval* e : {&ddp, &fsdp}) {
    EXPECT_EQ(e->world_size, 2) << e->strategy;
    EXPECT_EQ(e->tokens, single.tokens) << e->strategy;
    EXPECT_NEAR(e->loss, single.loss, Tolerance(single.loss)) << e->strategy;
    EXPECT_NEAR(e->perplexity, std::exp(e->loss), 1e-12 * e->perplexity);
  }
  EXPECT_EQ(fsdp.strategy, "fsdp");
  // The model.pt of the run (a PyTorch state dict): the same weights.
  const Eval pt =
      EvalOnly("model_pt", {"--load_weights=" + TrainedRun() + "/model.pt"});
  EXPECT_NEAR(pt.loss, single.loss, Tolerance(single.loss));
}

TEST(EvalOnlyTest, EvalBatchesZeroScoresTheWholeEvalSplit) {
  // 5% of 20000 tokens: 1000, cut into (1000 - 1) / 32 = 31 windows, in
  // batches of --micro_batch=2: 15 full and one of 1.
  const Eval single =
      EvalOnly("all_single", {"--load_weights=" + Step4(), "--eval_batches=0"});
  EXPECT_EQ(single.tokens, 31 * kSeqLen);
  EXPECT_EQ(single.batches, 16);
  // --resume=auto (the latest under --ckpt_dir) loads only the weights, so
  // other batch flags than the saving run's are fine: batches of 4 (7 full
  // and one of 3) weigh each window's tokens the same.
  const Eval zero2 = EvalOnly(
      "all_zero2", {"--nproc=2", "--strategy=zero2", "--resume=auto",
                    "--ckpt_dir=" + TrainedRun() + "/checkpoints",
                    "--eval_batches=0", "--global_batch=8", "--micro_batch=4"});
  EXPECT_EQ(zero2.tokens, single.tokens);
  EXPECT_EQ(zero2.batches, 8);
  EXPECT_NEAR(zero2.loss, single.loss, Tolerance(single.loss));
}

TEST(EvalOnlyTest, RefusedWithoutWeights) {
  const std::string out = TempDir("eval_refused");
  RunResult r = Train({"--eval_only", "--output_dir=" + out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--eval_only needs --load_weights or --resume"));
  EXPECT_FALSE(std::filesystem::exists(out + "/eval.json"));
  // --resume=auto with no checkpoint under --ckpt_dir.
  r = Train({"--eval_only", "--resume=auto", "--output_dir=" + out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--resume=auto"));
  EXPECT_FALSE(std::filesystem::exists(out + "/eval.json"));
  // --eval_batches=0 is only for --eval_only.
  r = Train({"--eval_batches=0", "--steps=2", "--output_dir=" + out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--eval_batches: must be >= 1 (0, all of the "
                               "eval data, only with --eval_only)"));
}

// --load_weights_revise_keys renames the checkpoint's keys before they
// match: blocks.1 renamed to blocks.7 leaves blocks.1's tensors missing and
// blocks.7's unexpected, so the strict default refuses the load naming
// both, and --load_weights_strict=false loads the rest, keeps blocks.1 at
// its initial values (a different model, so another loss) and lists both.
TEST(EvalOnlyTest, NonStrictLoadListsMissingAndUnexpectedKeys) {
  const std::string rename =
      "--load_weights_revise_keys=^blocks\\.1\\.=blocks.7.";
  const RunResult strict =
      Train({"--eval_only", "--output_dir=" + TempDir("eval_strict_renamed"),
             "--load_weights=" + Step4(), rename});
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_THAT(strict.err, HasSubstr("does not match the model; missing keys: "
                                    "blocks.1."));
  EXPECT_THAT(strict.err, HasSubstr("unexpected keys: blocks.7."));

  const std::string out = TempDir("eval_non_strict");
  const RunResult loose =
      Train({"--eval_only", "--output_dir=" + out, "--load_weights=" + Step4(),
             rename, "--load_weights_strict=false"});
  ASSERT_EQ(loose.exit_code, 0) << loose.err;
  // gpt-tiny: 2 blocks of 12 tensors each (4 + 2 + 4 + 2: ln_1, attn, ln_2,
  // mlp weights and biases), plus wte, wpe, ln_f weight and bias: 28 tensors,
  // 12 of them blocks.1's.
  EXPECT_THAT(loose.err, HasSubstr("loaded 16 model tensors"));
  EXPECT_THAT(loose.err, HasSubstr("12 model tensors are not in the "
                                   "checkpoint and keep their initial values "
                                   "(--load_weights_strict=false): "
                                   "blocks.1."));
  EXPECT_THAT(loose.err, HasSubstr("12 checkpoint tensors are not in the "
                                   "model and were ignored"));
  const Eval full = EvalOnly("strict_full", {"--load_weights=" + Step4()});
  auto json = ParseJson(ReadFile(out + "/eval.json"), out + "/eval.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_GT(std::abs((*json)["loss"].get<double>() - full.loss),
            Tolerance(full.loss));
}

}  // namespace
}  // namespace strata::launch
