// Dropout through the train binary, in fresh processes: the masks are a
// function of (seed, step, global sample, site, element) (models/dropout.h),
// so with dropout on
//   - data-parallel runs at 2 ranks (ddp, zero2, fsdp) train like the
//     single-process run, and
//   - a run resumed from a checkpoint continues bitwise as the uninterrupted
//     one, at 2 ranks, under every strategy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "launch/testing/run_output.h"
#include "launch/testing/subprocess.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::RunfilePath;
using ::strata::launch::testing::RunResult;
using ::strata::launch::testing::TempDir;

// The values of `key` in each line of a metrics.jsonl file.
std::vector<double> Field(const std::string& metrics_path,
                          const std::string& key) {
  return launch::testing::MetricsColumn(metrics_path, key);
}

// 8 steps of gpt-tiny with dropout 0.1, a checkpoint every 4 steps, one
// metrics line per step.
std::vector<std::string> Args(const std::string& out,
                              std::vector<std::string> more) {
  std::vector<std::string> args = {RunfilePath("launch/train"),
                                   "--steps=8",
                                   "--warmup_steps=1",
                                   "--seq_len=32",
                                   "--markov_tokens=20000",
                                   "--global_batch=4",
                                   "--micro_batch=1",
                                   "--log_interval=1",
                                   "--eval_interval=0",
                                   "--dropout=0.1",
                                   "--lr=1e-4",
                                   "--min_lr=1e-5",
                                   "--save_every=4",
                                   absl::StrCat("--output_dir=", out)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

RunResult Train(const std::string& out, std::vector<std::string> more) {
  return launch::testing::Run(Args(out, std::move(more)), {},
                              absl::Seconds(120));
}

// Tolerance: as strategies/testing/parity.h derives for data-parallel vs
// single training at lr 1e-4 (reordered float sums; AdamW bounds each update
// by ~lr), losses — means of 128 float cross-entropies over parameters that
// agree to ~1e-6 — agree to 1e-4. A different dropout mask on any sample
// moves a step's loss by ~1e-2 (checked below against the run without
// dropout), so masks that depended on the rank would fail.
TEST(DropoutInvarianceTest, TwoRanksTrainLikeOneUnderEveryStrategy) {
  const std::string single = TempDir("inv_single");
  RunResult one = Train(single, {});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<double> want = Field(single + "/metrics.jsonl", "loss");
  ASSERT_EQ(want.size(), 8u);

  const std::string off = TempDir("inv_no_dropout");
  RunResult no_dropout = Train(off, {"--dropout=0"});
  ASSERT_EQ(no_dropout.exit_code, 0) << no_dropout.err;
  const std::vector<double> without = Field(off + "/metrics.jsonl", "loss");
  ASSERT_EQ(without.size(), 8u);
  double largest = 0;
  for (int i = 0; i < 8; ++i) {
    largest = std::max(largest, std::abs(without[i] - want[i]));
  }
  EXPECT_GT(largest, 1e-3) << "dropout 0.1 should change the losses";

  for (const std::string strategy : {"ddp", "zero2", "fsdp"}) {
    const std::string dir = TempDir("inv_" + strategy);
    RunResult two = Train(dir, {"--nproc=2", "--strategy=" + strategy});
    ASSERT_EQ(two.exit_code, 0) << strategy << ": " << two.err;
    const std::vector<double> got = Field(dir + "/metrics.jsonl", "loss");
    ASSERT_EQ(got.size(), 8u) << strategy;
    for (int i = 0; i < 8; ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-4) << strategy << " step " << i + 1;
    }
  }
}

// Every metrics line's loss, lr and grad norm and model.pt's bytes.
TEST(DropoutInvarianceTest, TwoRankResumeIsBitwiseExactUnderEveryStrategy) {
  for (const std::string strategy : {"ddp", "zero2", "fsdp"}) {
    const std::string a = TempDir("resume_a_" + strategy);
    const std::string b = TempDir("resume_b_" + strategy);
    const std::vector<std::string> ranks = {"--nproc=2",
                                            "--strategy=" + strategy};
    RunResult first = Train(a, ranks);
    ASSERT_EQ(first.exit_code, 0) << strategy << ": " << first.err;
    std::vector<std::string> resume = ranks;
    resume.push_back("--resume=" + a + "/checkpoints/step_00000004");
    RunResult resumed = Train(b, resume);
    ASSERT_EQ(resumed.exit_code, 0) << strategy << ": " << resumed.err;
    for (const std::string key : {"loss", "lr", "grad_norm"}) {
      const std::vector<double> want = Field(a + "/metrics.jsonl", key);
      const std::vector<double> got = Field(b + "/metrics.jsonl", key);
      ASSERT_EQ(want.size(), 8u) << strategy << " " << key;
      ASSERT_EQ(got.size(), 4u) << strategy << " " << key;
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(got[i], want[4 + i]) << strategy << " " << key;
      }
    }
    EXPECT_EQ(ReadFile(b + "/model.pt"), ReadFile(a + "/model.pt")) << strategy;
  }
}

}  // namespace
}  // namespace strata::launch
