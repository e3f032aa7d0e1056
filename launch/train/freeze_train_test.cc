// --freeze and --ckpt_exclude_frozen_parameters through the train binary in
// fresh processes at 2 ranks (ZeRO-2): the frozen parameters are named at
// start-up and left out of every checkpoint (a strict load of one names them
// missing), a run resumed from such a checkpoint continues bitwise (the
// frozen parameters keep their initial values, which the seed gives), and
// bad flags are errors naming them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
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

// 4 steps of gpt-tiny at 2 ranks with wpe and the first block's norm gains
// frozen, a metrics line per step, under `out`; then `more`.
RunResult Train(const std::string& out, const std::vector<std::string>& more) {
  std::vector<std::string> args = {RunfilePath("launch/train/train"),
                                   "--nproc=2",
                                   "--strategy=zero2",
                                   "--steps=4",
                                   "--warmup_steps=1",
                                   "--seq_len=32",
                                   "--global_batch=4",
                                   "--markov_tokens=20000",
                                   "--log_interval=1",
                                   "--eval_interval=0",
                                   "--threads=1",
                                   "--output_dir=" + out};
  args.insert(args.end(), more.begin(), more.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(240));
}

const std::vector<std::string> kFreeze = {"--freeze=^wpe\\.|^blocks\\.0\\.ln_",
                                          "--ckpt_exclude_frozen_parameters"};

std::vector<std::string> With(std::vector<std::string> flags,
                              const std::vector<std::string>& more) {
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

TEST(FreezeTrainTest, CheckpointsLeaveFrozenParametersOutAndResumeBitwise) {
  const std::string whole = TempDir("freeze_whole");
  const RunResult first = Train(whole, With(kFreeze, {"--save_every=2"}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.err,
              HasSubstr("--freeze: 5 parameters (8448 elements) frozen: "
                        "wpe.weight, blocks.0.ln_1.weight, blocks.0.ln_1.bias, "
                        "blocks.0.ln_2.weight, blocks.0.ln_2.bias"));

  // The step-2 checkpoint lacks them: a strict load names them missing.
  const std::string step2 = whole + "/checkpoints/step_00000002";
  const RunResult strict = Train(TempDir("freeze_strict"),
                                 {"--eval_only", "--load_weights=" + step2});
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_THAT(strict.err, HasSubstr("missing keys: blocks.0.ln_1.bias"));
  EXPECT_THAT(strict.err, HasSubstr("wpe.weight"));

  const std::string part = TempDir("freeze_part");
  const RunResult resumed = Train(part, With(kFreeze, {"--resume=" + step2}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  for (const char* key : {"loss", "lr", "grad_norm"}) {
    const std::vector<double> want =
        MetricsColumn(whole + "/metrics.jsonl", key);
    ASSERT_EQ(want.size(), 4u) << key;
    EXPECT_EQ(MetricsColumn(part + "/metrics.jsonl", key),
              std::vector<double>(want.begin() + 2, want.end()))
        << key;
  }
  const std::string model = ReadFile(whole + "/model.pt");
  EXPECT_FALSE(model.empty());
  EXPECT_EQ(ReadFile(part + "/model.pt"), model);
}

TEST(FreezeTrainTest, ARegexMatchingNothingIsNamed) {
  const RunResult run =
      Train(TempDir("freeze_nothing"), {"--freeze=^decoder\\."});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("--freeze='^decoder\\.' matches no "
                                 "parameter of the model"));
}

TEST(FreezeTrainTest, ExcludingFrozenParametersNeedsFreeze) {
  const RunResult run = Train(TempDir("freeze_exclude_alone"),
                              {"--ckpt_exclude_frozen_parameters"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err,
              HasSubstr("--ckpt_exclude_frozen_parameters: needs --freeze"));
}

TEST(FreezeTrainTest, AnInvalidRegexIsNamed) {
  const RunResult run = Train(TempDir("freeze_invalid"), {"--freeze=("});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("--freeze: '(' is not a valid regex"));
}

}  // namespace
}  // namespace strata::launch
