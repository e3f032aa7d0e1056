// --tensorboard_dir through the train binary: the event file's scalars are
// the values of metrics.jsonl, step by step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/testing/status_matchers.h"
#include "base/testing/subprocess.h"
#include "launch/testing/event_file_reader.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::TempDir;
using ::strata::testing::IsOk;
using ::testing::HasSubstr;

// A 6-step train run logging every 2 steps and evaluating at steps 4 and 6.
// `more` flags follow.
::strata::testing::RunResult TrainWith(
    const std::string& output_dir, const std::string& tensorboard_dir,
    const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {
      ::strata::testing::RunfilePath("launch/train/train"),
      "--steps=6",
      "--warmup_steps=1",
      "--seq_len=16",
      "--markov_tokens=5000",
      "--global_batch=2",
      "--log_interval=2",
      "--eval_interval=4",
      "--eval_batches=1",
      "--output_dir=" + output_dir,
      "--tensorboard_dir=" + tensorboard_dir};
  args.insert(args.end(), more.begin(), more.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(120));
}

TEST(TensorBoardTrainTest, ScalarsMatchTheMetricsRecords) {
  const std::string out = TempDir("run");
  const ::strata::testing::RunResult run = TrainWith(out, out + "/tb");
  ASSERT_EQ(run.exit_code, 0) << run.err;

  auto path = testing::FindEventFile(out + "/tb");
  ASSERT_THAT(path, IsOk());
  auto events = testing::ReadEvents(*path);
  ASSERT_THAT(events, IsOk());
  ASSERT_FALSE(events->empty());
  EXPECT_EQ((*events)[0].file_version(), "brain.Event:2");
  std::map<std::pair<int64_t, std::string>, float> scalars;
  for (const auto& s : testing::ScalarsOf(*events)) {
    EXPECT_TRUE(scalars.insert({{s.step, s.tag}, s.value}).second)
        << "step " << s.step << " " << s.tag << " written twice";
  }

  std::ifstream metrics(out + "/metrics.jsonl");
  size_t expected = 0;
  std::vector<int64_t> steps;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    const int64_t step = record.at("step").get<int64_t>();
    steps.push_back(step);
    const std::vector<std::pair<std::string, std::string>> fields = {
        {"train/loss", "loss"},
        {"lr", "lr"},
        {"grad_norm", "grad_norm"},
        {"tokens_per_s", "tokens_per_s"},
        {"mfu", "mfu"},
        {"eval/loss", "eval_loss"}};
    for (const auto& [tag, key] : fields) {
      if (record.at(key).is_null()) {
        EXPECT_EQ(scalars.count({step, tag}), 0u) << "step " << step << tag;
        continue;
      }
      ++expected;
      auto it = scalars.find({step, tag});
      ASSERT_NE(it, scalars.end()) << "step " << step << " " << tag;
      EXPECT_FLOAT_EQ(it->second, record.at(key).get<double>())
          << "step " << step << " " << tag;
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 4, 6}));
  // 5 scalars at each of 3 records, plus the evaluations at steps 4 and 6,
  // plus the one rank's peak memory at each record.
  EXPECT_EQ(expected, 17u);
  for (int64_t step : steps) {
    EXPECT_EQ(scalars.count({step, "memory/peak_resident_mib/rank0"}), 1u)
        << "step " << step;
  }
  EXPECT_EQ(scalars.size(), expected + steps.size());
}

TEST(TensorBoardTrainTest, OnlyRankZeroWritesAFile) {
  const std::string out = TempDir("two_ranks");
  const ::strata::testing::RunResult run =
      TrainWith(out, out + "/tb", {"--nproc=2", "--strategy=ddp"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // FindEventFile fails unless the directory holds exactly one event file.
  auto path = testing::FindEventFile(out + "/tb");
  ASSERT_THAT(path, IsOk());
  auto events = testing::ReadEvents(*path);
  ASSERT_THAT(events, IsOk());
  // One record of train/loss per progress line (steps 2, 4, 6).
  int losses = 0;
  for (const auto& s : testing::ScalarsOf(*events)) {
    losses += s.tag == "train/loss";
  }
  EXPECT_EQ(losses, 3);
}

TEST(TensorBoardTrainTest, EveryRanksPeakMemoryIsWritten) {
  const std::string out = TempDir("two_ranks_memory");
  const ::strata::testing::RunResult run =
      TrainWith(out, out + "/tb", {"--nproc=2", "--strategy=ddp"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto path = testing::FindEventFile(out + "/tb");
  ASSERT_THAT(path, IsOk());
  auto events = testing::ReadEvents(*path);
  ASSERT_THAT(events, IsOk());
  std::map<std::string, int> records;
  for (const auto& s : testing::ScalarsOf(*events)) {
    if (s.tag.rfind("memory/", 0) != 0) continue;
    ++records[s.tag];
    // A process that has loaded LibTorch and trained holds well over
    // 10 MiB; a wrong unit (kB or bytes) would be off by 1024x.
    EXPECT_GT(s.value, 10) << s.tag << " at step " << s.step;
    EXPECT_LT(s.value, 64 * 1024) << s.tag << " at step " << s.step;
  }
  EXPECT_EQ(records, (std::map<std::string, int>{
                         {"memory/peak_resident_mib/rank0", 3},
                         {"memory/peak_resident_mib/rank1", 3}}));
}

TEST(TensorBoardTrainTest, AnUnwritableDirectoryNamesTheFlag) {
  const std::string file = TempDir("a_file");
  std::ofstream(file) << "x";
  const ::strata::testing::RunResult run =
      TrainWith(TempDir("bad"), file + "/tb");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("--tensorboard_dir: cannot create "
                                 "TensorBoard directory '" +
                                 file + "/tb'"));
}

}  // namespace
}  // namespace strata::launch
