// Saveable state as named values — the form LR schedules, loss scalers,
// samplers and generators save into checkpoints (a checkpoint's
// param_scheduler and extra entries) — and the checks every loader needs.
#ifndef STRATA_BASE_NAMED_STATE_H_
#define STRATA_BASE_NAMED_STATE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace strata {

// Raw bytes (e.g. a generator state), kept apart from text.
struct Bytes {
  std::string data;
  bool operator==(const Bytes& other) const { return data == other.data; }
};
// One saved value: an integer, a real number, text or raw bytes.
using StateValue = std::variant<int64_t, double, std::string, Bytes>;
// Saved values by name, in the order they were written.
using NamedValues = std::vector<std::pair<std::string, StateValue>>;

// Returns `state` as a map after checking it has exactly `keys`, each once.
// Errors start with `what` ("sampler state") and name the offending key:
// "<what> has unexpected key 'x'; expected keys: a, b", "<what> has key 'a'
// twice", "<what> is missing key 'b'".
template <typename T>
absl::StatusOr<std::map<std::string, T>> NamedStateMap(
    absl::string_view what, const std::vector<std::pair<std::string, T>>& state,
    absl::Span<const char* const> keys) {
  std::map<std::string, T> values;
  for (const auto& [key, value] : state) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has unexpected key '", key,
                       "'; expected keys: ", absl::StrJoin(keys, ", ")));
    }
    if (!values.emplace(key, value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has key '", key, "' twice"));
    }
  }
  for (const char* key : keys) {
    if (values.count(key) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is missing key '", key, "'"));
    }
  }
  return values;
}

}  // namespace strata

#endif  // STRATA_BASE_NAMED_STATE_H_
