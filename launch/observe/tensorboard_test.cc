#include "launch/observe/tensorboard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/testing/status_matchers.h"
#include "launch/testing/event_file_reader.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::testing::IsOk;
using ::testing::HasSubstr;

uint32_t Le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(s[at + i]))
         << (8 * i);
  }
  return v;
}

TEST(MaskedCrc32cTest, MasksTheCrcOfTheCheckValue) {
  // CRC-32C("123456789") = 0xE3069283; rotated right by 15 = 0x2507C60D,
  // plus 0xa282ead8 (mod 2^32) = 0xC78AB0E5.
  EXPECT_EQ(MaskedCrc32c("123456789", 9), 0xC78AB0E5u);
}

TEST(MaskedCrc32cTest, MasksZeroToTheDelta) {
  EXPECT_EQ(MaskedCrc32c("", 0), 0xa282ead8u);
}

TEST(FrameRecordTest, FramesLengthCrcDataCrc) {
  const std::string record = FrameRecord("abc");
  ASSERT_EQ(record.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(record.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(Le32(record, 8), MaskedCrc32c(record.data(), 8));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(Le32(record, 15), MaskedCrc32c("abc", 3));
}

TEST(TensorBoardWriterTest, NamesTheFileByTimeAndHost) {
  const int64_t before_s = absl::ToUnixSeconds(absl::Now());
  auto writer = TensorBoardWriter::Open(TempDir("name"));
  ASSERT_THAT(writer, IsOk());
  const int64_t after_s = absl::ToUnixSeconds(absl::Now());
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string name =
      std::filesystem::path((*writer)->path()).filename().string();
  bool matched = false;
  for (int64_t s = before_s; s <= after_s; ++s) {
    matched |= name == absl::StrCat("events.out.tfevents.", s, ".", host);
  }
  EXPECT_TRUE(matched) << name;
}

TEST(TensorBoardWriterTest, FirstRecordIsTheFileVersion) {
  auto writer = TensorBoardWriter::Open(TempDir("version"));
  ASSERT_THAT(writer, IsOk());
  auto events = testing::ReadEvents((*writer)->path());
  ASSERT_THAT(events, IsOk());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].file_version(), "brain.Event:2");
  EXPECT_GT((*events)[0].wall_time(), 1.0e9);
}

TEST(TensorBoardWriterTest, ScalarsReadBackAfterFlush) {
  auto writer = TensorBoardWriter::Open(TempDir("scalars"));
  ASSERT_THAT(writer, IsOk());
  ASSERT_THAT((*writer)->AddScalar("train/loss", 2.5, 10), IsOk());
  ASSERT_THAT((*writer)->AddScalar("lr", 0.001, 10), IsOk());
  ASSERT_THAT((*writer)->AddScalar("train/loss", 1.25, 20), IsOk());
  ASSERT_THAT((*writer)->Flush(), IsOk());
  auto events = testing::ReadEvents((*writer)->path());
  ASSERT_THAT(events, IsOk());
  const auto scalars = testing::ScalarsOf(*events);
  ASSERT_EQ(scalars.size(), 3u);
  EXPECT_EQ(scalars[0].step, 10);
  EXPECT_EQ(scalars[0].tag, "train/loss");
  EXPECT_EQ(scalars[0].value, 2.5f);
  EXPECT_EQ(scalars[1].tag, "lr");
  EXPECT_EQ(scalars[1].value, 0.001f);
  EXPECT_EQ(scalars[2].step, 20);
  EXPECT_EQ(scalars[2].value, 1.25f);
}

TEST(TensorBoardWriterTest, ZeroIsWrittenAsAValue) {
  auto writer = TensorBoardWriter::Open(TempDir("zero"));
  ASSERT_THAT(writer, IsOk());
  ASSERT_THAT((*writer)->AddScalar("grad_norm", 0.0, 0), IsOk());
  ASSERT_THAT((*writer)->Flush(), IsOk());
  auto events = testing::ReadEvents((*writer)->path());
  ASSERT_THAT(events, IsOk());
  ASSERT_EQ(events->size(), 2u);
  ASSERT_EQ((*events)[1].summary().value_size(), 1);
  EXPECT_TRUE((*events)[1].summary().value(0).has_simple_value());
}

TEST(TensorBoardWriterTest, EveryRecordIsFramedEndToEnd) {
  auto writer = TensorBoardWriter::Open(TempDir("framing"));
  ASSERT_THAT(writer, IsOk());
  ASSERT_THAT((*writer)->AddScalar("mfu", 0.25, 3), IsOk());
  ASSERT_THAT((*writer)->Flush(), IsOk());
  auto records = testing::ReadRecords((*writer)->path());
  ASSERT_THAT(records, IsOk());
  size_t total = 0;
  for (const std::string& r : *records) total += 16 + r.size();
  EXPECT_EQ(total, ReadFile((*writer)->path()).size());
}

TEST(TensorBoardWriterTest, DestructionFlushes) {
  std::string path;
  {
    auto writer = TensorBoardWriter::Open(TempDir("destroy"));
    ASSERT_THAT(writer, IsOk());
    ASSERT_THAT((*writer)->AddScalar("lr", 0.5, 1), IsOk());
    path = (*writer)->path();
  }
  auto events = testing::ReadEvents(path);
  ASSERT_THAT(events, IsOk());
  EXPECT_EQ(testing::ScalarsOf(*events).size(), 1u);
}

TEST(TensorBoardWriterTest, ASecondWriterInTheSameSecondGetsItsOwnFile) {
  auto a = TensorBoardWriter::Open(TempDir("two"));
  ASSERT_THAT(a, IsOk());
  auto b = TensorBoardWriter::Open(TempDir("two"));
  ASSERT_THAT(b, IsOk());
  EXPECT_NE((*a)->path(), (*b)->path());
}

TEST(TensorBoardWriterTest, ADirectoryThatIsAFileIsRefusedByName) {
  const std::string file = TempDir("not_a_dir");
  std::ofstream(file) << "x";
  auto writer = TensorBoardWriter::Open(file + "/sub");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(),
              HasSubstr("cannot create TensorBoard directory '" + file));
}

TEST(EventFileReaderTest, DetectsACorruptedDataCrc) {
  auto writer = TensorBoardWriter::Open(TempDir("corrupt"));
  ASSERT_THAT(writer, IsOk());
  const std::string path = (*writer)->path();
  writer->reset();
  std::string bytes = ReadFile(path);
  bytes[14] ^= 1;  // Inside the first record's data.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto records = testing::ReadRecords(path);
  ASSERT_FALSE(records.ok());
  EXPECT_THAT(records.status().message(), HasSubstr("bad data CRC"));
}

}  // namespace
}  // namespace strata::launch
