// GPU tests (Bazel tag `gpu`) are built and run everywhere and skip
// themselves, counted as skipped, where no GPU can run them.
#ifndef STRATA_BASE_TESTING_GPU_H_
#define STRATA_BASE_TESTING_GPU_H_

#include <string>

namespace strata::testing {

// Why this process cannot run CUDA work, or "" when it can: LibTorch was
// built without CUDA, or it sees no GPU. Thread-safe; may be called any time.
std::string NoGpuReason();

}  // namespace strata::testing

// In a test body or SetUp(): skips the test, naming why, without a GPU.
#define STRATA_SKIP_WITHOUT_GPU()                                       \
  do {                                                                  \
    const std::string strata_no_gpu = ::strata::testing::NoGpuReason(); \
    if (!strata_no_gpu.empty()) GTEST_SKIP() << strata_no_gpu;          \
  } while (false)

#endif  // STRATA_BASE_TESTING_GPU_H_
