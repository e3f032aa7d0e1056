#include "launch/train/train_flags.h"

#include <gflags/gflags.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/time/time.h"
#include "base/testing/status_matchers.h"
#include "base/testing/subprocess.h"
#include "launch/config/option_kinds.h"
#include "launch/config/train_flag_table.h"
#include "strategies/mixed_precision.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

comm::EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](
             const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void SetFlag(const char* name, const char* value) {
  ASSERT_FALSE(gflags::SetCommandLineOption(name, value).empty()) << name;
}

TEST(TrainOptionsFromFlagsTest, DefaultFlagsGiveDefaultOptions) {
  gflags::FlagSaver saver;
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  const TrainOptions defaults;
  EXPECT_EQ(o.model, defaults.model);
  EXPECT_EQ(o.data, DataKind::kMarkov);
  EXPECT_EQ(o.schedule.kind, optim::LrScheduleKind::kCosine);
  EXPECT_EQ(o.checkpoint.format, checkpoint::Format::kSharded);
  EXPECT_EQ(o.precision, Precision::kFp32);
  EXPECT_EQ(o.steps, defaults.steps);
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.test_hooks.ckpt_test_pause_ms, 0);
}

// Every line of the table is a flag of this binary, defined in
// train_flags.cc (so --help and the flags line list it), whose default is its
// field's; test hooks are hidden from --help.
struct CheckRegistered {
  template <class T>
  void operator()(const char* name, T* field, const char*) {
    Check(name, *field, false);
  }
  template <class T>
  void TestHook(const char* name, T* field, const char*) {
    Check(name, *field, true);
  }
  template <class T>
  static void Check(const char* name, const T& value, bool hidden) {
    gflags::CommandLineFlagInfo info;
    ASSERT_TRUE(gflags::GetCommandLineFlagInfo(name, &info)) << name;
    EXPECT_THAT(info.filename, HasSubstr("launch/train/train_flags.cc"))
        << name;
    EXPECT_EQ(info.description == GFLAGS_NAMESPACE::kStrippedFlagHelp, hidden)
        << name;
    std::string expected;
    if constexpr (std::is_same_v<T, std::string>) {
      expected = value;
    } else if constexpr (std::is_same_v<T, bool>) {
      expected = value ? "true" : "false";
    } else if constexpr (std::is_arithmetic_v<T>) {
      expected = info.default_value;  // Compared as numbers below.
      EXPECT_EQ(std::stod(info.default_value), static_cast<double>(value))
          << name;
    } else {
      expected = FlagSpelling<T>::Format(value);
    }
    EXPECT_EQ(info.default_value, expected) << name;
  }
};

TEST(TrainFlagsTest, EveryTableLineIsAFlagWithItsFieldsDefault) {
  CheckRegistered check;
  TrainOptions defaults = TrainFlagDefaults();
  VisitTrainFlags(defaults, check);
}

TEST(TrainOptionsFromFlagsTest, ParsesTheEnumeratedFlags) {
  gflags::FlagSaver saver;
  SetFlag("data", "uint16");
  SetFlag("lr_schedule", "step");
  SetFlag("ckpt_format", "full");
  SetFlag("precision", "bf16");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_EQ(o.data, DataKind::kUint16);
  EXPECT_EQ(o.schedule.kind, optim::LrScheduleKind::kStep);
  EXPECT_EQ(o.checkpoint.format, checkpoint::Format::kFull);
  EXPECT_EQ(o.precision, Precision::kBf16);
}

