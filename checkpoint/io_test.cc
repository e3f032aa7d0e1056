#include "checkpoint/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace strata::checkpoint {
namespace {

std::string Fresh(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir =
      std::string(root != nullptr ? root : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(IoTest, WriteFileAtomicReplacesAndLeavesNoTemporary) {
  const std::string dir = Fresh("atomic");
  ASSERT_TRUE(WriteFileAtomic(dir + "/latest", "step_1\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/latest", "step_2\n").ok());
  EXPECT_EQ(*ReadWholeFile(dir + "/latest"), "step_2\n");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(IoTest, StagedDirectoryAppearsWholeAndReplacesTheOldOne) {
  const std::string dir = Fresh("staged") + "/ckpt";
  ASSERT_TRUE(PrepareStagingDir(dir).ok());
  std::ofstream(StagingDir(dir) + "/a") << "first";
  EXPECT_FALSE(std::filesystem::exists(dir));  // Not before the commit.
  ASSERT_TRUE(CommitStagingDir(dir).ok());
  EXPECT_EQ(*ReadWholeFile(dir + "/a"), "first");
  // A second save: a stale staging directory is cleared first, and the
  // commit swaps the new directory in and removes the old one.
  std::filesystem::create_directories(StagingDir(dir));
  std::ofstream(StagingDir(dir) + "/stale") << "x";
  ASSERT_TRUE(PrepareStagingDir(dir).ok());
  EXPECT_FALSE(std::filesystem::exists(StagingDir(dir) + "/stale"));
  std::ofstream(StagingDir(dir) + "/b") << "second";
  ASSERT_TRUE(CommitStagingDir(dir).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/a"));
  EXPECT_EQ(*ReadWholeFile(dir + "/b"), "second");
  EXPECT_FALSE(std::filesystem::exists(StagingDir(dir)));
}

TEST(IoTest, ShortReadIsReportedAsTruncation) {
  const std::string path = Fresh("short") + "/f";
  std::ofstream(path) << "0123456789";
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buffer[8];
  EXPECT_TRUE(PreadAll(fd, path, buffer, 8, 2).ok());
  const absl::Status s = PreadAll(fd, path, buffer, 8, 5);
  ::close(fd);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "file '" + path +
                             "' is truncated: it ends at byte 10 but bytes "
                             "[5, 13) were expected");
}

TEST(IoTest, ReadWholeFileNamesMissingFilesAndDirectories) {
  const std::string dir = Fresh("read_whole");
  EXPECT_EQ(ReadWholeFile(dir + "/missing").status().code(),
            absl::StatusCode::kNotFound);
  const absl::Status s = ReadWholeFile(dir).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace strata::checkpoint
