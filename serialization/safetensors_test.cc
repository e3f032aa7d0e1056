#include "serialization/safetensors.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace strata::serialization {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

using Named = std::vector<std::pair<std::string, at::Tensor>>;

// A file of `header` (JSON text, not padded) followed by `data`.
std::string FileBytes(const std::string& header, const std::string& data) {
  const uint64_t length = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &length, 8);
  return bytes + header + data;
}

absl::Status Load(const std::string& header, const std::string& data) {
  return SafetensorsFile::FromBytes(FileBytes(header, data), "t.safetensors")
      .status();
}

// One tensor of every supported dtype, with distinct values.
Named EveryDtype() {
  const at::Tensor base = at::arange(-6, 6, at::kDouble).view({3, 4}) * 1.5;
  Named tensors;
  for (at::ScalarType type : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16,
                              at::kLong, at::kInt, at::kShort, at::kChar}) {
    tensors.emplace_back(c10::toString(type), base.to(type));
  }
  tensors.emplace_back("Byte", (base + 10).to(at::kByte));
  tensors.emplace_back("Bool", base.gt(0));
  tensors.emplace_back("empty", at::zeros({0, 5}));
  tensors.emplace_back("scalar", at::full({}, 7.25));
  return tensors;
}

TEST(SafetensorsTest, RoundTripsEveryDtypeAndMetadata) {
  const std::string path =
      strata::testing::FreshTempDir("st_round") + "/m.safetensors";
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"note", "héllo"}};
  ASSERT_THAT(WriteSafetensors(path, EveryDtype(), metadata), IsOk());
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  EXPECT_EQ(file->metadata(), metadata);
  EXPECT_EQ(file->entries().size(), EveryDtype().size());
  for (const auto& [name, expected] : EveryDtype()) {
    ASSERT_OK_AND_ASSIGN(at::Tensor read, file->View(name));
    EXPECT_EQ(read.scalar_type(), expected.scalar_type()) << name;
    EXPECT_EQ(read.sizes(), expected.sizes()) << name;
    EXPECT_TRUE(at::equal(read, expected)) << name;
  }
}

TEST(SafetensorsTest, WritesHeaderPaddedToEightWithLargestElementsFirst) {
  const std::string path =
      strata::testing::FreshTempDir("st_pad") + "/m.safetensors";
  ASSERT_THAT(WriteSafetensors(path, {{"b", at::ones({3}, at::kByte)},
                                      {"a", at::ones({1}, at::kDouble)},
                                      {"c", at::ones({2}, at::kFloat)}}),
              IsOk());
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadWholeFile(path));
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_bytes + 8 + 8 + 3);
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  ASSERT_EQ(file->entries().size(), 3u);
  EXPECT_EQ(file->entries()[0].name, "a");
  EXPECT_EQ(file->entries()[1].name, "c");
  EXPECT_EQ(file->entries()[2].name, "b");
  EXPECT_EQ(file->entries()[2].begin, 16);
}

TEST(SafetensorsTest, ViewsShareTheMappingAndOutliveTheFileObject) {
  const std::string path =
      strata::testing::FreshTempDir("st_view") + "/m.safetensors";
  ASSERT_THAT(WriteSafetensors(path, {{"w", at::arange(16, at::kFloat)}}),
              IsOk());
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  ASSERT_OK_AND_ASSIGN(at::Tensor first, file->View("w"));
  ASSERT_OK_AND_ASSIGN(at::Tensor second, file->View("w"));
  EXPECT_EQ(first.data_ptr(), second.data_ptr());
  file.reset();  // The views keep the mapping.
  EXPECT_TRUE(at::equal(first, at::arange(16, at::kFloat)));
}

TEST(SafetensorsTest, WritingToAViewLeavesTheFileUnchanged) {
  const std::string path =
      strata::testing::FreshTempDir("st_cow") + "/m.safetensors";
  ASSERT_THAT(WriteSafetensors(path, {{"w", at::ones({4})}}), IsOk());
  {
    ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
    ASSERT_OK_AND_ASSIGN(at::Tensor view, file->View("w"));
    view.fill_(5);
  }
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  ASSERT_OK_AND_ASSIGN(at::Tensor again, file->View("w"));
  EXPECT_TRUE(at::equal(again, at::ones({4})));
}

TEST(SafetensorsTest, UnalignedTensorIsCopiedWithItsValues) {
  std::string data(1 + 8, '\0');
  data[0] = 3;
  const float values[2] = {1.5f, -2.0f};
  std::memcpy(data.data() + 1, values, 8);
  ASSERT_OK_AND_ASSIGN(
      auto file,
      SafetensorsFile::FromBytes(
          FileBytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})",
                    data),
          "t"));
  ASSERT_OK_AND_ASSIGN(at::Tensor b, file->View("b"));
  EXPECT_EQ(b[0].item<float>(), 1.5f);
  EXPECT_EQ(b[1].item<float>(), -2.0f);
}

TEST(SafetensorsTest, WritesNonContiguousTensorsInCOrder) {
  const std::string path =
      strata::testing::FreshTempDir("st_t") + "/m.safetensors";
  const at::Tensor t = at::arange(6, at::kFloat).view({2, 3}).t();
  ASSERT_THAT(WriteSafetensors(path, {{"t", t}}), IsOk());
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  ASSERT_OK_AND_ASSIGN(at::Tensor read, file->View("t"));
  EXPECT_TRUE(at::equal(read, t));
}

TEST(SafetensorsTest, FileWithNoTensorsLoads) {
  ASSERT_OK_AND_ASSIGN(auto file,
                       SafetensorsFile::FromBytes(FileBytes("{}  ", ""), "t"));
  EXPECT_TRUE(file->entries().empty());
}