// Moved from trainer_test (BadOptionsNameTheFlag): --data and --precision are
// now rejected when the flags are read.
TEST(TrainOptionsFromFlagsTest, UnknownDataNamesTheFlag) {
  gflags::FlagSaver saver;
  SetFlag("data", "parquet");
  EXPECT_THAT(TrainOptionsFromFlags(FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--data: must be markov, bytes")));
}

TEST(TrainOptionsFromFlagsTest, UnknownStrategyNamesTheFlag) {
  gflags::FlagSaver saver;
  SetFlag("strategy", "zero9");
  EXPECT_THAT(
      TrainOptionsFromFlags(FakeEnv({})),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--strategy")));
}

TEST(TrainOptionsFromFlagsTest, ParsesTheOptimizerFlags) {
  gflags::FlagSaver saver;
  SetFlag("optimizer", "sgd");
  SetFlag("momentum", "0.9");
  SetFlag("dampening", "0.25");
  SetFlag("nesterov", "true");
  SetFlag("eps", "1e-6");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_EQ(o.optimizer.kind, strategies::OptimizerKind::kSgd);
  EXPECT_EQ(o.optimizer.sgd.momentum, 0.9);
  EXPECT_EQ(o.optimizer.sgd.dampening, 0.25);
  EXPECT_TRUE(o.optimizer.sgd.nesterov);
  EXPECT_EQ(o.optimizer.adamw.eps, 1e-6);
}

TEST(TrainOptionsFromFlagsTest, UnknownOptimizerNamesTheFlag) {
  gflags::FlagSaver saver;
  SetFlag("optimizer", "lamb");
  EXPECT_THAT(TrainOptionsFromFlags(FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--optimizer must be adamw, adam or sgd, got 'lamb'"));
}

TEST(TrainOptionsFromFlagsTest, StrategyIsTyped) {
  gflags::FlagSaver saver;
  SetFlag("strategy", "zero2");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_EQ(o.strategy.kind, strategies::StrategyKind::kZero2);
}

// The step schedule through the binary: lr = 1e-3 for the warm-up step and
// the 2 steps after it, then halved every 2 steps (metrics line k holds the
// lr of step k - 1).
TEST(TrainBinaryLrScheduleTest, StepScheduleDecaysEveryStepSize) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string out =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/lr_step";
  const ::strata::testing::RunResult run = ::strata::testing::Run(
      {::strata::testing::RunfilePath("launch/train/train"), "--steps=7",
       "--warmup_steps=1", "--lr=1e-3", "--lr_schedule=step",
       "--lr_step_size=2", "--lr_gamma=0.5", "--seq_len=16",
       "--markov_tokens=5000", "--global_batch=2", "--log_interval=1",
       "--eval_interval=0", "--output_dir=" + out},
      {}, absl::Seconds(60));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ifstream metrics(out + "/metrics.jsonl");
  std::vector<double> lrs;
  for (std::string line; std::getline(metrics, line);) {
    const size_t at = line.find("\"lr\": ");
    ASSERT_NE(at, std::string::npos) << line;
    lrs.push_back(std::stod(line.substr(at + 6)));
  }
  const std::vector<double> want = {1e-3, 1e-3,   1e-3,  5e-4,
                                    5e-4, 2.5e-4, 2.5e-4};
  ASSERT_EQ(lrs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(lrs[i], want[i], want[i] * 1e-3) << "step " << i + 1;
  }
}

TEST(TrainBinaryLrScheduleTest, StepScheduleWithoutStepSizeNamesTheFlag) {
  const ::strata::testing::RunResult run = ::strata::testing::Run(
      {::strata::testing::RunfilePath("launch/train/train"),
       "--lr_schedule=step", "--steps=5", "--warmup_steps=1"},
      {}, absl::Seconds(60));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("--lr_step_size"));
}

TEST(TrainOptionsFromFlagsTest, UnknownPrecisionNamesTheFlag) {
  gflags::FlagSaver saver;
  SetFlag("precision", "fp8");
  EXPECT_THAT(
      TrainOptionsFromFlags(FakeEnv({})),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--precision")));
}

TEST(TrainOptionsFromFlagsTest, ZeroThreadsFollowOmpNumThreads) {
  gflags::FlagSaver saver;
  SetFlag("threads", "0");
  ASSERT_OK_AND_ASSIGN(
      const TrainOptions o,
      TrainOptionsFromFlags(FakeEnv({{"OMP_NUM_THREADS", "3"}})));
  EXPECT_EQ(o.threads, 3);
}

TEST(TrainOptionsFromFlagsTest, EmptyOutputDirIsUnderTheBazelRunDirectory) {
  gflags::FlagSaver saver;
  ASSERT_OK_AND_ASSIGN(
      const TrainOptions o,
      TrainOptionsFromFlags(FakeEnv({{"BUILD_WORKING_DIRECTORY", "/work"}})));
  EXPECT_EQ(o.output_dir, "/work/out/train");
}

TEST(TrainOptionsFromFlagsTest, CheckpointUnitsAreSplitAndTrimmed) {
  gflags::FlagSaver saver;
  SetFlag("checkpoint_units", "GPTBlock, blocks.3");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_THAT(o.strategy.checkpoint_units, ElementsAre("GPTBlock", "blocks.3"));
}

TEST(TrainOptionsFromFlagsTest, ParsesLossChunkTokens) {
  gflags::FlagSaver saver;
  SetFlag("loss_chunk_tokens", "512");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_EQ(o.loss_chunk_tokens, 512);
}

TEST(TrainOptionsFromFlagsTest, TestHookFlagsStillParse) {
  gflags::FlagSaver saver;
  SetFlag("ckpt_test_pause_ms", "250");
  SetFlag("dropout_test_default_generator", "true");
  SetFlag("test_kill_at", "forward:3,save:5");
  SetFlag("test_kill_rank", "1,0");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_EQ(o.test_hooks.ckpt_test_pause_ms, 250);
  EXPECT_TRUE(o.test_hooks.dropout_test_default_generator);
  EXPECT_EQ(o.test_hooks.test_kill_at, "forward:3,save:5");
  EXPECT_EQ(o.test_hooks.test_kill_rank, "1,0");
}

TEST(TrainFlagsSummaryTest, ListsEveryTrainFlagWithItsValue) {
  gflags::FlagSaver saver;
  SetFlag("lr", "0.01");
  const std::string summary = TrainFlagsSummary();
  EXPECT_THAT(summary, HasSubstr(" --lr=0.01 "));
  EXPECT_THAT(summary, HasSubstr(" --model=gpt-tiny "));
  EXPECT_THAT(summary, HasSubstr(" --ckpt_test_pause_ms=0 "));
  EXPECT_THAT(summary, HasSubstr(" --nproc=1 "));
  EXPECT_THAT(summary, HasSubstr(" --max_restarts=0 "));
  EXPECT_THAT(summary, HasSubstr(" --test_kill_at= "));
}

TEST(TrainBinaryHelpTest, HelpListsTheFlagsButNotTheTestHooks) {
  const ::strata::testing::RunResult r = ::strata::testing::Run(
      {::strata::testing::RunfilePath("launch/train/train"), "--help"});
  const std::string help = r.out + r.err;
  EXPECT_THAT(help, HasSubstr("-ckpt_dir"));
  EXPECT_THAT(help, HasSubstr("-nproc"));
  EXPECT_THAT(help, HasSubstr("-max_restarts"));
  EXPECT_THAT(help, Not(HasSubstr("ckpt_test_pause_ms")));
  EXPECT_THAT(help, Not(HasSubstr("test_kill_at")));
  EXPECT_THAT(help, Not(HasSubstr("test_kill_rank")));
  EXPECT_THAT(help, Not(HasSubstr("dropout_test_default_generator")));
  // Only train's own flags: none of glog's or LibTorch's (--helpfull).
  EXPECT_THAT(help, Not(HasSubstr("-logtostderr")));
  EXPECT_THAT(help, Not(HasSubstr("caffe2_")));
}

// A DeepSpeed config written under TEST_TMPDIR; returns its path.
std::string WriteConfig(const std::string& name, const std::string& json) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << json;
  return path;
}

TEST(DeepSpeedConfigFlagTest, AppliesTheConfigAndExplicitFlagsWin) {
  gflags::FlagSaver saver;
  SetFlag("deepspeed_config",
          WriteConfig("applied.json", R"({"train_batch_size": 8,
              "gradient_clipping": 0.5, "zero_optimization": {"stage": 2}})")
              .c_str());
  SetFlag("grad_clip", "2");
  std::vector<std::string> notes;
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({}), &notes));
  EXPECT_EQ(o.strategy.kind, strategies::StrategyKind::kZero2);
  EXPECT_EQ(o.global_batch, 8);
  EXPECT_EQ(o.optimizer.grad_clip, 2.0);
  EXPECT_THAT(notes, Contains(HasSubstr("--deepspeed_config: --grad_clip=2 "
                                        "overrides gradient_clipping=0.5 from "
                                        "/")));
}

