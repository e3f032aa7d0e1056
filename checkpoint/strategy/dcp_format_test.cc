// --ckpt_format=dcp through the strategy-level API (SaveCheckpoint,
// LoadCheckpoint, VerifyCheckpoint) with the state of real strategies:
// round trips per strategy and optimizer, N -> M resharding across
// strategies (bitwise: no arithmetic touches a value), the contents, and
// the refusals, naming the key or file, with nothing loaded. PyTorch's own
// dcp.load of the same layout: checkpoint/dcp:writer_interop_test.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/contents.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/format.h"
#include "checkpoint/strategy/checkpoint.h"
#include "checkpoint/testing/states.h"
#include "comm/group.h"
#include "strategies/strategy.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using testing::ExpectGlobalsEqual;
using testing::ExpectSnapshotsEqual;
using testing::Globals;
using ::testing::HasSubstr;
using testing::Rank;
using testing::RunRanks;
using testing::Snapshot;
using testing::TempDir;

Contents SomeContents() {
  Contents c;
  c.meta.step = 3;
  c.meta.seed = 7;
  c.param_scheduler = {{"kind", std::string("cosine")},
                       {"last_step", int64_t{2}},
                       {"base_lr", 1e-4}};
  c.extra = {{"sampler.position", int64_t{36}},
             {"note", std::string("hi")},
             {"rng", Bytes{std::string("\0\1\2", 3)}},
             {"empty", Bytes{}},
             {"ratio", 0.25}};
  return c;
}

// Saves `kind` at `world` ranks with `optimizer` (trained 2 steps from seed
// 7) as DCP into `dir`; returns the global tensors saved.
Globals SaveAt(const std::string& kind, int world, const std::string& dir,
               const std::string& optimizer = "adamw") {
  return RunRanks(kind, world, 7, 2, optimizer, [&](const Rank& rank) {
    SaveOptions options;
    options.format = Format::kDcp;
    EXPECT_THAT(
        SaveCheckpoint(dir, rank.strategy, rank.group, SomeContents(), options),
        IsOk());
    return true;
  });
}

// Loads `dir` into `kind` at `world` ranks (fresh, seed 11, untrained);
// returns the global tensors loaded.
Globals LoadAt(const std::string& kind, int world, const std::string& dir,
               const std::string& optimizer = "adamw") {
  return RunRanks(kind, world, 11, 0, optimizer, [&](const Rank& rank) {
    absl::StatusOr<Contents> contents =
        LoadCheckpoint(dir, rank.strategy, rank.group, LoadOptions());
    EXPECT_THAT(contents, IsOk());
    if (!contents.ok()) return false;
    EXPECT_EQ(contents->meta.step, 3);
    EXPECT_EQ(contents->meta.seed, 7u);
    EXPECT_EQ(contents->extra.size(), SomeContents().extra.size());
    return true;
  });
}

class DcpOptimizerTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Optimizers, DcpOptimizerTest,
                         ::testing::Values("adamw", "adam", "sgd",
                                           "sgd_momentum"));

TEST_P(DcpOptimizerTest, RoundTripPerStrategy) {
  for (const auto& [kind, world] : testing::RoundTripSetups()) {
    const std::string what = absl::StrCat(GetParam(), " ", kind);
    const std::string dir =
        TempDir(absl::StrCat("dcp_roundtrip_", GetParam(), "_", kind)) + "/c";
    const Globals saved = SaveAt(kind, world, dir, GetParam());
    ASSERT_TRUE(dcp::IsDcpCheckpoint(dir)) << what;
    EXPECT_THAT(VerifyCheckpoint(dir), IsOk()) << what;
    ExpectGlobalsEqual(LoadAt(kind, world, dir, GetParam()), saved, what);
  }
}

// Every N, M in 1..4 across strategies, as the sharded format's test.
TEST(DcpTest, ReshardsEveryWorldSizeToEveryOtherAcrossStrategies) {
  for (int n = 1; n <= 4; ++n) {
    for (int m = 1; m <= 4; ++m) {
      const auto [save_kind, load_kind] = testing::GridKinds(n, m);
      const std::string what =
          absl::StrCat(save_kind, " at ", n, " -> ", load_kind, " at ", m);
      const std::string dir =
          TempDir(absl::StrCat("dcp_grid_", n, "_", m)) + "/c";
      const Globals saved = SaveAt(save_kind, n, dir);
      ExpectGlobalsEqual(LoadAt(load_kind, m, dir), saved, what);
    }
  }
}

