#include "data/file_sources.h"

#include <dirent.h>
#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"

namespace strata::data {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A fresh path under the test's temporary directory.
std::string TempPath(const std::string& name) {
  static int counter = 0;
  return absl::StrCat(::testing::TempDir(), "/file_sources_test_", getpid(),
                      "_", counter++, "_", name);
}

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary);
  out << contents;
  out.close();
  CHECK(out) << "writing " << path;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

std::vector<int64_t> AllTokens(const TokenSource& source) {
  std::vector<int64_t> tokens(source.num_tokens());
  source.Read(0, source.num_tokens(), tokens.data());
  return tokens;
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  CHECK(d != nullptr) << dir;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

TEST(OpenByteTextTest, EveryByteIsItsTokenId) {
  const std::string path = WriteFile("text.txt", std::string("Hi\n\xff\0", 5));
  auto source = OpenByteText(path);
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ((*source)->vocab_size(), 256);
  EXPECT_EQ(AllTokens(**source), (std::vector<int64_t>{72, 105, 10, 255, 0}));
  EXPECT_EQ((*source)->Describe(), absl::StrCat("bytes(", path, ", 5 tokens)"));
}

TEST(OpenByteTextTest, ReadsAnInteriorRange) {
  auto source = OpenByteText(WriteFile("abc.txt", "abcdef"));
  ASSERT_THAT(source, IsOk());
  std::vector<int64_t> out(3);
  (*source)->Read(2, 3, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{'c', 'd', 'e'}));
}

TEST(OpenByteTextTest, MissingFileIsNotFound) {
  const std::string path = TempPath("missing.txt");
  auto source = OpenByteText(path);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(source.status().message(),
            absl::StrCat("cannot open ", path, ": No such file or directory"));
}

TEST(OpenByteTextTest, DirectoryIsRejected) {
  auto source = OpenByteText(::testing::TempDir());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(source.status().message()),
              HasSubstr(" is a directory, expected a regular file"));
}

TEST(OpenByteTextTest, EmptyFileIsRejected) {
  const std::string path = WriteFile("empty.txt", "");
  auto source = OpenByteText(path);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(source.status().message(),
            absl::StrCat(path,
                         " is empty (0 bytes), expected text (at least one "
                         "byte)"));
}

TEST(OpenTokenBinTest, ReadsLittleEndianUint16) {
  // 0x0102 = 258, 0xffff = 65535.
  const std::string path =
      WriteFile("u16.bin", std::string("\x02\x01\xff\xff\x07\x00", 6));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint16, 65536);
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ((*source)->num_tokens(), 3);
  EXPECT_EQ((*source)->vocab_size(), 65536);
  EXPECT_EQ(AllTokens(**source), (std::vector<int64_t>{258, 65535, 7}));
}

TEST(OpenTokenBinTest, ReadsLittleEndianUint32) {
  // 0x01020304 = 16909060.
  const std::string path =
      WriteFile("u32.bin", std::string("\x04\x03\x02\x01\x05\x00\x00\x00", 8));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint32, 16909061);
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ(AllTokens(**source), (std::vector<int64_t>{16909060, 5}));
}

TEST(OpenTokenBinTest, DescribeNamesPathDtypeVocabAndCount) {
  const std::string path = WriteFile("d.bin", std::string("\x01\x00", 2));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint16, 50304);
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ(
      (*source)->Describe(),
      absl::StrCat("token_bin(", path, ", uint16, vocab=50304, 1 tokens)"));
}

TEST(OpenTokenBinTest, TokenAtOrAboveVocabNamesFileOffsetAndValue) {
  const std::string path =
      WriteFile("big.bin", std::string("\x01\x00\x02\x00\x0a\x00", 6));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint16, 10);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(source.status().message(),
            absl::StrCat(path,
                         ": token at offset 2 (byte 4) is 10, expected an id "
                         "in [0, vocab_size = 10)"));
}

TEST(OpenTokenBinTest, SizeNotAMultipleOfWidthIsRejected) {
  const std::string path = WriteFile("odd.bin", std::string("\x01\x00\x02", 3));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint16, 10);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().message(),
            absl::StrCat(path,
                         " has 3 bytes, expected a multiple of 2 (uint16 "
                         "token ids)"));
}

TEST(OpenTokenBinTest, Uint32SizeMustBeAMultipleOfFour) {
  const std::string path = WriteFile("six.bin", std::string(6, '\0'));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint32, 10);
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(std::string(source.status().message()),
              HasSubstr("has 6 bytes, expected a multiple of 4"));
}

TEST(OpenTokenBinTest, EmptyFileIsRejected) {
  const std::string path = WriteFile("empty.bin", "");
  auto source = OpenTokenBin(path, TokenBinDtype::kUint16, 10);
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(std::string(source.status().message()),
              HasSubstr(absl::StrCat(path, " is empty (0 bytes)")));
}

TEST(OpenTokenBinTest, MissingFileIsNotFound) {
  auto source =
      OpenTokenBin(TempPath("missing.bin"), TokenBinDtype::kUint16, 10);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kNotFound);
}

TEST(OpenTokenBinTest, Uint16VocabAboveTwoToTheSixteenIsRejected) {
  const std::string path = WriteFile("v.bin", std::string(2, '\0'));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint16, 65537);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().message(),
            absl::StrCat("token file ", path,
                         ": vocab_size is 65537, expected a value in [1, "
                         "65536] for uint16 tokens"));
}

TEST(OpenTokenBinTest, VocabBelowOneIsRejected) {
  const std::string path = WriteFile("v0.bin", std::string(4, '\0'));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint32, 0);
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(
      std::string(source.status().message()),
      HasSubstr("vocab_size is 0, expected a value in [1, 4294967296]"));
}

