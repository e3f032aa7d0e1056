// Runs the strata_ckpt binary on checkpoints saved here.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/metadata.h"
#include "checkpoint/strategy/checkpoint.h"
#include "checkpoint/testing/states.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/state_dict.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

using comm::Group;
using comm::testing::RunOnRanks;
using testing::AddRuns;
using testing::ExpectGlobalsEqual;
using testing::Globals;
using testing::MakeStrategy;
using testing::StateOf;
using testing::TempDir;

struct ToolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr.
};

ToolResult Tool(const std::string& args) {
  const std::string log = TempDir("tool_log") + "/out.txt";
  const int rc = std::system(absl::StrCat("checkpoint/strategy/strata_ckpt ",
                                          args, " > ", log, " 2>&1")
                                 .c_str());
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, s.str()};
}

// Saves zero2's state at 2 ranks (trained 2 steps) as `format` at `path`.
Globals Save(Format format, const std::string& path) {
  Globals saved;
  std::mutex mu;
  EXPECT_TRUE(RunOnRanks(2, [&](Group& group) {
                auto strategy = MakeStrategy("zero2", &group, 7, 2);
                ASSERT_NE(strategy, nullptr);
                AddRuns(StateOf(*strategy), saved, mu);
                SaveOptions options;
                options.format = format;
                Contents contents;
                contents.meta.step = 2;
                ASSERT_THAT(
                    SaveCheckpoint(path, *strategy, &group, contents, options),
                    IsOk());
              }).ok());
  return saved;
}

Globals LoadInto(const std::string& kind, int world, const std::string& path) {
  Globals loaded;
  std::mutex mu;
  EXPECT_TRUE(RunOnRanks(world, [&](Group& group) {
                Group* g = kind == "single" ? nullptr : &group;
                auto strategy = MakeStrategy(kind, g, 11, 0);
                ASSERT_NE(strategy, nullptr);
                auto contents = LoadCheckpoint(path, *strategy, g);
                ASSERT_THAT(contents, IsOk());
                EXPECT_EQ(contents->meta.step, 2);
                AddRuns(StateOf(*strategy), loaded, mu);
              }).ok());
  return loaded;
}

TEST(StrataCkptTest, InspectPrintsMetaAndTensors) {
  const std::string path = TempDir("inspect") + "/ckpt";
  Save(Format::kSharded, path);
  const ToolResult r = Tool("inspect " + path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* line :
       {"format: sharded", "step: 2", "world size: 2", "strategy: zero2",
        "model blocks.0.mlp.fc.weight [256, 64] Float",
        "optimizer blocks.0.mlp.fc.weight.exp_avg [256, 64] Float",
        "optimizer step [] Long"}) {
    EXPECT_NE(r.output.find(std::string(line) + "\n"), std::string::npos)
        << line << " in\n"
        << r.output;
  }
}

TEST(StrataCkptTest, VerifyPassesThenNamesTheCorruptedChunk) {
  const std::string path = TempDir("verify") + "/ckpt";
  Save(Format::kSharded, path);
  ToolResult r = Tool("verify " + path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("OK: "), std::string::npos) << r.output;
  auto md = ReadMetadataFile(path);
  ASSERT_THAT(md, IsOk());
  const proto::Chunk& c = md->optimizer(0).chunks(0);
  {
    std::fstream f(path + "/" + c.file(),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(c.byte_offset());
    char byte;
    f.read(&byte, 1);
    byte ^= 1;
    f.seekp(c.byte_offset());
    f.write(&byte, 1);
  }
  r = Tool("verify " + path);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(
                absl::StrCat("tensor '", md->optimizer(0).name(), "' chunk 0")),
            std::string::npos)
      << r.output;
}

