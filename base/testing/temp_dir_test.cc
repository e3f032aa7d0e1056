#include "base/testing/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace strata::testing {
namespace {

TEST(FreshTempDirTest, IsAnEmptyExistingDirectory) {
  const std::string dir = FreshTempDir("temp_dir_test");
  std::ofstream(dir + "/left_over") << "x";
  const std::string again = FreshTempDir("temp_dir_test");
  EXPECT_EQ(again, dir);
  EXPECT_TRUE(std::filesystem::is_directory(again));
  EXPECT_TRUE(std::filesystem::is_empty(again));
}

}  // namespace
}  // namespace strata::testing
