#include "checkpoint/strategy/checkpoint.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/contents.h"
#include "checkpoint/testing/states.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "strategies/testing/parity.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

using comm::Group;
using comm::testing::RunOnRanks;
using testing::AddRuns;
using testing::ExpectGlobalsEqual;
using testing::ExpectSnapshotsEqual;
using testing::Globals;
using testing::MakeStrategy;
using testing::OptimizerNamed;
using testing::Snapshot;
using testing::StateOf;
using testing::TempDir;

Contents WithStep(int64_t step) {
  Contents c;
  c.meta.step = step;
  c.param_scheduler = {{"last_step", static_cast<double>(step - 1)}};
  return c;
}

TEST(CheckpointTest, EveryFormatRoundTripsThroughTheApi) {
  for (Format format : {Format::kFull, Format::kLocal, Format::kSharded}) {
    const std::string what(FormatName(format));
    const std::string root = TempDir("api_" + what);
    const std::string path = CheckpointPathForStep(root, 2, format);
    auto saved = MakeStrategy("single", nullptr, 7, 2);
    ASSERT_NE(saved, nullptr);
    SaveOptions options;
    options.format = format;
    options.extra = {{"answer", int64_t{42}}};
    options.callback = [](Contents& c) { c.extra.push_back({"cb", 1.5}); };
    ASSERT_THAT(SaveCheckpoint(path, *saved, nullptr, WithStep(2), options),
                IsOk())
        << what;
    auto loaded = MakeStrategy("single", nullptr, 11, 0);
    ASSERT_NE(loaded, nullptr);
    auto contents = LoadCheckpoint(path, *loaded, nullptr);
    ASSERT_THAT(contents, IsOk());
    ExpectSnapshotsEqual(Snapshot(StateOf(*loaded)), Snapshot(StateOf(*saved)),
                         what);
    EXPECT_EQ(contents->meta.step, 2) << what;
    EXPECT_EQ(contents->meta.strategy, "single") << what;
    EXPECT_EQ(contents->meta.world_size, 1) << what;
    EXPECT_EQ(contents->meta.strata_version, kStrataVersion) << what;
    const NamedValues want = {{"answer", int64_t{42}}, {"cb", 1.5}};
    EXPECT_EQ(contents->extra, want) << what;
    EXPECT_EQ(contents->param_scheduler, WithStep(2).param_scheduler) << what;
  }
}

TEST(CheckpointTest, ExcludeFrozenParametersLeavesThemOut) {
  const std::string root = TempDir("frozen");
  auto saved = MakeStrategy("single", nullptr, 7, 2);
  ASSERT_NE(saved, nullptr);
  const std::string frozen = saved->model().named_parameters()[0].key();
  saved->model().named_parameters()[0].value().set_requires_grad(false);
  SaveOptions options;
  options.exclude_frozen_parameters = true;
  const std::string path = root + "/ckpt";
  ASSERT_THAT(SaveCheckpoint(path, *saved, nullptr, WithStep(2), options),
              IsOk());
  auto loaded = MakeStrategy("single", nullptr, 11, 0);
  ASSERT_NE(loaded, nullptr);
  const absl::Status strict = LoadCheckpoint(path, *loaded, nullptr).status();
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.message().find("missing keys: " + frozen), std::string::npos)
      << strict;
  LoadOptions lenient;
  lenient.strict = false;
  ASSERT_THAT(LoadCheckpoint(path, *loaded, nullptr, lenient), IsOk());
  for (const auto& run : StateOf(*loaded).model) {
    const at::Tensor want =
        Snapshot(StateOf(*saved)).at("model/" + run.name + "@0");
    EXPECT_EQ(at::equal(run.local, want), run.name != frozen) << run.name;
  }
}

TEST(CheckpointTest, KeepLastPrunesAndLatestPointsToTheNewest) {
  const std::string root = TempDir("keep_last");
  auto strategy = MakeStrategy("single", nullptr, 7, 0);
  ASSERT_NE(strategy, nullptr);
  for (int step = 1; step <= 4; ++step) {
    ASSERT_THAT(
        SaveCheckpointToRoot(root, step, 2, *strategy, nullptr, WithStep(step)),
        IsOk());
  }
  EXPECT_FALSE(std::filesystem::exists(
      CheckpointPathForStep(root, 1, Format::kSharded)));
  EXPECT_FALSE(std::filesystem::exists(
      CheckpointPathForStep(root, 2, Format::kSharded)));
  EXPECT_TRUE(std::filesystem::exists(
      CheckpointPathForStep(root, 3, Format::kSharded)));
  EXPECT_EQ(*FindLatest(root),
            CheckpointPathForStep(root, 4, Format::kSharded));
  std::ifstream latest(root + "/latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step_00000004");
}

