// The README's whole path for a Hugging Face GPT-2 directory, through the
// binaries in fresh processes: fine-tune from the directory (--model and
// --load_weights the directory) on a text file encoded by its own
// tokenizer.json with FSDP at 2 ranks, generate text from a text prompt, and
// export back to Hugging Face. The directory is written here: a 2-layer GPT-2
// config.json with GPT-2's 50257-token vocabulary, weights from a one-step
// run exported by `strata_ckpt convert --to=hf-gpt2`, and GPT-2's real
// tokenizer.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::MetricsColumn;
using ::strata::launch::testing::TempDir;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kConfig[] = R"({"architectures": ["GPT2LMHeadModel"],
  "model_type": "gpt2", "vocab_size": 50257, "n_positions": 128,
  "n_embd": 64, "n_layer": 2, "n_head": 4, "layer_norm_epsilon": 1e-5,
  "tie_word_embeddings": true, "activation_function": "gelu_new"})";

RunResult RunBinary(std::vector<std::string> args) {
  return ::strata::testing::Run(args, {}, absl::Seconds(240));
}

std::vector<std::string> TrainArgs(const std::string& out, int steps) {
  return {RunfilePath("launch/train/train"),
          absl::StrCat("--steps=", steps),
          "--warmup_steps=0",
          "--seq_len=32",
          "--global_batch=4",
          "--log_interval=1",
          "--eval_interval=0",
          "--lr=1e-3",
          absl::StrCat("--output_dir=", out)};
}

// A Hugging Face GPT-2 directory: config.json, model.safetensors,
// tokenizer.json.
std::string WriteHfGpt2Directory() {
  const std::string config = TempDir("hf_config.json");
  std::ofstream(config) << kConfig;
  const std::string seed = TempDir("hf_seed");
  std::vector<std::string> args = TrainArgs(seed, 1);
  args.push_back("--model=" + config);
  args.push_back("--save_every=1");
  args.push_back("--ckpt_format=full");
  RunResult r = RunBinary(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string dir = TempDir("gpt2");
  // No --model: the checkpoint records the config itself (the file above
  // could be gone by now).
  r = RunBinary({RunfilePath("checkpoint/strategy/strata_ckpt"), "convert",
                 "--to=hf-gpt2", seed + "/checkpoints/step_00000001.pth", dir});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::filesystem::copy_file(RunfilePath("text/testdata/gpt2/tokenizer.json"),
                             dir + "/tokenizer.json");
  return dir;
}

std::string WriteText() {
  const std::string path = TempDir("book.txt");
  std::ofstream out(path);
  for (int i = 0; i < 200; ++i) {
    out << "This License applies to any program or other work which contains "
           "a notice placed by the copyright holder saying it may be "
           "distributed under the terms of this General Public License.\n";
  }
  return path;
}

// strata_generate's greedy continuation of "This License" (text out).
RunResult Generate(const std::string& model, const std::string& weights,
                   const std::string& tokenizer) {
  return RunBinary({RunfilePath("launch/generate/strata_generate"),
                    "--model=" + model, "--load_weights=" + weights,
                    "--tokenizer=" + tokenizer, "--prompt=This License",
                    "--max_new_tokens=16", "--temperature=0"});
}

TEST(HfTextPathTest, FineTuneGenerateAndExportFromAHuggingFaceDirectory) {
  const std::string gpt2 = WriteHfGpt2Directory();
  const std::string tokenizer = gpt2 + "/tokenizer.json";
  const std::string book = WriteText();

  // 1. Fine-tune from the directory with FSDP at 2 ranks.
  const std::string ft = TempDir("ft");
  std::vector<std::string> args = TrainArgs(ft, 6);
  for (const std::string& flag :
       {"--model=" + gpt2, "--load_weights=" + gpt2, std::string("--data=text"),
        "--data_path=" + book, "--tokenizer=" + tokenizer,
        std::string("--nproc=2"), std::string("--strategy=fsdp")}) {
    args.push_back(flag);
  }
  RunResult r = RunBinary(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> loss = MetricsColumn(ft + "/metrics.jsonl", "loss");
  ASSERT_EQ(loss.size(), 6u);
  // One sentence repeated: six steps at lr 1e-3 fit it well below the
  // first step's loss.
  EXPECT_LT(loss.back(), loss.front() - 0.5);

  // 2. Text in, text out, from the directory's config and tokenizer.
  RunResult from_pt = Generate(gpt2, ft + "/model.pt", tokenizer);
  ASSERT_EQ(from_pt.exit_code, 0) << from_pt.err;
  EXPECT_THAT(from_pt.out, StartsWith("This License"));
  EXPECT_GT(from_pt.out.size(), std::string("This License\n").size());

  // 3. Export to Hugging Face and import back: the same weights bitwise,
  // so the same greedy text.
  const std::string exported = TempDir("gpt2_ft");
  r = RunBinary({RunfilePath("checkpoint/strategy/strata_ckpt"), "convert",
                 "--to=hf-gpt2", "--model=" + gpt2, ft + "/model.pt",
                 exported});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string back = TempDir("gpt2_ft.pt");
  r = RunBinary({RunfilePath("checkpoint/strategy/strata_ckpt"), "convert",
                 "--from=hf-gpt2", exported, back});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const std::string& weights : {exported, back}) {
    RunResult again = Generate(gpt2, weights, tokenizer);
    ASSERT_EQ(again.exit_code, 0) << weights << ": " << again.err;
    EXPECT_EQ(again.out, from_pt.out) << weights;
  }
}

// A registered model reshaped by --vocab_size: its checkpoint records the
// reshaped config, so the export needs no --model and writes that
// vocabulary, and the export's weights load back under the same flags.
TEST(HfTextPathTest, ExportOfAVocabSizeRunNeedsNoModelFlag) {
  const std::string run = TempDir("vocab_run");
  std::vector<std::string> args = TrainArgs(run, 1);
  for (const char* flag : {"--model=gpt-tiny", "--vocab_size=300",
                           "--save_every=1", "--ckpt_format=full"}) {
    args.push_back(flag);
  }
  RunResult r = RunBinary(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string hf = TempDir("vocab_hf");
  r = RunBinary({RunfilePath("checkpoint/strategy/strata_ckpt"), "convert",
                 "--to=hf-gpt2", run + "/checkpoints/step_00000001.pth", hf});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream config(hf + "/config.json");
  const std::string text((std::istreambuf_iterator<char>(config)),
                         std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("\"vocab_size\": 300"));
  const std::string again = TempDir("vocab_again");
  args = TrainArgs(again, 1);
  for (const std::string& flag :
       {std::string("--model=gpt-tiny"), std::string("--vocab_size=300"),
        "--load_weights=" + hf}) {
    args.push_back(flag);
  }
  r = RunBinary(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace strata::launch
