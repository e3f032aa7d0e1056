// Dropout through the train binary, in fresh processes: the masks are a
// function of (seed, step, global sample, site, element) (models/dropout.h),
// so with dropout on, data-parallel runs at 2 ranks (ddp, zero2, fsdp) train
// like the single-process run. (Resumes with dropout: dropout_resume_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"
#include "launch/testing/train_runs.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::TempDir;
using ::strata::testing::RunResult;

// The values of `key` in each line of a metrics.jsonl file.
std::vector<double> Field(const std::string& metrics_path,
                          const std::string& key) {
  return launch::testing::MetricsColumn(metrics_path, key);
}

RunResult Train(const std::string& out, const std::vector<std::string>& more) {
  return launch::testing::TrainDropoutRun(out, more);
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

}  // namespace
}  // namespace strata::launch
