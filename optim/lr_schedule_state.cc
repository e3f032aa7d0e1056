#include "optim/lr_schedule_state.h"

#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::optim {
namespace {

enum class FieldType { kString, kInteger, kReal };

const std::map<std::string, FieldType>& FieldTypes() {
  static const auto* types = new std::map<std::string, FieldType>{
      {"kind", FieldType::kString},
      {"base_lr", FieldType::kReal},
      {"warmup_steps", FieldType::kInteger},
      {"total_steps", FieldType::kInteger},
      {"min_lr", FieldType::kReal},
      {"step_size", FieldType::kInteger},
      {"gamma", FieldType::kReal},
      {"last_step", FieldType::kInteger},
      {"warmup_type", FieldType::kString},
      {"warmup_min_ratio", FieldType::kReal},
      {"min_ratio", FieldType::kReal}};
  return *types;
}

// Fields added with DeepSpeed's schedules: a checkpoint written before them
// lacks them, and their defaults describe its schedule.
bool IsLaterField(const std::string& key) {
  return key == "warmup_type" || key == "warmup_min_ratio" ||
         key == "min_ratio";
}

const char* TypeName(FieldType type) {
  switch (type) {
    case FieldType::kString:
      return "a string";
    case FieldType::kInteger:
      return "an integer";
    case FieldType::kReal:
      return "a number";
  }
  return "?";
}

// The earlier layout: every field a double ("kind" a code), which
// LrSchedule::FromState reads.
bool AllDoubles(const NamedValues& fields) {
  for (const auto& [key, value] : fields) {
    if (!std::holds_alternative<double>(value)) return false;
  }
  return true;
}

}  // namespace

NamedValues LrScheduleFields(const LrScheduleOptions& options,
                             int64_t last_step) {
  return {{"kind", std::string(LrScheduleKindName(options.kind))},
          {"base_lr", options.base_lr},
          {"warmup_steps", options.warmup_steps},
          {"total_steps", options.total_steps},
          {"min_lr", options.min_lr},
          {"step_size", options.step_size},
          {"gamma", options.gamma},
          {"last_step", last_step},
          {"warmup_type", options.warmup_type},
          {"warmup_min_ratio", options.warmup_min_ratio},
          {"min_ratio", options.min_ratio}};
}

absl::StatusOr<RestoredLrSchedule> LrScheduleFromFields(
    const NamedValues& fields) {
  if (!fields.empty() && AllDoubles(fields)) {
    std::vector<std::pair<std::string, double>> state;
    for (const auto& [key, value] : fields) {
      state.emplace_back(key, std::get<double>(value));
    }
    return LrSchedule::FromState(state);
  }
  std::map<std::string, const StateValue*> by_key;
  for (const auto& [key, value] : fields) {
    auto type = FieldTypes().find(key);
    if (type == FieldTypes().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("param_scheduler: unknown field '", key, "' (expected ",
                       absl::StrJoin(FieldTypes(), ", ",
                                     [](std::string* out, const auto& kv) {
                                       absl::StrAppend(out, kv.first);
                                     }),
                       ")"));
    }
    const bool ok = type->second == FieldType::kString
                        ? std::holds_alternative<std::string>(value)
                        : (type->second == FieldType::kInteger
                               ? std::holds_alternative<int64_t>(value)
                               : std::holds_alternative<double>(value) ||
                                     std::holds_alternative<int64_t>(value));
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("param_scheduler: field '",
                                                     key, "' must be ",
                                                     TypeName(type->second)));
    }
    if (!by_key.emplace(key, &value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("param_scheduler: field '", key, "' appears twice"));
    }
  }
  for (const auto& [key, type] : FieldTypes()) {
    if (by_key.count(key) == 0 && !IsLaterField(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("param_scheduler: missing field '", key, "'"));
    }
  }
  auto real = [&](const std::string& key) {
    const StateValue& v = *by_key.at(key);
    return std::holds_alternative<double>(v)
               ? std::get<double>(v)
               : static_cast<double>(std::get<int64_t>(v));
  };
  auto integer = [&](const std::string& key) {
    return std::get<int64_t>(*by_key.at(key));
  };
  LrScheduleOptions options;
  absl::StatusOr<LrScheduleKind> kind =
      ParseLrScheduleKind(std::get<std::string>(*by_key.at("kind")),
                          "param_scheduler: field 'kind'");
  if (!kind.ok()) return kind.status();
  options.kind = *kind;
  options.base_lr = real("base_lr");
  options.warmup_steps = integer("warmup_steps");
  options.total_steps = integer("total_steps");
  options.min_lr = real("min_lr");
  options.step_size = integer("step_size");
  options.gamma = real("gamma");
  if (by_key.count("warmup_type") > 0) {
    options.warmup_type = std::get<std::string>(*by_key.at("warmup_type"));
  }
  if (by_key.count("warmup_min_ratio") > 0) {
    options.warmup_min_ratio = real("warmup_min_ratio");
  }
  if (by_key.count("min_ratio") > 0) options.min_ratio = real("min_ratio");
  return LrSchedule::FromOptions(options, integer("last_step"));
}

}  // namespace strata::optim
