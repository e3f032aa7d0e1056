#include "launch/config/train_flag_table.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace strata::launch {

absl::StatusOr<std::vector<std::string>>
FlagSpelling<std::vector<std::string>>::Parse(const std::string& /*flag*/,
                                              const std::string& s) {
  std::vector<std::string> list;
  if (s.empty()) return list;
  for (absl::string_view entry : absl::StrSplit(s, ',')) {
    list.emplace_back(absl::StripAsciiWhitespace(entry));
  }
  return list;
}
std::string FlagSpelling<std::vector<std::string>>::Format(
    const std::vector<std::string>& v) {
  return absl::StrJoin(v, ",");
}

TrainOptions TrainFlagDefaults() {
  TrainOptions o;
  o.output_dir.clear();
  return o;
}

}  // namespace strata::launch
