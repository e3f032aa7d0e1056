// Test helper: runs Debian's Python (/usr/bin/python3, which has torch
// 1.13) as a subprocess for interop tests.
#ifndef STRATA_SERIALIZATION_TESTING_PYTHON_RUNNER_H_
#define STRATA_SERIALIZATION_TESTING_PYTHON_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace strata::serialization::testing {

// Runs `/usr/bin/python3 args...` with OMP_NUM_THREADS=1, its stdout and
// stderr redirected to `log_path`. Fails with the exit status and the log's
// contents unless it exits 0.
absl::Status RunPython(const std::vector<std::string>& args,
                       const std::string& log_path);

// Empty when python3's torch is at least `major`.`minor`; else why not
// (the version found, or why it could not be run or read), for a
// GTEST_SKIP that says so: "needs PyTorch >= 2.4 (`what`); found 1.13.1".
// Python's output goes to `log_path`.
std::string WhyTorchBelow(int major, int minor, const std::string& what,
                          const std::string& log_path);

// Writes `code` to `path` (a script for RunPython).
absl::Status WriteTextFile(const std::string& path, const std::string& code);

}  // namespace strata::serialization::testing

#endif  // STRATA_SERIALIZATION_TESTING_PYTHON_RUNNER_H_