TEST(WriteTokenBinTest, RoundTripsUint16) {
  const std::string path = TempPath("rt16.bin");
  const std::vector<int64_t> tokens = {0, 1, 258, 65535, 42};
  ASSERT_THAT(WriteTokenBin(tokens, path, TokenBinDtype::kUint16), IsOk());
  EXPECT_EQ(ReadFile(path),
            std::string("\x00\x00\x01\x00\x02\x01\xff\xff\x2a\x00", 10));
  auto source = OpenTokenBin(path, TokenBinDtype::kUint16, 65536);
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ(AllTokens(**source), tokens);
}

TEST(WriteTokenBinTest, RoundTripsUint32AcrossWriteChunks) {
  // More tokens than one write chunk (2^16), with ids above 2^16.
  std::vector<int64_t> tokens(200000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = i * 17 + 65536;
  const std::string path = TempPath("rt32.bin");
  ASSERT_THAT(WriteTokenBin(tokens, path, TokenBinDtype::kUint32), IsOk());
  auto source = OpenTokenBin(path, TokenBinDtype::kUint32, 17 * 200000 + 65536);
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ(AllTokens(**source), tokens);
}

TEST(WriteTokenBinTest, TokenThatDoesNotFitIsRejectedAndNothingWritten) {
  const std::string path = TempPath("nofit.bin");
  absl::Status status = WriteTokenBin({1, 65536}, path, TokenBinDtype::kUint16);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            absl::StrCat("writing token file ", path,
                         ": token at offset 1 is 65536, expected an id in [0, "
                         "65536) for uint16"));
  EXPECT_FALSE(Exists(path));
}

TEST(WriteTokenBinTest, NegativeTokenIsRejected) {
  absl::Status status =
      WriteTokenBin({-3}, TempPath("neg.bin"), TokenBinDtype::kUint32);
  EXPECT_THAT(std::string(status.message()), HasSubstr("offset 0 is -3"));
}

TEST(WriteTokenBinTest, NoTokensIsRejected) {
  absl::Status status =
      WriteTokenBin({}, TempPath("none.bin"), TokenBinDtype::kUint16);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("no tokens, expected at least one"));
}

TEST(WriteTokenBinTest, ReplacesAnExistingFileAndLeavesNoTemporary) {
  const std::string dir = TempPath("replace_dir");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string path = dir + "/out.bin";
  ASSERT_THAT(WriteTokenBin({1, 2, 3}, path, TokenBinDtype::kUint16), IsOk());
  ASSERT_THAT(WriteTokenBin({9}, path, TokenBinDtype::kUint16), IsOk());
  EXPECT_EQ(ReadFile(path), std::string("\x09\x00", 2));
  EXPECT_EQ(FilesIn(dir), std::vector<std::string>{"out.bin"});
}

TEST(WriteTokenBinTest, UnwritableDirectoryIsAnError) {
  const std::string path = TempPath("no_such_dir") + "/out.bin";
  absl::Status status = WriteTokenBin({1}, path, TokenBinDtype::kUint16);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              StartsWith(absl::StrCat("cannot create '", path, ".tmp.")));
}

TEST(TextFileToTokenBinTest, EachByteBecomesOneToken) {
  const std::string text = WriteFile("in.txt", std::string("ab\xc3\xa9", 4));
  const std::string bin = TempPath("out.bin");
  ASSERT_THAT(TextFileToTokenBin(text, bin, TokenBinDtype::kUint16), IsOk());
  auto source = OpenTokenBin(bin, TokenBinDtype::kUint16, 256);
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ(AllTokens(**source), (std::vector<int64_t>{97, 98, 0xc3, 0xa9}));
}

TEST(TextFileToTokenBinTest, MatchesByteTextSourceForUint32) {
  std::string contents;
  for (int i = 0; i < 150000; ++i) contents.push_back(static_cast<char>(i * 7));
  const std::string text = WriteFile("long.txt", contents);
  const std::string bin = TempPath("long.bin");
  ASSERT_THAT(TextFileToTokenBin(text, bin, TokenBinDtype::kUint32), IsOk());
  auto from_bin = OpenTokenBin(bin, TokenBinDtype::kUint32, 256);
  auto from_text = OpenByteText(text);
  ASSERT_THAT(from_bin, IsOk());
  ASSERT_THAT(from_text, IsOk());
  EXPECT_EQ(AllTokens(**from_bin), AllTokens(**from_text));
}

TEST(TextFileToTokenBinTest, MissingInputNamesItAndWritesNothing) {
  const std::string text = TempPath("absent.txt");
  const std::string bin = TempPath("absent.bin");
  absl::Status status = TextFileToTokenBin(text, bin, TokenBinDtype::kUint16);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
  EXPECT_FALSE(Exists(bin));
}

TEST(TokenBinDtypeTest, ParsesBothNames) {
  EXPECT_EQ(*ParseTokenBinDtype("uint16"), TokenBinDtype::kUint16);
  EXPECT_EQ(*ParseTokenBinDtype("uint32"), TokenBinDtype::kUint32);
}

TEST(TokenBinDtypeTest, UnknownNameIsRejected) {
  auto bad = ParseTokenBinDtype("int8");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "token dtype is 'int8', expected 'uint16' or 'uint32'");
}

TEST(TokenBinDtypeTest, NamesAndWidths) {
  EXPECT_EQ(TokenBinDtypeName(TokenBinDtype::kUint16), "uint16");
  EXPECT_EQ(TokenBinDtypeName(TokenBinDtype::kUint32), "uint32");
  EXPECT_EQ(TokenBinDtypeWidth(TokenBinDtype::kUint16), 2);
  EXPECT_EQ(TokenBinDtypeWidth(TokenBinDtype::kUint32), 4);
}

}  // namespace
}  // namespace strata::data