TEST(DcpTest, ContentsRoundTrip) {
  const std::string dir = TempDir("dcp_contents") + "/c";
  SaveAt("single", 1, dir);
  RunRanks("single", 1, 11, 0, "adamw", [&](const Rank& rank) {
    absl::StatusOr<Contents> contents =
        LoadCheckpoint(dir, rank.strategy, rank.group, LoadOptions());
    EXPECT_THAT(contents, IsOk());
    if (!contents.ok()) return false;
    const Contents want = SomeContents();
    EXPECT_EQ(contents->meta.strategy, rank.strategy.name());
    EXPECT_EQ(contents->meta.optimizer, "adamw");
    EXPECT_EQ(contents->meta.strata_version, kStrataVersion);
    // By name: DCP keeps values in key order.
    auto sorted = [](NamedValues v) {
      std::sort(v.begin(), v.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      return v;
    };
    EXPECT_EQ(sorted(contents->param_scheduler), sorted(want.param_scheduler));
    EXPECT_EQ(sorted(contents->extra), sorted(want.extra));
    return true;
  });
}

TEST(DcpTest, AnotherOptimizerIsRefusedNamingBoth) {
  const std::string dir = TempDir("dcp_other_optimizer") + "/c";
  SaveAt("zero2", 2, dir, "sgd_momentum");
  RunRanks("zero2", 2, 11, 0, "adamw", [&](const Rank& rank) {
    const std::map<std::string, at::Tensor> before = Snapshot(rank.state);
    EXPECT_THAT(LoadCheckpoint(dir, rank.strategy, rank.group, LoadOptions()),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sgd")));
    ExpectSnapshotsEqual(Snapshot(rank.state), before, "after the refusal");
    return false;
  });
}

// The model's keys only (--load_weights loads no optimizer state).
Globals ModelOf(const Globals& globals) {
  Globals model;
  for (const auto& [key, tensor] : globals) {
    if (absl::StartsWith(key, "model/")) model.emplace(key, tensor);
  }
  return model;
}

// --load_weights_revise_keys through the Strategy-level load: the DCP
// checkpoint's model keys are renamed before matching (strictly: a rule
// that renames them all leaves every key unexpected, and nothing loads),
// at another strategy and world size than the save's.
TEST(DcpTest, ReviseKeysRenameTheModelKeysBeforeMatching) {
  const std::string dir = TempDir("dcp_revise_keys") + "/c";
  const Globals saved = SaveAt("fsdp", 2, dir);
  const Globals loaded =
      RunRanks("zero2", 3, 11, 0, "adamw", [&](const Rank& rank) {
        const std::map<std::string, at::Tensor> before = Snapshot(rank.state);
        LoadOptions options;
        options.load_optimizer = false;
        options.revise_keys = {{"^", "module."}};
        EXPECT_THAT(LoadCheckpoint(dir, rank.strategy, rank.group, options),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("unexpected keys: module.")));
        ExpectSnapshotsEqual(Snapshot(rank.state), before, "after refusal");
        options.revise_keys = {{"^", "module."}, {"^module\\.", ""}};
        EXPECT_THAT(LoadCheckpoint(dir, rank.strategy, rank.group, options),
                    IsOk());
        return true;
      });
  ExpectGlobalsEqual(ModelOf(loaded), ModelOf(saved), "model after revise");
}

// A checkpoint saved without the optimizer: resuming it strictly lists the
// optimizer's missing keys; non-strict loads the model and keeps the
// optimizer's state.
TEST(DcpTest, MissingOptimizerKeysAreListedUnderStrict) {
  const std::string dir = TempDir("dcp_no_optimizer") + "/c";
  const Globals saved =
      RunRanks("fsdp", 2, 7, 2, "adamw", [&](const Rank& rank) {
        SaveOptions options;
        options.format = Format::kDcp;
        options.save_optimizer = false;
        EXPECT_THAT(SaveCheckpoint(dir, rank.strategy, rank.group,
                                   SomeContents(), options),
                    IsOk());
        return true;
      });
  RunRanks("fsdp", 2, 11, 0, "adamw", [&](const Rank& rank) {
    const std::map<std::string, at::Tensor> before = Snapshot(rank.state);
    EXPECT_THAT(
        LoadCheckpoint(dir, rank.strategy, rank.group, LoadOptions()),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exp_avg")));
    ExpectSnapshotsEqual(Snapshot(rank.state), before, "after the refusal");
    LoadOptions lenient;
    lenient.strict = false;
    EXPECT_THAT(LoadCheckpoint(dir, rank.strategy, rank.group, lenient),
                IsOk());
    return false;
  });
}

TEST(DcpTest, AFlippedBitIsDataLossNamingTheFile) {
  const std::string dir = TempDir("dcp_flip") + "/c";
  SaveAt("zero1", 2, dir);
  const std::string file = dir + "/__1_0.distcp";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(200);
    f.write(&c, 1);
  }
  EXPECT_THAT(VerifyCheckpoint(dir),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("__1_0.distcp")));
  RunRanks("zero1", 2, 11, 0, "adamw", [&](const Rank& rank) {
    const std::map<std::string, at::Tensor> before = Snapshot(rank.state);
    EXPECT_FALSE(
        LoadCheckpoint(dir, rank.strategy, rank.group, LoadOptions()).ok());
    ExpectSnapshotsEqual(Snapshot(rank.state), before, "after the refusal");
    return false;
  });
}

TEST(DcpTest, FindLatestAndResumeAutoSeeDcpCheckpoints) {
  const std::string root = TempDir("dcp_root");
  RunRanks("ddp", 2, 7, 2, "adamw", [&](const Rank& rank) {
    SaveOptions options;
    options.format = Format::kDcp;
    EXPECT_THAT(SaveCheckpointToRoot(root, 5, 2, rank.strategy, rank.group,
                                     SomeContents(), options),
                IsOk());
    return false;
  });
  absl::StatusOr<std::string> latest = FindLatest(root);
  ASSERT_THAT(latest, IsOk());
  EXPECT_EQ(*latest, CheckpointPathForStep(root, 5, Format::kDcp));
  RunRanks("fsdp", 3, 11, 0, "adamw", [&](const Rank& rank) {
    absl::StatusOr<Contents> contents =
        Resume("auto", rank.strategy, rank.group, true, true, root);
    EXPECT_THAT(contents, IsOk());
    if (contents.ok()) {
      EXPECT_EQ(contents->meta.step, 5);
    }
    return false;
  });
}

}  // namespace
}  // namespace strata::checkpoint
