#include "base/build_info.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <cstdio>
#include <memory>
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

// Whether `commit` is 40 lower-case hex digits, optionally followed by
// "-dirty". (Checked by hand: GCC 12's std::regex trips its own
// -Wmaybe-uninitialized at -O1, which tools/sanitize.sh asan builds with.)
bool IsStampFormat(const std::string& commit) {
  constexpr size_t kHexDigits = 40;
  if (commit.size() < kHexDigits) return false;
  for (size_t i = 0; i < kHexDigits; ++i) {
    const char c = commit[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  const std::string rest = commit.substr(kHexDigits);
  return rest.empty() || rest == "-dirty";
}

TEST(BuildInfoTest, StampFormatIsFortyHexDigitsOptionallyDirty) {
  const std::string hash(40, 'a');
  EXPECT_TRUE(IsStampFormat(hash));
  EXPECT_TRUE(IsStampFormat(hash + "-dirty"));
  EXPECT_FALSE(IsStampFormat(hash.substr(1)));
  EXPECT_FALSE(IsStampFormat(hash + "0"));
  EXPECT_FALSE(IsStampFormat(hash + "-clean"));
  EXPECT_FALSE(IsStampFormat(std::string(39, 'a') + "A"));
  EXPECT_FALSE(IsStampFormat(std::string(39, 'a') + "g"));
}

TEST(BuildInfoTest, GitCommitHasTheStampFormat) {
  const std::string commit = GitCommit();
  EXPECT_TRUE(IsStampFormat(commit) || commit == "unknown") << commit;
}

// A stamped build carries the checkout's own commit (and "-dirty" state)
// when built from a git checkout, and "unknown" only when built outside one;
// an unstamped one (`bazel test`) says "unknown" whatever the checkout.
// tools/test.sh runs this test both ways.
TEST(BuildInfoTest, GitCommitIsTheCheckoutsCommitWhenStamped) {
  const std::string script = WorkspaceStatusScript();
  ASSERT_FALSE(script.empty());
  if (Stamped()) {
    EXPECT_EQ(GitCommit(), ExpectedCommit(script)) << "checkout of " << script;
  } else {
    EXPECT_STREQ(GitCommit(), "unknown");
  }
}

}  // namespace
}  // namespace strata
