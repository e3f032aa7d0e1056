// Status helpers shared by every Strata package.
//
// Strata returns absl::Status / absl::StatusOr at set-up and I/O boundaries.
// LibTorch, c10d and Gloo report failures by throwing; `StatusFromCall` is the
// one place where those exceptions are turned into a Status.
#ifndef STRATA_BASE_STATUS_H_
#define STRATA_BASE_STATUS_H_

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

// Converts an exception thrown by LibTorch (c10::Error), Gloo or the standard
// library into a status whose message starts with `context` (what was being
// done, e.g. "all_reduce of 1024 x Float on group 'world' (rank 1 of 2)").
// c10::Error's C++ backtrace is dropped: it names LibTorch internals, not the
// caller's mistake.
absl::Status StatusFromException(absl::string_view context,
                                 const std::exception& e);

// Runs `fn` and converts anything it throws into a status (see above).
template <typename Fn>
absl::Status StatusFromCall(absl::string_view context, Fn&& fn) {
  try {
    std::forward<Fn>(fn)();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return StatusFromException(context, e);
  }
}

// Prefixes a non-OK status's message with `context`, keeping its code.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace strata

#define STRATA_STATUS_CONCAT_INNER_(a, b) a##b
#define STRATA_STATUS_CONCAT_(a, b) STRATA_STATUS_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` is not OK.
#define STRATA_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status strata_status_ = (expr);          \
    if (!strata_status_.ok()) return strata_status_; \
  } while (false)

// `STRATA_ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value of a StatusOr
// or returns its error.
#define STRATA_ASSIGN_OR_RETURN(lhs, rexpr) \
  STRATA_ASSIGN_OR_RETURN_IMPL_(            \
      STRATA_STATUS_CONCAT_(strata_statusor_, __LINE__), lhs, rexpr)
// `statusor` is a name and `lhs` a declaration ("auto x"): neither can be
// parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define STRATA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = *std::move(statusor)
// NOLINTEND(bugprone-macro-parentheses)

#endif  // STRATA_BASE_STATUS_H_
