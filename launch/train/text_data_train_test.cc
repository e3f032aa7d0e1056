// train --data=text through the binary: a text file encoded at start-up by
// --tokenizer (GPT-2's tokenizer.json) trains gpt-tiny with GPT-2's
// vocabulary; the data line names the tokenized file; the flag pairing is
// checked before any work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/file_io.h"
#include "base/testing/subprocess.h"
#include "base/testing/temp_dir.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::MetricsColumn;
using ::strata::testing::FreshTempDir;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::SizeIs;

RunResult Train(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {RunfilePath("launch/train/train")};
  args.insert(args.end(), flags.begin(), flags.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(180));
}

TEST(TextDataTrainTest, TrainsOnATokenizedTextFile) {
  const std::string dir = FreshTempDir("text_data_train");
  std::string text;
  for (int i = 0; i < 200; ++i) {
    absl::StrAppend(&text, "Line ", i, ": the quick brown fox jumps over ",
                    "the lazy dog.\n");
  }
  ASSERT_TRUE(WriteFileAtomic(dir + "/book.txt", text).ok());
  RunResult r =
      Train({"--model=gpt-tiny", "--vocab_size=50257", "--data=text",
             "--data_path=" + dir + "/book.txt",
             "--tokenizer=" + RunfilePath("text/testdata/gpt2/tokenizer.json"),
             "--seq_len=32", "--global_batch=2", "--steps=2",
             "--warmup_steps=0", "--log_interval=1", "--eval_interval=0",
             "--threads=1", "--output_dir=" + dir + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err + r.out, HasSubstr("tokenized " + dir +
                                       "/book.txt with "
                                       "byte-level BPE from tokenizer.json"));
  EXPECT_THAT(MetricsColumn(dir + "/out/metrics.jsonl", "loss"), SizeIs(2));
}

TEST(TextDataTrainTest, TextDataNeedsATokenizerAndOnlyIt) {
  RunResult r = Train({"--data=text", "--data_path=/nonexistent.txt"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--tokenizer"));
  EXPECT_THAT(r.err, HasSubstr("is required with --data=text"));
  r = Train({"--tokenizer=/x/tokenizer.json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("read only with it"));
}

}  // namespace
}  // namespace strata::launch
