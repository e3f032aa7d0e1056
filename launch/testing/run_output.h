// Test helpers for tests that run the train binary: a scratch path under
// TEST_TMPDIR, a file's bytes, and one column of a run's metrics.jsonl.
#ifndef STRATA_LAUNCH_TESTING_RUN_OUTPUT_H_
#define STRATA_LAUNCH_TESTING_RUN_OUTPUT_H_

#include <string>
#include <vector>

namespace strata::launch::testing {

// TEST_TMPDIR/<name> (/tmp/<name> outside Bazel).
std::string TempDir(const std::string& name);

// The file's bytes ("" if it cannot be read).
std::string ReadFile(const std::string& path);

// The value of `"key": <number>` in each line of the metrics file
// `metrics_path`, in line order; a value that is not a number is a test
// failure.
std::vector<double> MetricsColumn(const std::string& metrics_path,
                                  const std::string& key);

}  // namespace strata::launch::testing

#endif  // STRATA_LAUNCH_TESTING_RUN_OUTPUT_H_
