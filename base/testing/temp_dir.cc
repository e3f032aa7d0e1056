#include "base/testing/temp_dir.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace strata::testing {

std::string FreshTempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(root != nullptr ? root : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace strata::testing
