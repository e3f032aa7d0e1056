#include "launch/testing/train_runs.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "checkpoint/dcp/load.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/full.h"
#include "checkpoint/metadata.h"

namespace strata::launch::testing {

using ::strata::testing::FreePort;
using ::strata::testing::Run;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::strata::testing::Subprocess;
using ::strata::testing::TorchrunEnv;

std::vector<std::string> DropoutRunArgs(const std::string& out,
                                        const std::vector<std::string>& more) {
  std::vector<std::string> args = {RunfilePath("launch/train/train"),
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

RunResult TrainDropoutRun(const std::string& out,
                          const std::vector<std::string>& more) {
  return Run(DropoutRunArgs(out, more), {}, absl::Seconds(120));
}

checkpoint::NamedValues CheckpointExtras(const std::string& path) {
  if (absl::EndsWith(path, ".pth")) {
    absl::StatusOr<checkpoint::ReadCheckpoint> read =
        checkpoint::ReadFullCheckpoint(path);
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? read->contents.extra : checkpoint::NamedValues{};
  }
  if (checkpoint::dcp::IsDcpCheckpoint(path)) {
    auto read = checkpoint::dcp::ReadDcpCheckpoint(path);
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? read->second.extra : checkpoint::NamedValues{};
  }
  absl::StatusOr<checkpoint::proto::Metadata> md =
      checkpoint::ReadMetadataFile(path);
  EXPECT_TRUE(md.ok()) << md.status();
  return md.ok() ? checkpoint::ContentsFromProto(*md).extra
                 : checkpoint::NamedValues{};
}

bool KillRankOneDuringStep8Save(const std::vector<std::string>& args,
                                const std::string& ckpt_dir,
                                absl::Duration timeout) {
  const int port = FreePort();
  Subprocess rank0(args, TorchrunEnv(0, 2, port), timeout);
  Subprocess rank1(args, TorchrunEnv(1, 2, port), timeout);
  // Rank 1's data file of the step-8 save is written (and synced) before
  // the pause; the commit happens after it.
  // (sharded: rank1.data; dcp: __1_0.distcp).
  const std::string staging = ckpt_dir + "/step_00000008.tmp/";
  auto began_save = [&] {
    return std::filesystem::exists(staging + "rank1.data") ||
           std::filesystem::exists(staging + "__1_0.distcp");
  };
  const absl::Time deadline = absl::Now() + timeout - absl::Seconds(15);
  while (!began_save() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const bool began = began_save();
  EXPECT_TRUE(began) << "the step-8 save never began";
  rank1.Signal(SIGKILL);
  EXPECT_EQ(rank1.Finish().exit_code, -1);  // Killed by the signal.
  EXPECT_NE(rank0.Finish().exit_code, 0) << "rank 0 cannot save alone";
  return began;
}

void ExpectSameEnd(const std::string& whole, const std::string& out,
                   int num_steps) {
  const std::vector<double> steps =
      MetricsColumn(out + "/metrics.jsonl", "step");
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back(), num_steps);
  const size_t first = num_steps - steps.size();
  for (const std::string key : {"loss", "lr", "grad_norm"}) {
    const std::vector<double> want =
        MetricsColumn(whole + "/metrics.jsonl", key);
    const std::vector<double> got = MetricsColumn(out + "/metrics.jsonl", key);
    ASSERT_EQ(want.size(), static_cast<size_t>(num_steps)) << key;
    ASSERT_EQ(got.size(), steps.size()) << key;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], want[first + i]) << key << " step " << steps[i];
    }
  }
  const std::string model = ReadFile(whole + "/model.pt");
  EXPECT_FALSE(model.empty());
  EXPECT_EQ(ReadFile(out + "/model.pt"), model);
}

}  // namespace strata::launch::testing
