// GoogleTest matchers for absl::Status and absl::StatusOr<T>, so that a
// failing test prints the status it got:
//
//   EXPECT_THAT(LoadCheckpoint(...), IsOk());
//   ASSERT_THAT(strategy.Step(0), IsOk());
//   EXPECT_THAT(Parse("x"), StatusIs(absl::StatusCode::kInvalidArgument,
//                                    HasSubstr("--strategy")));
//   ASSERT_OK_AND_ASSIGN(auto group, MakeGroup());  // value or test failure
#ifndef STRATA_BASE_TESTING_STATUS_MATCHERS_H_
#define STRATA_BASE_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata::testing {
namespace internal {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace internal

// Matches an OK absl::Status or an absl::StatusOr holding a value.
//
// On failure GoogleTest prints the matched value. With LibTorch 2.x and
// abseil 2023 or later a StatusOr<std::vector<T>> whose T has no operator<<
// does not compile here (c10 declares an unconstrained operator<< for
// std::vector, which absl's StatusOr printer takes at its word): match its
// `.status()` instead.
MATCHER(IsOk, "is OK") {
  const absl::Status& status = internal::GetStatus(arg);
  if (status.ok()) return true;
  *result_listener << "which is " << status;
  return false;
}

// Matches a status (or StatusOr's status) with `code` whose message matches
// `message_matcher` (a string for equality, or e.g. HasSubstr("...")).
MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has code ") + absl::StatusCodeToString(code)) {
  const absl::Status& status = internal::GetStatus(arg);
  if (status.code() != code) {
    *result_listener << "which is " << status;
    return false;
  }
  return ::testing::ExplainMatchResult(
      ::testing::Matcher<const std::string&>(message_matcher),
      std::string(status.message()), result_listener);
}

}  // namespace strata::testing

#define STRATA_TESTING_CONCAT_INNER_(a, b) a##b
#define STRATA_TESTING_CONCAT_(a, b) STRATA_TESTING_CONCAT_INNER_(a, b)

// `ASSERT_OK_AND_ASSIGN(auto x, MakeX());` assigns the StatusOr's value or
// fails the test (returning from it) printing the status.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(            \
      STRATA_TESTING_CONCAT_(strata_statusor_, __LINE__), lhs, rexpr)
// `statusor` is a name and `lhs` a declaration ("auto x"): neither can be
// parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                               \
  ASSERT_TRUE(statusor.ok()) << statusor.status();       \
  lhs = *std::move(statusor)
// NOLINTEND(bugprone-macro-parentheses)

#endif  // STRATA_BASE_TESTING_STATUS_MATCHERS_H_
