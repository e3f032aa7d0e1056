#include "launch/config/train_flag_table.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace strata::launch {

absl::StatusOr<DataKind> FlagSpelling<DataKind>::Parse(const std::string& s) {
  return ParseDataKind(s);
}
std::string FlagSpelling<DataKind>::Format(DataKind v) {
  return std::string(DataKindName(v));
}

absl::StatusOr<Precision> FlagSpelling<Precision>::Parse(const std::string& s) {
  return ParsePrecision(s);
}
std::string FlagSpelling<Precision>::Format(Precision v) {
  return std::string(PrecisionName(v));
}

absl::StatusOr<optim::LrScheduleKind>
FlagSpelling<optim::LrScheduleKind>::Parse(const std::string& s) {
  return optim::ParseLrScheduleKind(s);
}
std::string FlagSpelling<optim::LrScheduleKind>::Format(
    optim::LrScheduleKind v) {
  return std::string(optim::LrScheduleKindName(v));
}

absl::StatusOr<strategies::OptimizerKind>
FlagSpelling<strategies::OptimizerKind>::Parse(const std::string& s) {
  return strategies::ParseOptimizerKind(s);
}
std::string FlagSpelling<strategies::OptimizerKind>::Format(
    strategies::OptimizerKind v) {
  return strategies::OptimizerKindName(v);
}

absl::StatusOr<strategies::StrategyKind>
FlagSpelling<strategies::StrategyKind>::Parse(const std::string& s) {
  return strategies::ParseStrategyKind(s);
}
std::string FlagSpelling<strategies::StrategyKind>::Format(
    strategies::StrategyKind v) {
  return strategies::StrategyKindName(v);
}

absl::StatusOr<checkpoint::Format> FlagSpelling<checkpoint::Format>::Parse(
    const std::string& s) {
  return checkpoint::ParseFormat(s);
}
std::string FlagSpelling<checkpoint::Format>::Format(checkpoint::Format v) {
  return std::string(checkpoint::FormatName(v));
}

absl::StatusOr<std::vector<std::string>>
FlagSpelling<std::vector<std::string>>::Parse(const std::string& s) {
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
