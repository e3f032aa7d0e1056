// Exact resume with dropout on, through the train binary in fresh processes
// (2 ranks): a run resumed from its step-4 checkpoint continues bitwise as
// the uninterrupted run — every metrics line's loss, lr and grad norm and the
// final model.pt's bytes — for every checkpoint format, sync and async saves,
// under ddp, zero2 and fsdp; every rank's own default-generator state is
// restored (launch/train/generator_state.h); and a rank SIGKILLed in the middle
// of a save leaves the previous checkpoint, from which the resume is bitwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "checkpoint/contents.h"
#include "launch/testing/run_output.h"
#include "launch/testing/train_runs.h"

namespace strata::launch {
namespace {

using ::strata::checkpoint::Bytes;
using ::strata::checkpoint::NamedValues;
using ::strata::launch::testing::CheckpointExtras;
using ::strata::launch::testing::DropoutRunArgs;
using ::strata::launch::testing::KillRankOneDuringStep8Save;
using ::strata::launch::testing::MetricsColumn;
using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::launch::testing::TrainDropoutRun;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;

// One configuration of a 2-rank run.
struct Config {
  std::string strategy;
  std::string format;
  bool async = false;
  // --dropout_test_default_generator: masks from each rank's generator.
  bool default_generator = false;

  std::string Name() const {
    return absl::StrCat(strategy, "_", format, async ? "_async" : "_sync",
                        default_generator ? "_generator" : "");
  }
  std::vector<std::string> Flags() const {
    std::vector<std::string> flags = {"--nproc=2", "--strategy=" + strategy,
                                      "--ckpt_format=" + format};
    if (async) flags.push_back("--async_save");
    if (default_generator) flags.push_back("--dropout_test_default_generator");
    return flags;
  }
};

std::string CheckpointPath(const std::string& run_dir, const Config& config,
                           int step) {
  return absl::StrCat(run_dir, "/checkpoints/step_0000000", step,
                      config.format == "full" ? ".pth" : "");
}

// The output directory of the uninterrupted 8-step run of `config`, trained
// on first use (once per test process).
std::string Uninterrupted(const Config& config) {
  static auto* done = new std::map<std::string, std::string>;
  auto it = done->find(config.Name());
  if (it != done->end()) return it->second;
  const std::string dir = TempDir("whole_" + config.Name());
  RunResult run = TrainDropoutRun(dir, config.Flags());
  EXPECT_EQ(run.exit_code, 0) << config.Name() << ": " << run.err;
  (*done)[config.Name()] = dir;
  return dir;
}

// The generator-state extras ("generator.cpu...") of a checkpoint.
std::map<std::string, std::string> GeneratorStates(const std::string& path) {
  std::map<std::string, std::string> states;
  for (const auto& [key, value] : CheckpointExtras(path)) {
    if (key.rfind("generator.cpu", 0) != 0) continue;
    const Bytes* b = std::get_if<Bytes>(&value);
    EXPECT_NE(b, nullptr) << path << " " << key;
    if (b != nullptr) states[key] = b->data;
  }
  return states;
}

// `resumed` (trained from step 4 to 8) continues `whole` bitwise: metrics
// lines 5..8, model.pt, and every rank's generator state at step 8.
void ExpectBitwiseContinuation(const std::string& whole,
                               const std::string& resumed,
                               const Config& config) {
  for (const std::string key : {"loss", "lr", "grad_norm"}) {
    const std::vector<double> want =
        MetricsColumn(whole + "/metrics.jsonl", key);
    const std::vector<double> got =
        MetricsColumn(resumed + "/metrics.jsonl", key);
    ASSERT_EQ(want.size(), 8u) << config.Name() << " " << key;
    ASSERT_EQ(got.size(), 4u) << config.Name() << " " << key;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(got[i], want[4 + i])
          << config.Name() << " " << key << " step " << 5 + i;
    }
  }
  const std::string model = ReadFile(whole + "/model.pt");
  EXPECT_FALSE(model.empty()) << config.Name();
  EXPECT_EQ(ReadFile(resumed + "/model.pt"), model) << config.Name();
  const auto want = GeneratorStates(CheckpointPath(whole, config, 8));
  EXPECT_EQ(want.size(), 2u) << config.Name() << ": one state per rank";
  EXPECT_EQ(GeneratorStates(CheckpointPath(resumed, config, 8)), want)
      << config.Name();
}

class DropoutResumeTest : public ::testing::TestWithParam<Config> {};

TEST_P(DropoutResumeTest, TwoRankResumeIsBitwiseExact) {
  const Config& config = GetParam();
  const std::string whole = Uninterrupted(config);
  const std::string resumed = TempDir("resumed_" + config.Name());
  std::vector<std::string> flags = config.Flags();
  flags.push_back("--resume=" + CheckpointPath(whole, config, 4));
  RunResult run = TrainDropoutRun(resumed, flags);
  ASSERT_EQ(run.exit_code, 0) << config.Name() << ": " << run.err;
  ExpectBitwiseContinuation(whole, resumed, config);
}

// Every format with sync and async saves once, every strategy twice.
INSTANTIATE_TEST_SUITE_P(FormatsAndStrategies, DropoutResumeTest,
                         ::testing::Values(Config{"ddp", "sharded", false},
                                           Config{"ddp", "full", true},
                                           Config{"zero2", "local", false},
                                           Config{"zero2", "sharded", true},
                                           Config{"fsdp", "full", false},
                                           Config{"fsdp", "local", true},
                                           Config{"fsdp", "dcp", false},
                                           Config{"zero2", "dcp", true}),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return info.param.Name();
                         });

