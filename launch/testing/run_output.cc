#include "launch/testing/run_output.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::launch::testing {

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

std::vector<double> MetricsColumn(const std::string& metrics_path,
                                  const std::string& key) {
  std::vector<double> values;
  std::ifstream in(metrics_path);
  const std::string name = absl::StrCat("\"", key, "\": ");
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(name);
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + name.size());
    const std::string number = rest.substr(0, rest.find_first_of(",}"));
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(number, &v)) << line;
    values.push_back(v);
  }
  return values;
}

}  // namespace strata::launch::testing