TEST(StrataCkptTest, ConvertsShardedToFullAndBack) {
  const std::string dir = TempDir("convert");
  const Globals saved = Save(Format::kSharded, dir + "/sharded");
  ToolResult r =
      Tool(absl::StrCat("convert ", dir, "/sharded ", dir, "/full.pth full"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectGlobalsEqual(LoadInto("single", 1, dir + "/full.pth"), saved,
                     "sharded -> full");
  r = Tool(absl::StrCat("convert ", dir, "/full.pth ", dir, "/again sharded"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectGlobalsEqual(LoadInto("ddp", 3, dir + "/again"), saved,
                     "full -> sharded");
}

TEST(StrataCkptTest, ConvertsLocalToFull) {
  const std::string dir = TempDir("convert_local");
  const Globals saved = Save(Format::kLocal, dir + "/local");
  const ToolResult r =
      Tool(absl::StrCat("convert ", dir, "/local ", dir, "/full.pth full"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectGlobalsEqual(LoadInto("zero1", 3, dir + "/full.pth"), saved,
                     "local -> full");
}

// Sharded -> DCP (--to=dcp) -> full: each loads anywhere bitwise; inspect
// and verify read the DCP directory.
TEST(StrataCkptTest, ConvertsToDcpAndBack) {
  const std::string dir = TempDir("convert_dcp");
  const Globals saved = Save(Format::kSharded, dir + "/sharded");
  ToolResult r =
      Tool(absl::StrCat("convert --to=dcp ", dir, "/sharded ", dir, "/dcp"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectGlobalsEqual(LoadInto("fsdp", 3, dir + "/dcp"), saved,
                     "sharded -> dcp");
  r = Tool("inspect " + dir + "/dcp");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* line :
       {"format: dcp", "step: 2", "strategy: zero2",
        "model blocks.0.mlp.fc.weight [256, 64] Float",
        "optimizer blocks.0.mlp.fc.weight.exp_avg [256, 64] Float",
        "optimizer step [] Long"}) {
    EXPECT_NE(r.output.find(std::string(line) + "\n"), std::string::npos)
        << line << " in\n"
        << r.output;
  }
  r = Tool("verify " + dir + "/dcp");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = Tool(absl::StrCat("convert ", dir, "/dcp ", dir, "/full.pth full"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectGlobalsEqual(LoadInto("single", 1, dir + "/full.pth"), saved,
                     "dcp -> full");
}

TEST(StrataCkptTest, BadArgumentsAndPaths) {
  EXPECT_EQ(Tool("").exit_code, 2);
  EXPECT_EQ(Tool("frobnicate x").exit_code, 2);
  const ToolResult r = Tool("inspect " + TempDir("nothing_here"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("is not a Strata checkpoint"), std::string::npos)
      << r.output;
}

// A state dict -> Hugging Face Llama (sharded) -> a state dict again.
TEST(StrataCkptTest, HfLlamaExportThenImportIsBitwise) {
  const std::string dir = TempDir("hf_round_trip");
  absl::StatusOr<models::ModelConfig> config =
      models::ConfigByName("llama-tiny");
  ASSERT_THAT(config, IsOk());
  models::BuildOptions options;
  options.seed = 9;
  absl::StatusOr<std::shared_ptr<models::UnitModel>> model =
      models::BuildModel(*config, options);
  ASSERT_THAT(model, IsOk());
  ASSERT_THAT(models::SaveStateDict(**model, dir + "/w.pt"), IsOk());
  ToolResult r = Tool(absl::StrCat(
      "convert --to=hf-llama --model=llama-tiny --max_shard_bytes=100000 ", dir,
      "/w.pt ", dir, "/hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(
      std::filesystem::exists(dir + "/hf/model.safetensors.index.json"));
  r = Tool(
      absl::StrCat("convert --from=hf-llama ", dir, "/hf ", dir, "/back.pt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--model=llama-tiny"), std::string::npos) << r.output;
  absl::StatusOr<c10::IValue> back =
      serialization::ReadTorchFile(dir + "/back.pt");
  ASSERT_THAT(back, IsOk());
  const c10::Dict<c10::IValue, c10::IValue> dict = back->toGenericDict();
  const auto state = models::NamedStateTensors(**model);
  ASSERT_EQ(dict.size(), state.size());
  for (const auto& [name, tensor] : state) {
    ASSERT_TRUE(dict.contains(name)) << name;
    EXPECT_TRUE(at::equal(dict.at(name).toTensor(), tensor)) << name;
  }
}

TEST(StrataCkptTest, HfExportOfABareStateDictAsksForTheModel) {
  const std::string dir = TempDir("hf_no_model");
  ASSERT_THAT(models::SaveStateDict({{"w", at::ones({2})}}, dir + "/w.pt"),
              IsOk());
  const ToolResult r =
      Tool(absl::StrCat("convert --to=hf-gpt2 ", dir, "/w.pt ", dir, "/hf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("name it with --model=NAME"), std::string::npos)
      << r.output;
}

TEST(StrataCkptTest, HfExportNamesTheModelFlagOfADirectoryWithoutConfig) {
  const std::string dir = TempDir("hf_model_dir");
  ASSERT_THAT(models::SaveStateDict({{"w", at::ones({2})}}, dir + "/w.pt"),
              IsOk());
  std::filesystem::create_directories(dir + "/empty");
  const ToolResult r = Tool(absl::StrCat("convert --to=hf-gpt2 --model=", dir,
                                         "/empty ", dir, "/w.pt ", dir, "/hf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(absl::StrCat("--model=", dir, "/empty: ")),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
}

TEST(StrataCkptTest, HfConvertRefusesAnUnknownFlag) {
  const ToolResult r = Tool("convert --from=hf-gpt2 --shards=2 a b");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown flag '--shards=2'"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace strata::checkpoint