TEST(CheckpointTest, FindLatestFallsBackToTheNewestCompleteCheckpoint) {
  const std::string root = TempDir("fallback");
  auto strategy = MakeStrategy("single", nullptr, 7, 0);
  ASSERT_NE(strategy, nullptr);
  ASSERT_THAT(SaveCheckpointToRoot(root, 5, 0, *strategy, nullptr, WithStep(5)),
              IsOk());
  // A save that died before its commit, and a pointer to nowhere.
  std::filesystem::create_directories(root + "/step_00000007.tmp");
  std::filesystem::create_directories(root + "/step_00000009");
  std::ofstream(root + "/latest") << "step_00000009\n";
  EXPECT_EQ(*FindLatest(root),
            CheckpointPathForStep(root, 5, Format::kSharded));
  const absl::Status none = FindLatest(TempDir("empty_root")).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.message().find("no checkpoint to resume"), std::string::npos);
}

TEST(CheckpointTest, ResumeAutoLoadsTheLatestAndCanSkipTheScheduler) {
  const std::string root = TempDir("resume_auto");
  auto saved = MakeStrategy("single", nullptr, 7, 2);
  ASSERT_NE(saved, nullptr);
  ASSERT_THAT(SaveCheckpointToRoot(root, 2, 0, *saved, nullptr, WithStep(2)),
              IsOk());
  auto resumed = MakeStrategy("single", nullptr, 11, 0);
  ASSERT_NE(resumed, nullptr);
  auto contents = Resume("auto", *resumed, nullptr, true,
                         /*resume_param_scheduler=*/false, root);
  ASSERT_THAT(contents, IsOk());
  EXPECT_EQ(contents->meta.step, 2);
  EXPECT_TRUE(contents->param_scheduler.empty());
  ExpectSnapshotsEqual(Snapshot(StateOf(*resumed)), Snapshot(StateOf(*saved)),
                       "resumed");
}

// Damages the checkpoint at `path`: halves a full file, flips a byte in the
// middle of the largest data file of a sharded one, halves the largest file
// of a local one.
void Damage(const std::string& path, Format format) {
  std::string file = path;
  if (format != Format::kFull) {
    uintmax_t largest = 0;
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      if (entry.path().filename() == "metadata.pb") continue;
      if (entry.file_size() > largest) {
        largest = entry.file_size();
        file = entry.path().string();
      }
    }
  }
  const uintmax_t bytes = std::filesystem::file_size(file);
  ASSERT_GT(bytes, 2u) << file;
  if (format != Format::kSharded) {
    std::filesystem::resize_file(file, bytes / 2);
    return;
  }
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekg(bytes / 2);
  const char byte = static_cast<char>(stream.get());
  stream.seekp(bytes / 2);
  stream.put(static_cast<char>(byte ^ 0x5a));
}

TEST(CheckpointTest, ResumeAutoSkipsACorruptNewestCheckpoint) {
  for (Format format : {Format::kFull, Format::kLocal, Format::kSharded}) {
    const std::string what(FormatName(format));
    const std::string root = TempDir("resume_corrupt_" + what);
    SaveOptions options;
    options.format = format;
    auto at2 = MakeStrategy("single", nullptr, 7, 2);
    auto at4 = MakeStrategy("single", nullptr, 7, 4);
    ASSERT_NE(at2, nullptr);
    ASSERT_NE(at4, nullptr);
    ASSERT_THAT(
        SaveCheckpointToRoot(root, 2, 0, *at2, nullptr, WithStep(2), options),
        IsOk());
    ASSERT_THAT(
        SaveCheckpointToRoot(root, 4, 0, *at4, nullptr, WithStep(4), options),
        IsOk());
    const std::vector<std::string> want = {
        CheckpointPathForStep(root, 4, format),
        CheckpointPathForStep(root, 2, format)};
    EXPECT_EQ(CheckpointsNewestFirst(root), want) << what;
    EXPECT_THAT(VerifyCheckpoint(want[0]), IsOk()) << what;
    Damage(want[0], format);
    EXPECT_FALSE(VerifyCheckpoint(want[0]).ok()) << what;

    auto resumed = MakeStrategy("single", nullptr, 11, 0);
    ASSERT_NE(resumed, nullptr);
    auto contents = Resume("auto", *resumed, nullptr, true, true, root);
    ASSERT_THAT(contents, IsOk()) << what;
    EXPECT_EQ(contents->meta.step, 2) << what;
    ExpectSnapshotsEqual(Snapshot(StateOf(*resumed)), Snapshot(StateOf(*at2)),
                         what);

    // Every checkpoint corrupt: NotFound, and nothing loaded.
    Damage(want[1], format);
    auto fresh = MakeStrategy("single", nullptr, 11, 0);
    ASSERT_NE(fresh, nullptr);
    const auto before = Snapshot(StateOf(*fresh));
    const absl::Status none =
        Resume("auto", *fresh, nullptr, true, true, root).status();
    EXPECT_EQ(none.code(), absl::StatusCode::kNotFound) << what << ": " << none;
    EXPECT_NE(none.message().find("2 checkpoint(s), all corrupt"),
              std::string::npos)
        << none;
    ExpectSnapshotsEqual(Snapshot(StateOf(*fresh)), before, what);
  }
}

