#include "text/load_bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace strata::text {
namespace {

using ::strata::testing::FreshTempDir;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(LoadBpeTokenizerTest, ReadsByteLevelFiles) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string dir = absl::StrCat(srcdir != nullptr ? srcdir : ".",
                                       "/strata/text/testdata/gpt2");
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t = LoadBpeTokenizer(dir);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 50257);
}

TEST(LoadBpeTokenizerTest, RefusesSentencePieceModelsSayingWhy) {
  const std::string dir = FreshTempDir("load_bpe_spm");
  ASSERT_TRUE(WriteFileAtomic(dir + "/tokenizer.model", "x").ok());
  for (const std::string& path : {dir + "/tokenizer.model", dir}) {
    EXPECT_THAT(LoadBpeTokenizer(path),
                StatusIs(absl::StatusCode::kUnimplemented,
                         HasSubstr("make_token_bin --tokenizer=" + dir +
                                   "/tokenizer.model")));
  }
}

}  // namespace
}  // namespace strata::text
