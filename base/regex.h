// <regex>, included so that GCC 12's false positive inside it is silenced in
// one place. At -O1 with the sanitizers (tools/sanitize.sh asan) GCC 12 warns
// that std::regex's own automaton state "may be used uninitialized" inside
// libstdc++; no other optimisation level or compiler warns, and -Werror
// turns it into a build failure. GCC matches the pragma against every
// location of the warning's inlining chain, which runs through <regex>'s
// headers included here, so the code that uses std::regex keeps the warning.
// Include this instead of <regex>. CompileRegex turns a user's pattern (a
// flag, an option) into a std::regex or an error naming it.
#ifndef STRATA_BASE_REGEX_H_
#define STRATA_BASE_REGEX_H_

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>  // IWYU pragma: export
#pragma GCC diagnostic pop

#include <string>

#include "absl/status/statusor.h"

namespace strata {

// `pattern` compiled as ECMAScript (std::regex's default), or
// InvalidArgument "'<pattern>' is not a valid regex: <why>"; callers prefix
// where the pattern came from (the flag, the option).
absl::StatusOr<std::regex> CompileRegex(const std::string& pattern);

}  // namespace strata

#endif  // STRATA_BASE_REGEX_H_