// A sound checkpoint that does not fit the run (another optimizer) is the
// error, not a reason to fall back to an older one.
TEST(CheckpointTest, ResumeAutoFailsOnASoundCheckpointOfAnotherOptimizer) {
  const std::string root = TempDir("resume_mismatch");
  auto saved = MakeStrategy("single", nullptr, 7, 1);
  ASSERT_NE(saved, nullptr);
  ASSERT_THAT(SaveCheckpointToRoot(root, 1, 0, *saved, nullptr, WithStep(1)),
              IsOk());
  ASSERT_THAT(SaveCheckpointToRoot(root, 2, 0, *saved, nullptr, WithStep(2)),
              IsOk());
  auto sgd = MakeStrategy("single", nullptr, 11, 0, OptimizerNamed("sgd"));
  ASSERT_NE(sgd, nullptr);
  const absl::Status status =
      Resume("auto", *sgd, nullptr, true, true, root).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("step_00000002"), std::string::npos)
      << status;
}

// The asynchronous save writes the state as it was when SaveToRoot
// returned, while training goes on (on the training group) during the
// write (on a group split off for checkpoints).
TEST(CheckpointTest, AsyncSaveWritesTheStateOfItsStepWhileTrainingContinues) {
  const std::string root = TempDir("async");
  Globals at_save, loaded;
  std::mutex mu;
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        auto ckpt_group = group.Split(0, "ckpt");
        ASSERT_THAT(ckpt_group, IsOk());
        auto strategy = MakeStrategy("zero2", &group, 7, 1);
        ASSERT_NE(strategy, nullptr);
        AsyncCheckpointer saver(ckpt_group->get());
        ASSERT_THAT(saver.SaveToRoot(root, 1, 0, *strategy, WithStep(1)),
                    IsOk());
        AddRuns(StateOf(*strategy), at_save, mu);
        // Training continues while the save is written.
        ASSERT_THAT(strategies::testing::Train(*strategy, group.rank(), 2, 1,
                                               nullptr, 2),
                    IsOk());
        ASSERT_THAT(saver.Wait(), IsOk());
        EXPECT_GE(saver.last_stage_s(), 0);
        auto fresh = MakeStrategy("ddp", &group, 11, 0);
        ASSERT_NE(fresh, nullptr);
        auto contents = Resume("auto", *fresh, &group, true, true, root);
        ASSERT_THAT(contents, IsOk());
        EXPECT_EQ(contents->meta.step, 1);
        AddRuns(StateOf(*fresh), loaded, mu);
      }).ok());
  ExpectGlobalsEqual(loaded, at_save, "async save");
}

}  // namespace
}  // namespace strata::checkpoint