TEST(DeepSpeedConfigFlagTest, TheWorldIsNprocBeforeTheRanksStart) {
  gflags::FlagSaver saver;
  SetFlag("deepspeed_config",
          WriteConfig("nproc.json", R"({"train_batch_size": 8})").c_str());
  SetFlag("nproc", "2");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_EQ(o.micro_batch, 4);  // 8 / 2 ranks.
  EXPECT_EQ(o.strategy.kind, strategies::StrategyKind::kDdp);
}

TEST(DeepSpeedConfigFlagTest, TheWorldOfALaunchedRankIsTheLaunchers) {
  gflags::FlagSaver saver;
  SetFlag("deepspeed_config",
          WriteConfig("launched.json", R"({"train_batch_size": 8})").c_str());
  ASSERT_OK_AND_ASSIGN(
      const TrainOptions o,
      TrainOptionsFromFlags(FakeEnv({{"RANK", "1"},
                                     {"WORLD_SIZE", "4"},
                                     {"MASTER_ADDR", "127.0.0.1"},
                                     {"MASTER_PORT", "29500"}})));
  EXPECT_EQ(o.micro_batch, 2);  // 8 / 4 ranks.
}

TEST(DeepSpeedConfigFlagTest, AMissingFileNamesTheFlagAndThePath) {
  gflags::FlagSaver saver;
  SetFlag("deepspeed_config", "/nonexistent/ds.json");
  EXPECT_THAT(TrainOptionsFromFlags(FakeEnv({})),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("--deepspeed_config=/nonexistent/ds.json: "
                                 "cannot open '/nonexistent/ds.json'")));
}

