#include "base/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::strata::testing::IsOk;

std::string Fresh(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

int CountFiles(const std::string& dir) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  return files;
}

TEST(FileIoTest, WriteFileAtomicReplacesAndLeavesNoTemporary) {
  const std::string dir = Fresh("atomic");
  ASSERT_THAT(WriteFileAtomic(dir + "/latest", "step_1\n"), IsOk());
  ASSERT_THAT(WriteFileAtomic(dir + "/latest", "step_2\n"), IsOk());
  EXPECT_EQ(*ReadWholeFile(dir + "/latest"), "step_2\n");
  EXPECT_EQ(CountFiles(dir), 1);
}

TEST(FileIoTest, AtomicWriterWithoutCommitLeavesTheOldFile) {
  const std::string dir = Fresh("abandoned");
  ASSERT_THAT(WriteFileAtomic(dir + "/model.pt", "old"), IsOk());
  {
    auto writer = AtomicFileWriter::Create(dir + "/model.pt");
    ASSERT_THAT(writer, IsOk());
    ASSERT_THAT((*writer)->Append("new bytes", 9), IsOk());
  }  // Destroyed before Commit(), as when a save fails half-way.
  EXPECT_EQ(*ReadWholeFile(dir + "/model.pt"), "old");
  EXPECT_EQ(CountFiles(dir), 1);
}

TEST(FileIoTest, AtomicWriterStreamsChunksIntoOneFile) {
  const std::string dir = Fresh("streamed");
  auto writer = AtomicFileWriter::Create(dir + "/tokens.bin");
  ASSERT_THAT(writer, IsOk());
  ASSERT_THAT((*writer)->Append("abc", 3), IsOk());
  ASSERT_THAT((*writer)->Append("def", 3), IsOk());
  EXPECT_FALSE(std::filesystem::exists(dir + "/tokens.bin"));
  ASSERT_THAT((*writer)->Commit(), IsOk());
  EXPECT_EQ(*ReadWholeFile(dir + "/tokens.bin"), "abcdef");
  EXPECT_EQ((*writer)->Commit().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(FileIoTest, CreateInMissingDirectoryIsNotFoundNamingThePath) {
  const std::string dir = Fresh("missing_parent");
  const absl::Status s =
      AtomicFileWriter::Create(dir + "/no/such/model.pt").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find(dir + "/no/such/model.pt"), std::string::npos);
}

TEST(FileIoTest, ErrnoStatusMapsCodesAndKeepsTheMessage) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "cannot open 'x'").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "x").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "x").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(EIO, "x").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ErrnoStatus(ENOENT, "cannot open 'x'").message(),
            "cannot open 'x': No such file or directory");
}

TEST(FileIoTest, ParentDirOfPaths) {
  EXPECT_EQ(ParentDir("a/b/c"), "a/b");
  EXPECT_EQ(ParentDir("c"), ".");
  EXPECT_EQ(ParentDir("/c"), "/");
}

TEST(FileIoTest, ShortReadIsReportedAsTruncation) {
  const std::string path = Fresh("short") + "/f";
  std::ofstream(path) << "0123456789";
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buffer[8];
  EXPECT_THAT(PreadAll(fd, path, buffer, 8, 2), IsOk());
  const absl::Status s = PreadAll(fd, path, buffer, 8, 5);
  ::close(fd);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "file '" + path +
                             "' is truncated: it ends at byte 10 but bytes "
                             "[5, 13) were expected");
}

TEST(FileIoTest, ReadWholeFileNamesMissingFilesAndDirectories) {
  const std::string dir = Fresh("read_whole");
  EXPECT_EQ(ReadWholeFile(dir + "/missing").status().code(),
            absl::StatusCode::kNotFound);
  const absl::Status s = ReadWholeFile(dir).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace strata