namespace strata::checkpoint {
namespace {

// After a load, the next step of the loaded strategy equals the next step of
// the one that saved, bitwise, in every format and for every optimizer:
// everything the update depends on (parameters, moments or momentum
// buffers, the step counter of bias correction and of SGD's first momentum
// step) was restored. ZeRO keeps one optimizer (and step counter) per bucket
// and exports bucket 0's: ZeroStrategy::AfterStateLoaded gives it to every
// bucket.
class NextStepTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NextStepTest, NextStepAfterLoadIsBitwiseTheSavedRunsNextStep) {
  const strategies::OptimizerConfig optimizer =
      testing::OptimizerNamed(GetParam());
  for (Format format : {Format::kFull, Format::kLocal, Format::kSharded}) {
    // Not a structured binding: the lambda below captures these, which
    // C++17 does not allow for bindings (clang rejects it).
    for (const std::pair<std::string, int>& run :
         std::vector<std::pair<std::string, int>>{{"single", 1},
                                                  {"ddp", 2},
                                                  {"zero1", 2},
                                                  {"zero2", 2},
                                                  {"fsdp", 2}}) {
      const std::string& kind = run.first;
      const int world = run.second;
      const std::string what =
          absl::StrCat(GetParam(), " ", FormatName(format), " ", kind);
      const std::string path = CheckpointPathForStep(
          TempDir(absl::StrCat("next_step_", GetParam(), "_",
                               FormatName(format), "_", kind)),
          2, format);
      SaveOptions options;
      options.format = format;
      std::mutex mu;
      Globals continued, resumed;
      ASSERT_TRUE(
          RunOnRanks(world,
                     [&](Group& group) {
                       Group* g = kind == "single" ? nullptr : &group;
                       const int rank = g == nullptr ? 0 : g->rank();
                       auto saved = MakeStrategy(kind, g, 7, 2, optimizer);
                       ASSERT_NE(saved, nullptr);
                       ASSERT_THAT(SaveCheckpoint(path, *saved, g, WithStep(2),
                                                  options),
                                   IsOk());
                       auto loaded = MakeStrategy(kind, g, 11, 0, optimizer);
                       ASSERT_NE(loaded, nullptr);
                       ASSERT_THAT(LoadCheckpoint(path, *loaded, g), IsOk());
                       // One more step each, on the same batch.
                       ASSERT_THAT(strategies::testing::Train(
                                       *saved, rank, world, 1, nullptr, 1),
                                   IsOk());
                       ASSERT_THAT(strategies::testing::Train(
                                       *loaded, rank, world, 1, nullptr, 1),
                                   IsOk());
                       AddRuns(StateOf(*saved), continued, mu);
                       AddRuns(StateOf(*loaded), resumed, mu);
                     })
              .ok())
          << what;
      ExpectGlobalsEqual(resumed, continued, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, NextStepTest,
                         ::testing::Values("adamw", "adam", "sgd",
                                           "sgd_momentum"));

// Saves `saved` (an optimizer name of testing::OptimizerNamed) in `format`
// and loads it into a fresh strategy with `live`: returns the load's
// status, after checking that a refused load named the path and changed
// nothing.
absl::Status LoadAcrossOptimizers(Format format, const std::string& saved,
                                  const std::string& live,
                                  const LoadOptions& load = LoadOptions()) {
  const std::string path =
      CheckpointPathForStep(TempDir(absl::StrCat("across_", saved, "_", live,
                                                 "_", FormatName(format))),
                            2, format);
  auto saving =
      MakeStrategy("single", nullptr, 7, 2, testing::OptimizerNamed(saved));
  EXPECT_NE(saving, nullptr);
  if (saving == nullptr) return absl::InternalError("no strategy");
  SaveOptions options;
  options.format = format;
  EXPECT_THAT(SaveCheckpoint(path, *saving, nullptr, WithStep(2), options),
              IsOk());
  auto loading =
      MakeStrategy("single", nullptr, 11, 0, testing::OptimizerNamed(live));
  EXPECT_NE(loading, nullptr);
  if (loading == nullptr) return absl::InternalError("no strategy");
  const auto before = Snapshot(StateOf(*loading));
  absl::StatusOr<Contents> loaded =
      LoadCheckpoint(path, *loading, nullptr, load);
  if (!loaded.ok()) {
    ExpectSnapshotsEqual(Snapshot(StateOf(*loading)), before,
                         "live state after a refused load");
    EXPECT_NE(loaded.status().message().find(path), std::string::npos)
        << loaded.status();
  }
  return loaded.status();
}

TEST(CheckpointTest, AnotherOptimizerKindIsRefusedInEveryFormat) {
  for (Format format : {Format::kFull, Format::kLocal, Format::kSharded}) {
    const absl::Status s = LoadAcrossOptimizers(format, "sgd_momentum", "adam");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr(
                    "holds the state of optimizer 'sgd_momentum' (SGD with "
                    "momentum), but the strategy's optimizer is 'adam'"))
        << FormatName(format);
  }
}

TEST(CheckpointTest, AdamStateIsRefusedByAdamW) {
  // The same tensors with another meaning (L2 vs decoupled decay): refused
  // by meta.optimizer, not by the keys.
  for (Format format : {Format::kFull, Format::kLocal, Format::kSharded}) {
    const absl::Status s = LoadAcrossOptimizers(format, "adam", "adamw");
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr("optimizer 'adam', but the strategy's "
                                     "optimizer is 'adamw'"))
        << FormatName(format);
  }
}

TEST(CheckpointTest, SgdWithAndWithoutMomentumIsRefusedInEveryFormat) {
  for (Format format : {Format::kFull, Format::kLocal, Format::kSharded}) {
    const absl::Status s = LoadAcrossOptimizers(format, "sgd", "sgd_momentum");
    EXPECT_THAT(
        std::string(s.message()),
        ::testing::HasSubstr("'sgd' (SGD without momentum), but the strategy's "
                             "optimizer is 'sgd_momentum' (SGD with momentum)"))
        << FormatName(format);
  }
}

TEST(CheckpointTest, TheModelAloneLoadsUnderAnotherOptimizer) {
  LoadOptions load;
  load.load_optimizer = false;
  for (Format format : {Format::kFull, Format::kSharded}) {
    EXPECT_THAT(LoadAcrossOptimizers(format, "sgd_momentum", "adamw", load),
                IsOk())
        << FormatName(format);
  }
}

}  // namespace
}  // namespace strata::checkpoint
