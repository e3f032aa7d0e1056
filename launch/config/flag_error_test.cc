#include "launch/config/flag_error.h"

#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace strata::launch {
namespace {

TEST(FlagErrorTest, IsInvalidArgumentNamingTheFlag) {
  const absl::Status status = FlagError("global_batch", "must be >= 1, got 0");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--global_batch: must be >= 1, got 0");
}

}  // namespace
}  // namespace strata::launch
