#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/contents.h"
#include "checkpoint/metadata.h"
#include "checkpoint/sharded.h"
#include "checkpoint/testing/states.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "strategies/factory.h"
#include "strategies/testing/parity.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

using comm::Group;
using comm::testing::RunOnRanks;
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
  c.meta.step = 3;
  c.meta.seed = 7;
  c.meta.strategy = "test";
  c.param_scheduler = {{"last_step", 2.0}, {"base_lr", 1e-4}};
  c.extra = {{"sampler.position", int64_t{36}},
             {"note", std::string("hi")},
             {"rng", Bytes{std::string("\0\1\2", 3)}},
             {"ratio", 0.25}};
  return c;
}

// Saves the state of `kind` at `world` ranks with `optimizer` (trained 2
// steps from seed 7; testing::OptimizerNamed) into `dir`; returns the global
// tensors saved.
Globals SaveAt(const std::string& kind, int world, const std::string& dir,
               const std::string& optimizer = "adamw") {
  return RunRanks(kind, world, 7, 2, optimizer, [&](const Rank& rank) {
    EXPECT_THAT(SaveSharded(dir, rank.state, SomeContents(), rank.group),
                IsOk());
    return true;
  });
}

// Loads `dir` into `kind` at `world` ranks with `optimizer` (fresh, seed 11,
// untrained); returns the global tensors loaded.
Globals LoadAt(const std::string& kind, int world, const std::string& dir,
               const std::string& optimizer = "adamw") {
  return RunRanks(kind, world, 11, 0, optimizer, [&](const Rank& rank) {
    absl::StatusOr<Contents> contents =
        LoadSharded(dir, rank.state, {}, rank.group);
    EXPECT_THAT(contents, IsOk());
    if (!contents.ok()) return false;
    EXPECT_THAT(rank.strategy.AfterStateLoaded(), IsOk());
    EXPECT_EQ(contents->meta.step, 3);
    EXPECT_EQ(contents->extra, SomeContents().extra);
    return true;
  });
}

// The optimizers (testing::OptimizerNamed) whose state every test below
// saves and loads.
class ShardedOptimizerTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Optimizers, ShardedOptimizerTest,
                         ::testing::Values("adamw", "adam", "sgd",
                                           "sgd_momentum"));

TEST_P(ShardedOptimizerTest, RoundTripPerStrategy) {
  for (const auto& [kind, world] : testing::RoundTripSetups()) {
    const std::string what = absl::StrCat(GetParam(), " ", kind);
    const std::string dir =
        TempDir(absl::StrCat("roundtrip_", GetParam(), "_", kind)) + "/ckpt";
    const Globals saved = SaveAt(kind, world, dir, GetParam());
    const Globals loaded = LoadAt(kind, world, dir, GetParam());
    ExpectGlobalsEqual(loaded, saved, what);
  }
}

TEST(ShardedTest, ContentsRoundTrip) {
  const std::string dir = TempDir("contents") + "/ckpt";
  auto strategy = MakeStrategy("single", nullptr, 7, 0);
  ASSERT_NE(strategy, nullptr);
  ASSERT_THAT(SaveSharded(dir, StateOf(*strategy), SomeContents(), nullptr),
              IsOk());
  auto contents = LoadSharded(dir, StateOf(*strategy), {}, nullptr);
  ASSERT_THAT(contents, IsOk());
  const Contents want = SomeContents();
  EXPECT_EQ(contents->meta.seed, 7u);
  EXPECT_EQ(contents->meta.strategy, "test");
  EXPECT_EQ(contents->meta.strata_version, kStrataVersion);
  EXPECT_EQ(contents->param_scheduler, want.param_scheduler);
  EXPECT_EQ(contents->extra, want.extra);
}

// Saves at N ranks under one strategy and loads at M under another, for
// every N, M in 1..4: the global state loaded (the model and the
// optimizer's state, whichever optimizer) equals the state saved, bitwise.
TEST_P(ShardedOptimizerTest,
       ReshardsEveryWorldSizeToEveryOtherAcrossStrategies) {
  for (int n = 1; n <= 4; ++n) {
    for (int m = 1; m <= 4; ++m) {
      const auto [save_kind, load_kind] = testing::GridKinds(n, m);
      const std::string what = absl::StrCat(GetParam(), ": ", save_kind, " at ",
                                            n, " -> ", load_kind, " at ", m);
      const std::string dir =
          TempDir(absl::StrCat("grid_", GetParam(), "_", n, "_", m)) + "/c";
      const Globals saved = SaveAt(save_kind, n, dir, GetParam());
      const Globals loaded = LoadAt(load_kind, m, dir, GetParam());
      ExpectGlobalsEqual(loaded, saved, what);
    }
  }
}

