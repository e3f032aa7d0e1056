#include "base/build_info.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>

namespace strata {
namespace {

// The checkout this test binary was built from, found through the runfiles
// tree: the data file tools/workspace_status.sh is a symlink (Bazel's
// runfiles, the CMake build's runfiles tree) that resolves into the source
// tree. Returns the script's absolute path there.
std::string WorkspaceStatusScript() {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  EXPECT_NE(srcdir, nullptr) << "TEST_SRCDIR is not set: run through bazel "
                                "test or ctest";
  if (srcdir == nullptr) return "";
  const std::string runfile = std::string(srcdir) + "/" +
                              (workspace ? workspace : "strata") +
                              "/tools/workspace_status.sh";
  std::unique_ptr<char, decltype(&free)> real(
      realpath(runfile.c_str(), nullptr), &free);
  EXPECT_NE(real, nullptr) << "cannot resolve " << runfile;
  return real ? std::string(real.get()) : "";
}

// What tools/workspace_status.sh prints for the checkout now: the stamp a
// build from it carries ("STABLE_GIT_COMMIT <hash>[-dirty]"), or nothing
// outside a git checkout.
std::string ExpectedCommit(const std::string& script) {
  const std::string root = script.substr(0, script.rfind("/tools/"));
  const std::string command = "cd '" + root + "' && '" + script + "'";
  struct ClosePipe {
    void operator()(FILE* f) const { pclose(f); }
  };
  std::unique_ptr<FILE, ClosePipe> pipe(popen(command.c_str(), "r"));
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return "";
  std::string out;
  std::array<char, 256> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) {
    out += buffer.data();
  }
  const std::string key = "STABLE_GIT_COMMIT ";
  if (out.rfind(key, 0) != 0) return "unknown";
  std::string commit = out.substr(key.size());
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == ' ')) {
    commit.pop_back();
  }
  return commit;
}

TEST(BuildInfoTest, GitCommitHasTheStampFormat) {
  const std::string commit = GitCommit();
  EXPECT_TRUE(std::regex_match(commit, std::regex("[0-9a-f]{40}(-dirty)?")) ||
              commit == "unknown")
      << commit;
}

// The stamp is the checkout's own commit (and "-dirty" state) when built
// from a git checkout, and "unknown" only when built outside one.
TEST(BuildInfoTest, GitCommitIsTheCheckoutsCommit) {
  const std::string script = WorkspaceStatusScript();
  ASSERT_FALSE(script.empty());
  EXPECT_EQ(GitCommit(), ExpectedCommit(script)) << "checkout of " << script;
}

}  // namespace
}  // namespace strata