TEST(DeepSpeedConfigFlagTest, ARelativePathIsAlsoLookedUpWhereBazelRanFrom) {
  gflags::FlagSaver saver;
  const std::string path = WriteConfig("relative.json", R"({
      "zero_optimization": {"stage": 1}})");
  const std::string dir = path.substr(0, path.rfind('/'));
  SetFlag("deepspeed_config", "relative.json");
  ASSERT_OK_AND_ASSIGN(
      const TrainOptions o,
      TrainOptionsFromFlags(FakeEnv({{"BUILD_WORKING_DIRECTORY", dir}})));
  EXPECT_EQ(o.strategy.kind, strategies::StrategyKind::kZero1);
}

TEST(DeepSpeedConfigFlagTest, ARejectedKeyNamesTheFlagTheFileAndTheKey) {
  gflags::FlagSaver saver;
  const std::string path =
      WriteConfig("rejected.json", R"({"zero_optimization": {"stage": 4}})");
  SetFlag("deepspeed_config", path.c_str());
  EXPECT_THAT(TrainOptionsFromFlags(FakeEnv({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--deepspeed_config=" + path + ": " + path +
                                 ": zero_optimization.stage: 4 is not one of "
                                 "0, 1, 2, 3")));
}

TEST(TrainOptionsFromFlagsTest, ReadsTheScheduleAndBreakdownFlags) {
  gflags::FlagSaver saver;
  SetFlag("lr_schedule", "warmup_cosine_lr");
  SetFlag("lr_total_steps", "500");
  SetFlag("lr_warmup_type", "linear");
  SetFlag("lr_warmup_min_ratio", "0.1");
  SetFlag("lr_cos_min_ratio", "0.01");
  SetFlag("wall_clock_breakdown", "true");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o,
                       TrainOptionsFromFlags(FakeEnv({})));
  EXPECT_EQ(o.schedule.kind, optim::LrScheduleKind::kWarmupCosineLr);
  EXPECT_EQ(o.schedule.total_steps, 500);
  EXPECT_EQ(o.schedule.warmup_type, "linear");
  EXPECT_EQ(o.schedule.warmup_min_ratio, 0.1);
  EXPECT_EQ(o.schedule.min_ratio, 0.01);
  EXPECT_TRUE(o.wall_clock_breakdown);
}

