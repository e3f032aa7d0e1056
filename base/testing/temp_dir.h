// Test helper: fresh scratch directories under Bazel's TEST_TMPDIR.
#ifndef STRATA_BASE_TESTING_TEMP_DIR_H_
#define STRATA_BASE_TESTING_TEMP_DIR_H_

#include <string>

namespace strata::testing {

// $TEST_TMPDIR/<name> (/tmp/<name> outside Bazel), emptied and created.
std::string FreshTempDir(const std::string& name);

}  // namespace strata::testing

#endif  // STRATA_BASE_TESTING_TEMP_DIR_H_
