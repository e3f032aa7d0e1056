#include "launch/config/train_flag_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/ascii.h"
#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Records every line of the table: its name, help (or test hook's what),
// whether it is a test hook and the field's address.
struct Line {
  std::string name;
  std::string help;
  bool test_hook = false;
  const void* field = nullptr;
};

class Recorder {
 public:
  template <class T>
  void operator()(const char* name, T* field, const char* help) {
    lines.push_back({name, help, false, field});
  }
  template <class T>
  void TestHook(const char* name, T* field, const char* what) {
    lines.push_back({name, what, true, field});
  }
  std::vector<Line> lines;
};

std::vector<Line> TableLines(TrainOptions& o) {
  Recorder recorder;
  VisitTrainFlags(o, recorder);
  return recorder.lines;
}

TEST(TrainFlagTableTest, NamesAreDistinctLowerCaseFlagNames) {
  TrainOptions o;
  std::set<std::string> names;
  for (const Line& line : TableLines(o)) {
    EXPECT_TRUE(names.insert(line.name).second) << line.name;
    for (char c : line.name) {
      EXPECT_TRUE(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_')
          << line.name;
    }
  }
  EXPECT_GT(names.size(), 80u);
}

TEST(TrainFlagTableTest, EveryLineSetsAFieldOfItsOwn) {
  TrainOptions o;
  std::set<const void*> fields;
  for (const Line& line : TableLines(o)) {
    EXPECT_TRUE(fields.insert(line.field).second) << line.name;
    EXPECT_GE(static_cast<const char*>(line.field),
              reinterpret_cast<const char*>(&o))
        << line.name;
    EXPECT_LT(static_cast<const char*>(line.field),
              reinterpret_cast<const char*>(&o) + sizeof(o))
        << line.name;
  }
}

TEST(TrainFlagTableTest, EveryLineIsDocumented) {
  TrainOptions o;
  for (const Line& line : TableLines(o)) {
    EXPECT_GT(line.help.size(), 10u) << line.name;
  }
}

TEST(TrainFlagTableTest, TheTestHooksAreTheFaultAndGeneratorFlags) {
  TrainOptions o;
  std::vector<std::string> hooks;
  for (const Line& line : TableLines(o)) {
    if (line.test_hook) hooks.push_back(line.name);
  }
  EXPECT_THAT(
      hooks, ElementsAre("ckpt_test_pause_ms", "test_kill_at", "test_kill_rank",
                         "dropout_test_default_generator"));
}

// Sets --seq_len's field to 77, nothing else.
struct SetSeqLen {
  template <class T>
  void operator()(const char* name, T* field, const char*) {
    if constexpr (std::is_same_v<T, int64_t>) {
      if (std::string(name) == "seq_len") *field = 77;
    }
  }
  template <class T>
  void TestHook(const char*, T*, const char*) {}
};

TEST(TrainFlagTableTest, ALineWritesTheFieldItNames) {
  TrainOptions o;
  VisitTrainFlags(o, SetSeqLen());
  EXPECT_EQ(o.seq_len, 77);
  EXPECT_EQ(o.global_batch, TrainOptions().global_batch);
}

template <class T>
void ExpectRoundTrip(const T& value) {
  ASSERT_OK_AND_ASSIGN(
      const T parsed,
      FlagSpelling<T>::Parse("flag", FlagSpelling<T>::Format(value)));
  EXPECT_EQ(parsed, value) << FlagSpelling<T>::Format(value);
}

// An enumerated value spells and parses back to itself.
TEST(TrainFlagTableTest, EnumeratedValuesRoundTrip) {
  ExpectRoundTrip(DataKind::kUint32);
  ExpectRoundTrip(Precision::kFp16);
  ExpectRoundTrip(optim::LrScheduleKind::kWarmupCosineLr);
  ExpectRoundTrip(strategies::OptimizerKind::kSgd);
  ExpectRoundTrip(strategies::StrategyKind::kZero2);
  ExpectRoundTrip(checkpoint::Format::kFull);
  ExpectRoundTrip(at::kBFloat16);
  ExpectRoundTrip(at::kHalf);
  ExpectRoundTrip(strategies::ShardingStrategy::kHybridShardZero2);
  ExpectRoundTrip(strategies::BackwardPrefetch::kBackwardPost);
}

TEST(TrainFlagTableTest, ABadEnumeratedValueNamesTheFlag) {
  EXPECT_THAT(
      FlagSpelling<DataKind>::Parse("data", "parquet"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--data")));
  EXPECT_THAT(
      FlagSpelling<checkpoint::Format>::Parse("ckpt_format", "zip"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--ckpt_format")));
  // The dtype flags share one spelling: the error names the flag read.
  EXPECT_THAT(FlagSpelling<at::ScalarType>::Parse("reduce_dtype", "fp8"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--reduce_dtype must be fp32, bf16 or fp16")));
  EXPECT_THAT(FlagSpelling<strategies::ShardingStrategy>::Parse("fsdp_sharding",
                                                                "zero3"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--fsdp_sharding")));
}

TEST(TrainFlagTableTest, ListsAreCommaSeparatedTrimmedWithEmptyEntriesKept) {
  using Spelling = FlagSpelling<std::vector<std::string>>;
  ASSERT_OK_AND_ASSIGN(const std::vector<std::string> none,
                       Spelling::Parse("checkpoint_units", ""));
  EXPECT_THAT(none, IsEmpty());
  ASSERT_OK_AND_ASSIGN(
      const std::vector<std::string> list,
      Spelling::Parse("checkpoint_units", " GPTBlock, blocks.3,,x "));
  EXPECT_THAT(list, ElementsAre("GPTBlock", "blocks.3", "", "x"));
  EXPECT_EQ(Spelling::Format({"a", "b"}), "a,b");
}

TEST(TrainFlagTableTest, FlagDefaultsAreTheOptionsDefaultsButOutputDir) {
  const TrainOptions flags = TrainFlagDefaults();
  const TrainOptions options;
  EXPECT_THAT(flags.output_dir, IsEmpty());
  EXPECT_EQ(flags.model, options.model);
  EXPECT_EQ(flags.steps, options.steps);
  EXPECT_EQ(flags.strategy.fsdp.backward_prefetch,
            options.strategy.fsdp.backward_prefetch);
}

}  // namespace
}  // namespace strata::launch