// Every DeepSpeed config under launch/train/configs/ loads through
// --deepspeed_config, at 2 ranks (the batch sizes of some need them), into
// TrainOptions that pass ValidateTrainOptions. The runs themselves are
// deepspeed_train_test's.
TEST(ConfigsTest, EveryDeepSpeedConfigLoadsIntoValidOptions) {
  const std::string dir =
      ::strata::testing::RunfilePath("launch/train/configs");
  std::map<std::string, TrainOptions> loaded;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    gflags::FlagSaver saver;
    const std::string name = entry.path().filename().string();
    SetFlag("deepspeed_config", entry.path().c_str());
    SetFlag("nproc", "2");
    absl::StatusOr<TrainOptions> o = TrainOptionsFromFlags(FakeEnv({}));
    ASSERT_TRUE(o.ok()) << name << ": " << o.status();
    const absl::Status valid = ValidateTrainOptions(*o);
    if (o->precision == Precision::kFp16 &&
        !strategies::CheckCpuComputeDtype(at::kHalf).ok()) {
      // LibTorch 1.13: fp16 is refused up front, naming the flag.
      EXPECT_THAT(valid.message(), HasSubstr("--precision: fp16: ")) << name;
    } else {
      EXPECT_TRUE(valid.ok()) << name << ": " << valid;
    }
    loaded[name] = *o;
  }
  ASSERT_EQ(loaded.size(), 3u) << "a new config: check its values below";
  const TrainOptions& fp16 = loaded["gpt_tiny_fp16_adam.json"];
  EXPECT_EQ(fp16.strategy.kind, strategies::StrategyKind::kZero1);
  EXPECT_EQ(fp16.precision, Precision::kFp16);
  EXPECT_EQ(fp16.strategy.mixed_precision.param_dtype, at::kHalf);
  EXPECT_EQ(fp16.optimizer.kind, strategies::OptimizerKind::kAdam);
  EXPECT_EQ(fp16.loss_scale, 0);
  EXPECT_EQ(fp16.loss_scale_initial_power, 16);
  EXPECT_EQ(fp16.schedule.kind, optim::LrScheduleKind::kWarmupLr);
  const TrainOptions& zero2 = loaded["gpt_tiny_zero2_bf16.json"];
  EXPECT_EQ(zero2.strategy.kind, strategies::StrategyKind::kZero2);
  EXPECT_EQ(zero2.strategy.mixed_precision.param_dtype, at::kBFloat16);
  EXPECT_EQ(zero2.schedule.kind, optim::LrScheduleKind::kWarmupCosineLr);
  const TrainOptions& zero3 = loaded["gpt_tiny_zero3_offload.json"];
  EXPECT_EQ(zero3.strategy.kind, strategies::StrategyKind::kFsdp);
  EXPECT_TRUE(zero3.strategy.fsdp.cpu_offload);
  EXPECT_THAT(zero3.strategy.checkpoint_units, ElementsAre("GPTBlock"));
  EXPECT_EQ(zero3.schedule.kind, optim::LrScheduleKind::kWarmupDecayLr);
}

// Every experiment under launch/train/configs/ loads as train_main loads it
// (gflags' --flagfile, nested flagfiles included) into TrainOptions that
// pass ValidateTrainOptions. Validation only: the experiments are 200 to
// 1000 steps (gpt-small50m on a 20M-token corpus), too long to run here; the
// train binary's own tests run the model and data kinds they use.
TEST(ConfigsTest, EveryFlagfileLoadsIntoValidOptions) {
  const std::string dir =
      ::strata::testing::RunfilePath("launch/train/configs");
  std::map<std::string, TrainOptions> loaded;
  // Whether --warmup_steps was set (default.flags sets it to its default
  // value, so only this tells that gpt_tiny_bf16 read its nested file).
  std::map<std::string, bool> warmup_set;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".flags") continue;
    gflags::FlagSaver saver;
    const std::string name = entry.path().filename().string();
    // Nested --flagfile=launch/train/configs/... lines resolve against the
    // working directory, the runfiles root here as in `bazel run`.
    ASSERT_TRUE(gflags::ReadFromFlagsFile(entry.path().string(), nullptr,
                                          /*errors_are_fatal=*/false))
        << name;
    absl::StatusOr<TrainOptions> o = TrainOptionsFromFlags(FakeEnv({}));
    ASSERT_TRUE(o.ok()) << name << ": " << o.status();
    EXPECT_TRUE(ValidateTrainOptions(*o).ok())
        << name << ": " << ValidateTrainOptions(*o);
    loaded[name] = *o;
    warmup_set[name] =
        !gflags::GetCommandLineFlagInfoOrDie("warmup_steps").is_default;
  }
  ASSERT_EQ(loaded.size(), 3u) << "a new config: check its values below";
  // Values from each file (and, for gpt_tiny_bf16, its nested default).
  EXPECT_EQ(loaded["default.flags"].model, "gpt-tiny");
  EXPECT_EQ(loaded["default.flags"].steps, 1000);
  EXPECT_EQ(loaded["default.flags"].schedule.base_lr, 3e-3);
  EXPECT_EQ(loaded["gpt_small50m_markov.flags"].model, "gpt-small50m");
  EXPECT_EQ(loaded["gpt_small50m_markov.flags"].vocab_size, 8192);
  EXPECT_EQ(loaded["gpt_small50m_markov.flags"].micro_batch, 4);
  EXPECT_EQ(loaded["gpt_tiny_bf16.flags"].precision, Precision::kBf16);
  EXPECT_EQ(loaded["gpt_tiny_bf16.flags"].model, "gpt-tiny");
  EXPECT_EQ(loaded["gpt_tiny_bf16.flags"].steps, 1000);
  EXPECT_TRUE(warmup_set["gpt_tiny_bf16.flags"]);
  EXPECT_TRUE(warmup_set["default.flags"]);
}

}  // namespace
}  // namespace strata::launch
