// make_token_bin as a subprocess: with --tokenizer the token file holds the
// tokenizer's ids of each input file and an end-of-text token after each,
// the same for 1 and 3 threads; bad flags fail naming them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/file_io.h"
#include "base/testing/subprocess.h"
#include "base/testing/temp_dir.h"
#include "data/file_sources.h"

namespace strata::launch {
namespace {

using ::strata::testing::FreshTempDir;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

RunResult RunMakeTokenBin(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {RunfilePath("data/make_token_bin")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return ::strata::testing::Run(argv, {}, absl::Seconds(60));
}

std::vector<int64_t> ReadBin(const std::string& path, int64_t vocab) {
  auto bin = data::OpenTokenBin(path, data::TokenBinDtype::kUint16, vocab);
  EXPECT_TRUE(bin.ok()) << bin.status();
  if (!bin.ok()) return {};
  std::vector<int64_t> ids((*bin)->num_tokens());
  (*bin)->Read(0, ids.size(), ids.data());
  return ids;
}

TEST(MakeTokenBinTest, EncodesFilesWithTheTokenizerOnAnyThreadCount) {
  const std::string dir = FreshTempDir("make_token_bin");
  ASSERT_TRUE(WriteFileAtomic(dir + "/a.txt", "Hello world").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/b.txt", "Hello").ok());
  const std::string tokenizer =
      RunfilePath("text/testdata/gpt2/tokenizer.json");
  for (const char* threads : {"--threads=1", "--threads=3"}) {
    RunResult r =
        RunMakeTokenBin({"--tokenizer=" + tokenizer,
                         "--input=" + dir + "/a.txt," + dir + "/b.txt",
                         "--output=" + dir + "/out.bin", threads});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("Wrote 5 uint16 tokens (vocab 50257)"));
    // GPT-2: Hello 15496, " world" 995, <|endoftext|> 50256.
    EXPECT_THAT(ReadBin(dir + "/out.bin", 50257),
                ElementsAre(15496, 995, 50256, 15496, 50256));
  }
}

TEST(MakeTokenBinTest, WithoutATokenizerEachByteIsAToken) {
  const std::string dir = FreshTempDir("make_token_bin_bytes");
  ASSERT_TRUE(WriteFileAtomic(dir + "/a.txt", "Hi").ok());
  RunResult r = RunMakeTokenBin(
      {"--input=" + dir + "/a.txt", "--output=" + dir + "/out.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(ReadBin(dir + "/out.bin", 256), ElementsAre('H', 'i'));
}

TEST(MakeTokenBinTest, BadFlagsFailNamingThem) {
  const std::string dir = FreshTempDir("make_token_bin_bad");
  ASSERT_TRUE(WriteFileAtomic(dir + "/a.txt", "Hi").ok());
  RunResult r = RunMakeTokenBin({"--tokenizer=" + dir + "/none.json",
                                 "--input=" + dir + "/a.txt",
                                 "--output=" + dir + "/o.bin"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tokenizer: " + dir + "/none.json: no such"));
  r = RunMakeTokenBin(
      {"--tokenizer=" + RunfilePath("text/testdata/cl100k_base.tiktoken"),
       "--input=" + dir + "/a.txt", "--output=" + dir + "/o.bin"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("uint16 cannot hold the ids"));
  r = RunMakeTokenBin({"--input=" + dir + "/a.txt," + dir + "/a.txt",
                       "--output=" + dir + "/o.bin"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("several need --tokenizer"));
}

}  // namespace
}  // namespace strata::launch
