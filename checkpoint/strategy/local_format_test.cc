#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/contents.h"
#include "checkpoint/local.h"
#include "checkpoint/testing/states.h"
#include "comm/group.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

using testing::ExpectGlobalsEqual;
using testing::ExpectSnapshotsEqual;
using testing::Globals;
using testing::MakeStrategy;
using testing::Rank;
using testing::RunRanks;
using testing::Snapshot;
using testing::StateOf;
using testing::TempDir;

Contents SomeContents() {
  Contents c;
  c.meta = NewMeta();
  c.meta.step = 2;
  c.extra = {{"sampler.position", int64_t{24}}};
  return c;
}

// With `optimizer` (testing::OptimizerNamed).
Globals SaveAt(const std::string& kind, int world, const std::string& dir,
               const std::string& optimizer = "adamw") {
  return RunRanks(kind, world, 7, 2, optimizer, [&](const Rank& rank) {
    EXPECT_THAT(SaveLocal(dir, rank.state, SomeContents(), kind, rank.group),
                IsOk());
    return true;
  });
}

// Loads into `kind` at `world`; returns the loaded globals, or the first
// rank's error in `error` (and then checks every rank's state is unchanged).
Globals LoadAt(const std::string& kind, int world, const std::string& dir,
               absl::Status* error, const std::string& optimizer = "adamw") {
  std::mutex mu;
  return RunRanks(kind, world, 11, 0, optimizer, [&](const Rank& rank) {
    const auto before = Snapshot(rank.state);
    absl::StatusOr<Contents> contents =
        LoadLocal(dir, rank.state, kind, true, rank.group);
    if (!contents.ok()) {
      ExpectSnapshotsEqual(Snapshot(rank.state), before,
                           "live state after error");
      std::lock_guard<std::mutex> lock(mu);
      *error = contents.status();
      return false;
    }
    EXPECT_EQ(contents->meta.step, 2);
    EXPECT_EQ(contents->meta.world_size, world);
    return true;
  });
}

class LocalOptimizerTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Optimizers, LocalOptimizerTest,
                         ::testing::Values("adamw", "adam", "sgd",
                                           "sgd_momentum"));

// Every optimizer's state (testing::OptimizerNamed), bitwise.
TEST_P(LocalOptimizerTest, RoundTripPerStrategy) {
  for (const auto& [kind, world] :
       std::vector<std::pair<std::string, int>>{{"single", 1},
                                                {"ddp", 2},
                                                {"zero1", 3},
                                                {"zero2", 2},
                                                {"fsdp", 2}}) {
    const std::string what = absl::StrCat(GetParam(), " ", kind);
    const std::string dir =
        TempDir(absl::StrCat("local_", GetParam(), "_", kind)) + "/ckpt";
    const Globals saved = SaveAt(kind, world, dir, GetParam());
    for (int r = 0; r < world; ++r) {
      EXPECT_TRUE(
          std::filesystem::exists(absl::StrCat(dir, "/rank", r, ".pth")));
    }
    absl::Status error;
    ExpectGlobalsEqual(LoadAt(kind, world, dir, &error, GetParam()), saved,
                       what);
    EXPECT_THAT(error, IsOk());
  }
}

TEST(LocalTest, AnotherWorldSizeIsRefusedSayingWhatDiffers) {
  const std::string dir = TempDir("local_world") + "/ckpt";
  SaveAt("zero2", 2, dir);
  absl::Status error;
  LoadAt("zero2", 3, dir, &error);
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument) << error;
  EXPECT_NE(error.message().find("saved by 2 rank(s) under strategy 'zero2' "
                                 "but this job has 3 rank(s) under 'zero2'"),
            std::string::npos)
      << error;
}

TEST(LocalTest, AnotherStrategyIsRefused) {
  const std::string dir = TempDir("local_strategy") + "/ckpt";
  SaveAt("zero1", 2, dir);
  absl::Status error;
  LoadAt("ddp", 2, dir, &error);
  EXPECT_NE(error.message().find("under strategy 'zero1' but this job has 2 "
                                 "rank(s) under 'ddp'"),
            std::string::npos)
      << error;
}

TEST(LocalTest, CorruptedRankFileIsRefused) {
  const std::string dir = TempDir("local_corrupt") + "/ckpt";
  const Globals saved = SaveAt("single", 1, dir);
  // Flip a bit inside one tensor's bytes.
  const at::Tensor t = saved.at("model/blocks.0.mlp.fc.weight");
  std::ifstream in(dir + "/rank0.pth", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  const size_t at =
      bytes.find(std::string(static_cast<const char*>(t.data_ptr()), 256));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] ^= 0x20;
  std::ofstream(dir + "/rank0.pth", std::ios::binary | std::ios::trunc)
      << bytes;
  absl::Status error;
  LoadAt("single", 1, dir, &error);
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss) << error;
  // The zip CRC-32 of the record holding it catches the flip first.
  EXPECT_NE(error.message().find("rank0.pth"), std::string::npos) << error;
  EXPECT_NE(error.message().find("fails its CRC-32"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace strata::checkpoint
