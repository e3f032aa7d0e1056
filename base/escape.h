// Quoting file contents in messages: strings read from files (tensor keys,
// pickle strings, metadata fields) may hold any bytes; an error message
// that quotes them must not carry control bytes or invalid UTF-8 into logs
// and terminals.
#ifndef STRATA_BASE_ESCAPE_H_
#define STRATA_BASE_ESCAPE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace strata {

// `text` with every byte that is not printable ASCII or part of a valid
// UTF-8 sequence of a non-control code point written as \xNN, and the
// backslash, single and double quotes escaped (\\, \', \"); at most
// `max_bytes` bytes of `text` are shown, followed by "..." when cut.
std::string EscapeBytes(absl::string_view text, size_t max_bytes = 256);

}  // namespace strata

#endif  // STRATA_BASE_ESCAPE_H_
