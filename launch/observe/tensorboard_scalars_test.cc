#include "launch/observe/tensorboard_scalars.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "launch/testing/event_file_reader.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::TempDir;
using ::strata::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::Pair;

ProgressRecord Record() {
  ProgressRecord r;
  r.step = 40;
  r.total_steps = 100;
  r.loss = 2.5;
  r.lr = 0.003;
  r.grad_norm = 0.75;
  r.tokens_per_s = 12345;
  r.mfu = 0.125;
  return r;
}

// The scalars written for `record`, as (tag, value) in file order, all of
// them checked to be at step record.step.
std::vector<std::pair<std::string, float>> Written(const ProgressRecord& record,
                                                   const std::string& name) {
  auto writer = TensorBoardWriter::Open(TempDir(name));
  EXPECT_THAT(writer, IsOk());
  EXPECT_THAT(WriteProgressScalars(record, **writer), IsOk());
  // Read while the writer is open: WriteProgressScalars flushed.
  auto events = testing::ReadEvents((*writer)->path());
  EXPECT_THAT(events, IsOk());
  std::vector<std::pair<std::string, float>> out;
  for (const auto& s : testing::ScalarsOf(*events)) {
    EXPECT_EQ(s.step, record.step) << s.tag;
    out.push_back({s.tag, s.value});
  }
  return out;
}

TEST(WriteProgressScalarsTest, WritesTheTrainingScalars) {
  EXPECT_THAT(Written(Record(), "train"),
              ElementsAre(Pair("train/loss", 2.5f), Pair("lr", 0.003f),
                          Pair("grad_norm", 0.75f),
                          Pair("tokens_per_s", 12345.0f), Pair("mfu", 0.125f)));
}

TEST(WriteProgressScalarsTest, WritesTheEvalLossWhenEvaluated) {
  ProgressRecord r = Record();
  r.eval_loss = 2.25;
  const auto scalars = Written(r, "eval");
  ASSERT_EQ(scalars.size(), 6u);
  EXPECT_THAT(scalars[1], Pair("eval/loss", 2.25f));
}

TEST(WriteProgressScalarsTest, WritesTheExposedCommShareWithPhaseTimes) {
  ProgressRecord r = Record();
  PhaseTimes p;
  p.forward_backward_s = 0.3;
  p.step_s = 0.1;
  p.comm_wait_s = 0.1;
  r.phases = p;
  const auto scalars = Written(r, "phases");
  ASSERT_EQ(scalars.size(), 6u);
  // 0.1 s waited of 0.3 + 0.1 s.
  EXPECT_THAT(scalars[5], Pair("exposed_comm_share", 0.25f));
}

TEST(WriteProgressScalarsTest, WritesTheLossScaleWithLossScaling) {
  ProgressRecord r = Record();
  r.loss_scale = 32768;
  r.skipped_steps = 3;
  const auto scalars = Written(r, "fp16");
  ASSERT_EQ(scalars.size(), 7u);
  EXPECT_THAT(scalars[5], Pair("loss_scale", 32768.0f));
  EXPECT_THAT(scalars[6], Pair("skipped_steps", 3.0f));
}

}  // namespace
}  // namespace strata::launch
