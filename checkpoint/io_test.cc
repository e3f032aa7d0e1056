#include "checkpoint/io.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

std::string Fresh(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(IoTest, StagedDirectoryAppearsWholeAndReplacesTheOldOne) {
  const std::string dir = Fresh("staged") + "/ckpt";
  ASSERT_THAT(PrepareStagingDir(dir), IsOk());
  std::ofstream(StagingDir(dir) + "/a") << "first";
  EXPECT_FALSE(std::filesystem::exists(dir));  // Not before the commit.
  ASSERT_THAT(CommitStagingDir(dir), IsOk());
  EXPECT_EQ(*ReadWholeFile(dir + "/a"), "first");
  // A second save: a stale staging directory is cleared first, and the
  // commit swaps the new directory in and removes the old one.
  std::filesystem::create_directories(StagingDir(dir));
  std::ofstream(StagingDir(dir) + "/stale") << "x";
  ASSERT_THAT(PrepareStagingDir(dir), IsOk());
  EXPECT_FALSE(std::filesystem::exists(StagingDir(dir) + "/stale"));
  std::ofstream(StagingDir(dir) + "/b") << "second";
  ASSERT_THAT(CommitStagingDir(dir), IsOk());
  EXPECT_FALSE(std::filesystem::exists(dir + "/a"));
  EXPECT_EQ(*ReadWholeFile(dir + "/b"), "second");
  EXPECT_FALSE(std::filesystem::exists(StagingDir(dir)));
}

}  // namespace
}  // namespace strata::checkpoint