// The example and its reverse.
TEST(ShardedTest, ZeroTwoAtFourLoadsIntoFsdpAtThreeAndBack) {
  const std::string dir = TempDir("zero2_fsdp") + "/ckpt";
  const Globals from_zero2 = SaveAt("zero2", 4, dir);
  ExpectGlobalsEqual(LoadAt("fsdp", 3, dir), from_zero2,
                     "zero2 at 4 -> fsdp at 3");
  const Globals from_fsdp = SaveAt("fsdp", 3, dir);
  ExpectGlobalsEqual(LoadAt("zero2", 4, dir), from_fsdp,
                     "fsdp at 3 -> zero2 at 4");
}

// Hybrid sharding: ranks of different replica groups hold the same runs.
TEST(ShardedTest, HybridShardedFsdpRoundTripsAndReshards) {
  const std::string dir = TempDir("fsdp_hybrid") + "/ckpt";
  const Globals saved = SaveAt("fsdp_hybrid", 4, dir);
  ExpectGlobalsEqual(LoadAt("fsdp_hybrid", 4, dir), saved, "hybrid at 4");
  ExpectGlobalsEqual(LoadAt("zero1", 3, dir), saved,
                     "hybrid at 4 -> zero1 at 3");
}

TEST(ShardedTest, ReplicatedStateIsWrittenOnceSplitBetweenRanks) {
  const std::string dir = TempDir("split") + "/ckpt";
  SaveAt("ddp", 2, dir);
  auto md = ReadMetadataFile(dir);
  ASSERT_THAT(md, IsOk());
  int64_t bytes[2] = {0, 0};
  int64_t total = 0;
  for (const auto* section : {&md->model(), &md->optimizer()}) {
    for (const auto& t : *section) {
      int64_t covered = 0;
      for (const auto& c : t.chunks()) {
        bytes[c.file() == "rank0.data" ? 0 : 1] += c.num_bytes();
        covered += c.numel();
      }
      EXPECT_EQ(covered, NumElements(std::vector<int64_t>(
                             t.global_shape().begin(), t.global_shape().end())))
          << t.name();
      total += covered * (t.dtype() == "Long" ? 8 : 4);
    }
  }
  // Each element once in all; both ranks write a share (gpt-tiny's tensors
  // under 1 MiB go whole to one rank, rotating).
  EXPECT_EQ(bytes[0] + bytes[1], total);
  EXPECT_GT(bytes[0], total / 4);
  EXPECT_GT(bytes[1], total / 4);
  EXPECT_EQ(std::filesystem::file_size(dir + "/rank0.data") +
                std::filesystem::file_size(dir + "/rank1.data"),
            static_cast<uintmax_t>(total));
}

TEST(ShardedTest, SaveReplacesAnExistingCheckpointAndLeavesNoStaging) {
  const std::string dir = TempDir("replace") + "/ckpt";
  SaveAt("single", 1, dir);
  const Globals second = SaveAt("zero2", 2, dir);
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));
  ExpectGlobalsEqual(LoadAt("ddp", 2, dir), second, "after replace");
}

// --- Bad input: a clear error, and the live state untouched. ---

class ShardedBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        TempDir(
            ::testing::UnitTest::GetInstance()->current_test_info()->name()) +
        "/ckpt";
    auto saved = MakeStrategy("single", nullptr, 7, 2);
    ASSERT_NE(saved, nullptr);
    ASSERT_THAT(SaveSharded(dir_, StateOf(*saved), SomeContents(), nullptr),
                IsOk());
    live_ = MakeStrategy("single", nullptr, 11, 0);
    ASSERT_NE(live_, nullptr);
    before_ = Snapshot(StateOf(*live_));
  }

  absl::Status Load(const ReadOptions& options = {}) {
    return LoadSharded(dir_, StateOf(*live_), options, nullptr).status();
  }

  void ExpectUntouched() {
    ExpectSnapshotsEqual(Snapshot(StateOf(*live_)), before_, "live state");
  }

  // The first chunk of the model's first tensor.
  proto::Chunk FirstChunk() {
    auto md = ReadMetadataFile(dir_);
    EXPECT_THAT(md, IsOk());
    return md->model(0).chunks(0);
  }

  std::string dir_;
  std::unique_ptr<strategies::Strategy> live_;
  std::map<std::string, at::Tensor> before_;
};

TEST_F(ShardedBadInputTest, TruncatedDataFileNamesTheChunk) {
  const std::string file = dir_ + "/rank0.data";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  const absl::Status s = Load();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s;
  EXPECT_NE(s.message().find("chunk"), std::string::npos) << s;
  ExpectUntouched();
}

