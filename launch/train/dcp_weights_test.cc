// PyTorch torch.distributed.checkpoint (DCP) directories through the
// binaries, in fresh processes: weights that PyTorch's own dcp.save wrote at
// 2 Gloo ranks (checkpoint/dcp/testdata/dcp_save.py) start a `train` run
// (--load_weights) and feed `strata_generate` exactly as the same weights in
// a plain state dict do; --resume of its {"model", "optim"} layout loads
// the optimizer state too. Needs PyTorch >= 2.4 (DTensor, dcp.save):
// skipped, and counted as skipped, on older versions. And train's own
// --ckpt_format=dcp resumes bitwise (no Python).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"
#include "serialization/testing/python_runner.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::MetricsColumn;
using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;

// checkpoint/dcp/testdata/dcp_save.py with `args`, its output in a log.
absl::Status Python(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      RunfilePath("checkpoint/dcp/testdata/dcp_save.py")};
  argv.insert(argv.end(), args.begin(), args.end());
  return serialization::testing::RunPython(argv, TempDir("dcp_save.log"));
}

// gpt-tiny for `steps` steps, one metrics line per step.
RunResult Train(const std::string& out, int steps,
                std::vector<std::string> more) {
  std::vector<std::string> args = {RunfilePath("launch/train/train"),
                                   "--model=gpt-tiny",
                                   absl::StrCat("--steps=", steps),
                                   "--warmup_steps=1",
                                   "--seq_len=32",
                                   "--markov_tokens=20000",
                                   "--global_batch=4",
                                   "--micro_batch=2",
                                   "--log_interval=1",
                                   "--eval_interval=0",
                                   "--lr=1e-3",
                                   absl::StrCat("--output_dir=", out)};
  args.insert(args.end(), more.begin(), more.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(180));
}

class DcpWeightsTest : public ::testing::Test {
 protected:
  // One trained model's weights, as Strata's model.pt (a state dict) and as
  // PyTorch's dcp.save wrote them at 2 ranks, each tensor sharded on dim 0:
  // <dcp>/flat (the model's keys) and <dcp>/nested ({"model": ...,
  // "optim": ...}, get_state_dict's layout).
  static void SetUpTestSuite() {
    skip_ = new std::string(serialization::testing::WhyTorchBelow(
        2, 4, "DTensor, dcp.save", TempDir("torch_version.log")));
    if (!skip_->empty()) return;
    const std::string trained = TempDir("dcp_trained");
    RunResult r = Train(trained, 4, {});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    weights_ = new std::string(trained + "/model.pt");
    dcp_ = new std::string(TempDir("dcp_weights"));
    const absl::Status saved = Python({"weights", *weights_, *dcp_});
    ASSERT_TRUE(saved.ok()) << saved;
  }

  void SetUp() override {
    if (!skip_->empty()) GTEST_SKIP() << *skip_;
    ASSERT_NE(dcp_, nullptr) << "the suite's set-up failed";
  }

  static std::string* skip_;
  static std::string* weights_;
  static std::string* dcp_;
};

std::string* DcpWeightsTest::skip_ = nullptr;
std::string* DcpWeightsTest::weights_ = nullptr;
std::string* DcpWeightsTest::dcp_ = nullptr;

