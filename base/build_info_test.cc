#include "base/build_info.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace strata {
namespace {

// Tests run in Bazel's sandbox/runfiles, without the checkout, so the
// commit cannot be compared with `git rev-parse HEAD` here; its format is
// (tools/workspace_status_test checks the script that supplies it, and
// launch/trainer_test that checkpoints carry this value). A build from a
// checkout (CI clones) stamps a hash; "unknown" only outside one.
TEST(BuildInfoTest, GitCommitIsAHashOrUnknown) {
  const std::string commit = GitCommit();
  EXPECT_TRUE(std::regex_match(commit, std::regex("[0-9a-f]{40}(-dirty)?")) ||
              commit == "unknown")
      << commit;
}

}  // namespace
}  // namespace strata