TEST(SafetensorsTest, MissingTensorIsNotFound) {
  ASSERT_OK_AND_ASSIGN(auto file,
                       SafetensorsFile::FromBytes(FileBytes("{}", ""), "t"));
  EXPECT_THAT(file->View("x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("'x'")));
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  EXPECT_THAT(SafetensorsFile::Open("/nonexistent/m.safetensors"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("/nonexistent/m.safetensors")));
}

TEST(SafetensorsTest, RefusesFileShorterThanTheLength) {
  EXPECT_THAT(SafetensorsFile::FromBytes("abc", "t.safetensors"),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("t.safetensors: truncated")));
}

TEST(SafetensorsTest, RefusesHeaderLengthLargerThanTheFile) {
  std::string bytes = FileBytes("{}", "");
  bytes.pop_back();
  EXPECT_THAT(SafetensorsFile::FromBytes(bytes, "t.safetensors"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("header length (2 bytes) is larger than")));
}

TEST(SafetensorsTest, RefusesHeaderNotStartingWithBrace) {
  EXPECT_THAT(Load(" {}", ""), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("does not start with '{'")));
}

TEST(SafetensorsTest, RefusesInvalidJson) {
  EXPECT_THAT(Load("{\"a\":", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t.safetensors header:1:")));
}

TEST(SafetensorsTest, RefusesDuplicateKeys) {
  const std::string entry =
      R"({"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  EXPECT_THAT(Load("{\"a\":" + entry + ",\"a\":" + entry + "}", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a: the key appears twice")));
}

TEST(SafetensorsTest, RefusesNonUtf8Key) {
  EXPECT_THAT(
      Load("{\"a\xc3\x28\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":"
           "[0,0]}}",
           ""),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("JSON syntax")));
}

TEST(SafetensorsTest, RefusesUnknownDtype) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}})", "abcd"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("tensor 'a': unknown dtype 'F31'")));
}

TEST(SafetensorsTest, RefusesDtypeLibTorchLacks) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})", "ab"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("'U16' has no LibTorch 1.13 type")));
}

TEST(SafetensorsTest, RefusesShapeNotMatchingTheByteSpan) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("shape [2] of F32 needs 8 bytes, but data_offsets "
                         "span 4")));
}

TEST(SafetensorsTest, RefusesShapeWhoseSizeOverflows) {
  EXPECT_THAT(Load(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
                   R"("data_offsets":[0,4]}})",
                   "abcd"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("more than 2^63")));
}

TEST(SafetensorsTest, RefusesNegativeDimension) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", ""),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("a shape entry must be a non-negative integer")));
}

TEST(SafetensorsTest, RefusesOffsetsPastTheData) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", "abcd"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("run past the data section (4 bytes)")));
}

TEST(SafetensorsTest, RefusesOffsetsEndingBeforeTheyBegin) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}})", "ab"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("end before they begin")));
}

TEST(SafetensorsTest, RefusesOverlappingTensors) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
           R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
           "abcd"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("tensor 'b' (data_offsets [2, 4]) overlaps tensor "
                         "'a'")));
}

TEST(SafetensorsTest, RefusesGapBetweenTensors) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
           R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
           "abcd"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("bytes [1, 2) of the data belong to no tensor")));
}

TEST(SafetensorsTest, RefusesDataPastTheLastTensor) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "abcd"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("the tensors cover 2 bytes of data, but the file "
                         "holds 4")));
}

TEST(SafetensorsTest, RefusesMissingField) {
  EXPECT_THAT(Load(R"({"a":{"dtype":"U8","shape":[0]}})", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'a': missing field 'data_offsets'")));
}

TEST(SafetensorsTest, RefusesUnexpectedField) {
  EXPECT_THAT(
      Load(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":1}})",
           ""),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("tensor 'a': unexpected field 'x'")));
}

TEST(SafetensorsTest, RefusesNonStringMetadata) {
  EXPECT_THAT(Load(R"({"__metadata__":{"step":3}})", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("__metadata__ key 'step' must have a string "
                                 "value")));
}

TEST(SafetensorsTest, RefusesBoolByteOtherThanZeroOrOne) {
  EXPECT_THAT(Load(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                   std::string("\x01\x02", 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("BOOL tensor 'm' has byte 2 at element 1")));
}

TEST(SafetensorsTest, WriterRefusesDuplicateNames) {
  const std::string path =
      strata::testing::FreshTempDir("st_dup") + "/m.safetensors";
  EXPECT_THAT(
      WriteSafetensors(path, {{"a", at::ones({1})}, {"a", at::ones({1})}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("tensor 'a' is given twice")));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsTest, WriterRefusesTheMetadataName) {
  const std::string path =
      strata::testing::FreshTempDir("st_meta") + "/m.safetensors";
  EXPECT_THAT(WriteSafetensors(path, {{"__metadata__", at::ones({1})}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'__metadata__' is not a tensor name")));
}

TEST(SafetensorsTest, WriterRefusesNonUtf8Name) {
  const std::string path =
      strata::testing::FreshTempDir("st_utf") + "/m.safetensors";
  EXPECT_THAT(
      WriteSafetensors(path, {{"a\xff", at::ones({1})}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not UTF-8")));
}

TEST(SafetensorsTest, WriterRefusesDtypeTheFormatLacksAndKeepsTheOldFile) {
  const std::string path =
      strata::testing::FreshTempDir("st_cplx") + "/m.safetensors";
  ASSERT_THAT(WriteSafetensors(path, {{"a", at::ones({1})}}), IsOk());
  EXPECT_THAT(WriteSafetensors(path, {{"c", at::ones({1}, at::kComplexFloat)}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'c': safetensors has no dtype for")));
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  EXPECT_TRUE(file->Contains("a"));
}

}  // namespace
}  // namespace strata::serialization
