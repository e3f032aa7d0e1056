// JSON text parsed with nlohmann/json into a value, with the errors a user
// can act on: syntax errors at "<source>:<line>:<column>", and keys given
// twice in one object (nlohmann would silently keep the last). This is the
// one place nlohmann's parse exceptions become a Status; every package that
// reads JSON (DeepSpeed configs, safetensors headers, Hugging Face
// config.json / index files) parses through it.
#ifndef STRATA_BASE_JSON_H_
#define STRATA_BASE_JSON_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

// Parses `text` (named `source` in errors). InvalidArgument:
//   "<source>:<line>:<column>: JSON syntax error: <what>" (also ill-formed
//   UTF-8 in a string), or
//   "<source>: <a.b.key>: the key appears twice in its object; keep one".
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text,
                                         absl::string_view source);

}  // namespace strata

#endif  // STRATA_BASE_JSON_H_