TEST_F(ShardedBadInputTest, FlippedBitNamesTheChunk) {
  const proto::Chunk chunk = FirstChunk();
  auto md = ReadMetadataFile(dir_);
  ASSERT_THAT(md, IsOk());
  const std::string name = md->model(0).name();
  {
    std::fstream f(dir_ + "/" + chunk.file(),
                   std::ios::in | std::ios::out | std::ios::binary);
    const int64_t at = chunk.byte_offset() + chunk.num_bytes() / 2;
    f.seekg(at);
    char byte;
    f.read(&byte, 1);
    byte ^= 0x04;
    f.seekp(at);
    f.write(&byte, 1);
  }
  const absl::Status s = Load();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(absl::StrCat("tensor '", name, "' chunk 0")),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s;
  ExpectUntouched();
}

TEST_F(ShardedBadInputTest, WrongModelConfigNamesKeyAndBothShapes) {
  // gpt-tiny's checkpoint into a gpt with a vocabulary of 512 instead of
  // 256: the embedding (tied with the head) is [512, 64].
  models::ModelConfig config = strategies::testing::Config("gpt-tiny");
  config.vocab_size = 512;
  auto created = strategies::CreateStrategy(
      strategies::StrategyOptions(), strategies::testing::Build(config, 3),
      nullptr, strategies::testing::Optimizer(),
      strategies::testing::Schedule());
  ASSERT_THAT(created, IsOk());
  const auto before = Snapshot(StateOf(**created));
  const absl::Status s =
      LoadSharded(dir_, StateOf(**created), {}, nullptr).status();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("[256, 64] in the checkpoint but [512, 64] "
                             "in the model"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("key '"), std::string::npos) << s;
  ExpectSnapshotsEqual(Snapshot(StateOf(**created)), before, "live state");
}

TEST_F(ShardedBadInputTest, StrictListsMissingAndUnexpectedKeys) {
  ReadOptions options;
  // Renames every saved key: all are unexpected and all live keys missing.
  options.revise_keys = {{"^", "module."}};
  const absl::Status s = Load(options);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing keys: "), std::string::npos) << s;
  EXPECT_NE(s.message().find("unexpected keys: module."), std::string::npos)
      << s;
  ExpectUntouched();
}

TEST_F(ShardedBadInputTest, NonStrictSkipsUnmatchedKeysAndReviseKeysMaps) {
  ReadOptions options;
  options.strict = false;
  options.load_optimizer = false;
  options.revise_keys = {{"^", "module."}};
  ASSERT_THAT(Load(options), IsOk());
  ExpectUntouched();  // No model key matched: nothing changed.
  options.revise_keys = {{"^", "module."}, {"^module\\.", ""}};
  ASSERT_THAT(Load(options), IsOk());
  auto md = ReadMetadataFile(dir_);
  ASSERT_THAT(md, IsOk());
  EXPECT_FALSE(
      at::equal(StateOf(*live_).model[0].local, before_.begin()->second));
}

TEST_F(ShardedBadInputTest, PathThatIsNotACheckpoint) {
  const std::string empty = TempDir("not_a_checkpoint");
  absl::Status s = LoadSharded(empty, StateOf(*live_), {}, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("is not a Strata checkpoint"), std::string::npos)
      << s;
  const std::string file = empty + "/file.txt";
  std::ofstream(file) << "hello";
  s = LoadSharded(file, StateOf(*live_), {}, nullptr).status();
  EXPECT_NE(s.message().find("is not a Strata checkpoint"), std::string::npos)
      << s;
  s = LoadSharded(empty + "/missing", StateOf(*live_), {}, nullptr).status();
  EXPECT_NE(s.message().find("no such file"), std::string::npos) << s;
  ExpectUntouched();
}

TEST_F(ShardedBadInputTest, CorruptedMetadataIsRefused) {
  const std::string path = dir_ + "/" + kMetadataFile;
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  const absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  ExpectUntouched();
}

TEST(ShardedMultiRankTest, OneRankFailingFailsAllAndChangesNoRank) {
  const std::string dir = TempDir("one_rank_fails") + "/ckpt";
  SaveAt("zero2", 2, dir);
  // Rank 1's file is gone: rank 0 might find everything it needs in rank 0's
  // file, but neither rank may change its state.
  std::filesystem::remove(dir + "/rank1.data");
  absl::Status formed = RunOnRanks(2, [&](Group& group) {
    auto strategy = MakeStrategy("zero2", &group, 11, 0);
    ASSERT_NE(strategy, nullptr);
    const auto before = Snapshot(StateOf(*strategy));
    const absl::Status s =
        LoadSharded(dir, StateOf(*strategy), {}, &group).status();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("rank1.data"), std::string::npos) << s;
    ExpectSnapshotsEqual(Snapshot(StateOf(*strategy)), before, "live state");
  });
  ASSERT_THAT(formed, IsOk());
}

}  // namespace
}  // namespace strata::checkpoint