// The same fp32 bytes reach the model whichever file holds them, so the runs
// are bitwise equal: 2 ranks under FSDP from both DCP layouts, and one
// process from the flat one, against the state dict under the same setup.
TEST_F(DcpWeightsTest, TrainLoadWeightsTrainsAsTheSameStateDict) {
  for (const std::vector<std::string>& setup :
       std::vector<std::vector<std::string>>{{"--nproc=2", "--strategy=fsdp"},
                                             {}}) {
    const std::string from_state_dict = TempDir("dcp_sd");
    std::vector<std::string> args = setup;
    args.push_back("--load_weights=" + *weights_);
    RunResult r = Train(from_state_dict, 3, args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<double> want =
        MetricsColumn(from_state_dict + "/metrics.jsonl", "loss");
    ASSERT_EQ(want.size(), 3u);
    for (const std::string layout : {"flat", "nested"}) {
      if (setup.empty() && layout == std::string("nested")) continue;
      const std::string out = TempDir(absl::StrCat("dcp_", layout));
      args = setup;
      args.push_back("--load_weights=" + *dcp_ + "/" + layout);
      r = Train(out, 3, args);
      ASSERT_EQ(r.exit_code, 0) << layout << ": " << r.err;
      EXPECT_EQ(MetricsColumn(out + "/metrics.jsonl", "loss"), want)
          << layout << " " << absl::StrJoin(setup, " ");
      EXPECT_EQ(ReadFile(out + "/model.pt"),
                ReadFile(from_state_dict + "/model.pt"))
          << layout;
    }
  }
}

TEST_F(DcpWeightsTest, GenerateFromDcpMatchesTheStateDict) {
  std::vector<std::string> outputs;
  for (const std::string& weights :
       {*weights_, *dcp_ + "/nested", *dcp_ + "/flat"}) {
    RunResult r = ::strata::testing::Run(
        {RunfilePath("launch/generate/strata_generate"), "--model=gpt-tiny",
         "--load_weights=" + weights, "--prompt_tokens=7,8,9",
         "--max_new_tokens=12", "--temperature=0"},
        {}, absl::Seconds(60));
    ASSERT_EQ(r.exit_code, 0) << weights << ": " << r.err;
    outputs.push_back(r.out);
  }
  EXPECT_EQ(outputs[0].rfind("7,8,9,", 0), 0u) << outputs[0];
  EXPECT_EQ(outputs[1], outputs[0]);
  EXPECT_EQ(outputs[2], outputs[0]);
}

// --resume of PyTorch's nested layout (AdamW-like moments and a step of 3
// per parameter beside the weights) loads the optimizer too: the run goes
// on from step 3 under FSDP at 2 ranks (one Strata step per PyTorch
// optimizer step; no sampler state, so the data position of step 3).
TEST_F(DcpWeightsTest, ResumeFromPyTorchDcpGoesOnFromItsOptimizerStep) {
  const std::string dir = *dcp_ + "/nested";
  RunResult r = Train(TempDir("dcp_resume"), 5,
                      {"--nproc=2", "--strategy=fsdp", "--resume=" + dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("resumed from " + dir + " at step 3"));
  EXPECT_EQ(
      MetricsColumn(TempDir("dcp_resume") + "/metrics.jsonl", "loss").size(),
      2u);
}

// The flat layout holds no optimizer state: --resume lists what is missing
// and says how to load the weights alone.
TEST_F(DcpWeightsTest, ResumeFromWeightsOnlyDcpNamesTheMissingState) {
  const std::string dir = *dcp_ + "/flat";
  RunResult r = Train(TempDir("dcp_resume_flat"), 3, {"--resume=" + dir});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(dir));
  EXPECT_THAT(r.err, HasSubstr("exp_avg"));
}

// --ckpt_format=dcp in training: a run resumed from its step-2 DCP
// checkpoint (same world size and strategy) continues bitwise as the
// uninterrupted run. Needs no Python.
TEST(DcpTrainTest, ResumeFromItsOwnDcpCheckpointIsBitwise) {
  const std::string full = TempDir("dcp_full_run");
  RunResult r = Train(
      full, 4,
      {"--nproc=2", "--strategy=fsdp", "--ckpt_format=dcp", "--save_every=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string step2 = full + "/checkpoints/step_00000002";
  EXPECT_EQ(ReadFile(step2 + "/.metadata").empty(), false);
  const std::string resumed = TempDir("dcp_resumed_run");
  r = Train(resumed, 4, {"--nproc=2", "--strategy=fsdp", "--resume=" + step2});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> want =
      MetricsColumn(full + "/metrics.jsonl", "loss");
  const std::vector<double> got =
      MetricsColumn(resumed + "/metrics.jsonl", "loss");
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], want[2]);
  EXPECT_EQ(got[1], want[3]);
  EXPECT_EQ(ReadFile(resumed + "/model.pt"), ReadFile(full + "/model.pt"));
}

}  // namespace
}  // namespace strata::launch