// Dropout masks from each rank's default CPU generator (seeded per rank):
// the ranks' states differ, training advances them, and the resumed run is
// bitwise only if every rank restores its own state (a rank restoring
// another's would draw that rank's masks).
TEST(DropoutResumeGeneratorTest, EveryRankRestoresItsOwnGeneratorState) {
  const Config config{"ddp", "sharded", false, /*default_generator=*/true};
  const std::string whole = Uninterrupted(config);
  const auto at4 = GeneratorStates(CheckpointPath(whole, config, 4));
  const auto at8 = GeneratorStates(CheckpointPath(whole, config, 8));
  ASSERT_EQ(at4.size(), 2u);
  EXPECT_NE(at4.at("generator.cpu.rank0"), at4.at("generator.cpu.rank1"));
  EXPECT_NE(at8.at("generator.cpu.rank0"), at4.at("generator.cpu.rank0"))
      << "dropout should draw from rank 0's generator";
  EXPECT_NE(at8.at("generator.cpu.rank1"), at4.at("generator.cpu.rank1"))
      << "dropout should draw from rank 1's generator";

  const std::string resumed = TempDir("resumed_" + config.Name());
  std::vector<std::string> flags = config.Flags();
  flags.push_back("--resume=" + CheckpointPath(whole, config, 4));
  RunResult run = TrainDropoutRun(resumed, flags);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectBitwiseContinuation(whole, resumed, config);
}

// A 2-rank checkpoint resumed by one process: rank 0's state is restored,
// rank 1's is reported unused.
TEST(DropoutResumeGeneratorTest, FewerRanksReportTheUnusedStates) {
  const Config config{"ddp", "sharded", false};
  const std::string whole = Uninterrupted(config);
  RunResult run = TrainDropoutRun(
      TempDir("resumed_single"),
      {"--strategy=single", "--resume=" + CheckpointPath(whole, config, 4)});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("rank 0: the generator states of 1 saved "
                                 "rank(s) (1) are unused: this job has 1 "
                                 "rank(s)"));
}

// Two ddp ranks started by hand, saving in `format`; every save pauses
// after writing its data and before the commit (the test hook). Rank 1 is
// SIGKILLed while the step-8 save is paused: `latest` still names the
// step-4 checkpoint, and resuming from it (--resume=auto) continues bitwise
// as the uninterrupted run.
void KillMidSaveThenResumeIsBitwise(const std::string& format) {
  const Config config{"ddp", format, false};
  const std::string a = TempDir("killed_" + format);
  const std::string ckpt = a + "/checkpoints";
  const std::vector<std::string> args = DropoutRunArgs(
      a, {"--strategy=ddp", "--ckpt_format=" + format,
          "--ckpt_test_pause_ms=2000", "--collective_timeout_s=20"});
  ASSERT_TRUE(KillRankOneDuringStep8Save(args, ckpt, absl::Seconds(90)));
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/step_00000008"));
  EXPECT_EQ(ReadFile(ckpt + "/latest"), "step_00000004\n");

  const std::string resumed = TempDir("killed_resumed_" + format);
  std::vector<std::string> flags = config.Flags();
  flags.push_back("--resume=auto");
  flags.push_back("--ckpt_dir=" + ckpt);
  RunResult run = TrainDropoutRun(resumed, flags);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("resumed from " + ckpt + "/step_00000004 at step 4"));
  // The resumed run saved its step-8 checkpoint under `ckpt`.
  const std::string whole = Uninterrupted(config);
  for (const std::string key : {"loss", "lr", "grad_norm"}) {
    const std::vector<double> want =
        MetricsColumn(whole + "/metrics.jsonl", key);
    const std::vector<double> got =
        MetricsColumn(resumed + "/metrics.jsonl", key);
    ASSERT_EQ(want.size(), 8u) << key;
    ASSERT_EQ(got.size(), 4u) << key;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[4 + i]) << key;
  }
  EXPECT_EQ(ReadFile(resumed + "/model.pt"), ReadFile(whole + "/model.pt"));
  EXPECT_EQ(GeneratorStates(ckpt + "/step_00000008"),
            GeneratorStates(CheckpointPath(whole, config, 8)));
}

TEST(DropoutResumeKillTest, SigkillMidSaveThenResumeIsBitwiseExact) {
  KillMidSaveThenResumeIsBitwise("sharded");
}

// The same with --ckpt_format=dcp: rank 1 killed after its __1_0.distcp of
// the step-8 save is written, before `.metadata` is.
TEST(DropoutResumeKillTest, SigkillMidDcpSaveThenResumeIsBitwiseExact) {
  KillMidSaveThenResumeIsBitwise("dcp");
}

}  // namespace
}  // namespace strata::launch
