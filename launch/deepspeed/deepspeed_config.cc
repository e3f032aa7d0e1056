#include "launch/deepspeed/deepspeed_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/json.h"

namespace strata::launch {
namespace {

using Json = nlohmann::json;

// Integers a double holds exactly.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// The value's JSON text for messages, cut to a readable length.
std::string Shown(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

const char* Expected(DeepSpeedKind kind) {
  switch (kind) {
    case DeepSpeedKind::kSection:
      return "an object";
    case DeepSpeedKind::kBool:
      return "true or false";
    case DeepSpeedKind::kInt:
      return "an integer";
    case DeepSpeedKind::kNumber:
      return "a number";
    case DeepSpeedKind::kString:
      return "a string";
    case DeepSpeedKind::kPair:
      return "an array of 2 numbers";
  }
  return "?";
}

absl::Status KeyError(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status TypeError(const DeepSpeedKeySpec& spec, const Json& value) {
  std::string message =
      absl::StrCat("expected ", Expected(spec.kind),
                   spec.nullable ? " or null" : "", ", got ", Shown(value));
  if (value.is_string() && value.get<std::string>() == "auto") {
    absl::StrAppend(&message,
                    "; \"auto\" is a Hugging Face Trainer placeholder that "
                    "DeepSpeed itself does not accept: give the value, or "
                    "leave the key out and set Strata's flag");
  }
  return KeyError(spec.path, message);
}

// A JSON number as an integer: JSON integers, and numbers written like 5e8
// that are whole.
bool AsInteger(const Json& value, int64_t* out) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return true;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && std::floor(d) == d &&
        std::abs(d) <= kMaxExactInteger) {
      *out = static_cast<int64_t>(d);
      return true;
    }
  }
  return false;
}

absl::StatusOr<DeepSpeedValue> Convert(const DeepSpeedKeySpec& spec,
                                       const Json& value) {
  if (value.is_null()) {
    if (spec.nullable) return DeepSpeedValue{};
    return TypeError(spec, value);
  }
  switch (spec.kind) {
    case DeepSpeedKind::kBool:
      if (value.is_boolean()) return DeepSpeedValue{value.get<bool>()};
      break;
    case DeepSpeedKind::kInt: {
      int64_t i = 0;
      if (AsInteger(value, &i)) return DeepSpeedValue{i};
      break;
    }
    case DeepSpeedKind::kNumber:
      if (value.is_number()) return DeepSpeedValue{value.get<double>()};
      break;
    case DeepSpeedKind::kString:
      if (value.is_string()) {
        std::string s = value.get<std::string>();
        if (spec.lowercase) absl::AsciiStrToLower(&s);
        return DeepSpeedValue{std::move(s)};
      }
      break;
    case DeepSpeedKind::kPair:
      if (value.is_array() && value.size() == 2 && value[0].is_number() &&
          value[1].is_number()) {
        return DeepSpeedValue{std::array<double, 2>{value[0].get<double>(),
                                                    value[1].get<double>()}};
      }
      break;
    case DeepSpeedKind::kSection:
      break;
  }
  return TypeError(spec, value);
}

// "must be >= 0 and < 1".
std::string RangeText(const DeepSpeedKeySpec& spec) {
  std::vector<std::string> parts;
  if (spec.min) {
    parts.push_back(absl::StrCat(spec.min_exclusive ? "> " : ">= ", *spec.min));
  }
  if (spec.max) {
    parts.push_back(absl::StrCat(spec.max_exclusive ? "< " : "<= ", *spec.max));
  }
  return absl::StrCat("must be ", absl::StrJoin(parts, " and "));
}

bool InRange(const DeepSpeedKeySpec& spec, double x) {
  if (spec.min && (spec.min_exclusive ? !(x > *spec.min) : !(x >= *spec.min))) {
    return false;
  }
  if (spec.max && (spec.max_exclusive ? !(x < *spec.max) : !(x <= *spec.max))) {
    return false;
  }
  return true;
}

// Range, accepted values, values Strata rejects, and kOnlyDefault.
absl::Status CheckValue(const DeepSpeedKeySpec& spec,
                        const DeepSpeedValue& value) {
  const std::string text = DeepSpeedValueText(value);
  // At most two numbers (a pair such as betas); a fixed array, not a vector
  // (GCC 14 warns about a vector's reassignment here, -Wstringop-overflow).
  std::array<double, 2> numbers{};
  size_t count = 0;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    numbers[count++] = static_cast<double>(*i);
  }
  if (const auto* d = std::get_if<double>(&value)) numbers[count++] = *d;
  if (const auto* p = std::get_if<std::array<double, 2>>(&value)) {
    numbers = *p;
    count = 2;
  }
  for (size_t k = 0; k < count; ++k) {
    const double x = numbers[k];
    if (!InRange(spec, x)) {
      return KeyError(
          spec.path, absl::StrCat(text, " is out of range: ", RangeText(spec)));
    }
  }
  if (!spec.one_of.empty() && !std::holds_alternative<std::monostate>(value)) {
    const std::string bare = std::holds_alternative<std::string>(value)
                                 ? std::get<std::string>(value)
                                 : text;
    if (std::find(spec.one_of.begin(), spec.one_of.end(), bare) ==
        spec.one_of.end()) {
      return KeyError(spec.path,
                      absl::StrCat(text, " is not one of ",
                                   absl::StrJoin(spec.one_of, ", ")));
    }
    auto rejected = spec.rejected.find(bare);
    if (rejected != spec.rejected.end()) {
      return KeyError(
          spec.path,
          absl::StrCat(text, " is not supported: ", rejected->second));
    }
  }
  if (spec.support == DeepSpeedSupport::kOnlyDefault &&
      value != spec.fallback) {
    return KeyError(spec.path,
                    absl::StrCat(text, " is not supported: ", spec.why,
                                 "; only ", DeepSpeedValueText(spec.fallback),
                                 " (DeepSpeed's default) is accepted"));
  }
  return absl::OkStatus();
}

void Assign(const DeepSpeedField& field, const DeepSpeedValue& value) {
  struct Visitor {
    const DeepSpeedValue& v;
    void operator()(std::nullptr_t) const {}
    void operator()(bool* out) const { *out = std::get<bool>(v); }
    void operator()(int64_t* out) const { *out = std::get<int64_t>(v); }
    void operator()(double* out) const { *out = std::get<double>(v); }
    void operator()(std::string* out) const {
      *out = std::holds_alternative<std::string>(v) ? std::get<std::string>(v)
                                                    : std::string();
    }
    void operator()(std::optional<bool>* out) const {
      *out = std::holds_alternative<bool>(v)
                 ? std::optional<bool>(std::get<bool>(v))
                 : std::nullopt;
    }
    void operator()(std::optional<int64_t>* out) const {
      *out = std::holds_alternative<int64_t>(v)
                 ? std::optional<int64_t>(std::get<int64_t>(v))
                 : std::nullopt;
    }
    void operator()(std::optional<std::string>* out) const {
      *out = std::holds_alternative<std::string>(v)
                 ? std::optional<std::string>(std::get<std::string>(v))
                 : std::nullopt;
    }
    void operator()(std::array<double, 2>* out) const {
      *out = std::get<std::array<double, 2>>(v);
    }
  };
  std::visit(Visitor{value}, field);
}

// The known keys directly under `section` ("" for the top level).
std::string KnownKeysOf(const std::string& section) {
  std::vector<std::string> keys;
  const std::string prefix = section.empty() ? "" : section + ".";
  for (const DeepSpeedKeySpec& spec : DeepSpeedKeySchema()) {
    if (!absl::StartsWith(spec.path, prefix)) continue;
    const std::string rest = spec.path.substr(prefix.size());
    if (!rest.empty() && rest.find('.') == std::string::npos) {
      keys.push_back(rest);
    }
  }
  return absl::StrJoin(keys, ", ");
}

absl::Status CheckDisabledSection(const DeepSpeedKeySpec& spec,
                                  const Json& value) {
  if (value.is_object() && value.contains("enabled") &&
      value["enabled"].is_boolean() && !value["enabled"].get<bool>()) {
    return absl::OkStatus();
  }
  return KeyError(spec.path, spec.why);
}

// Reads the members of `object` (the section `section`) into `config`.
absl::Status Walk(const Json& object, const std::string& section,
                  DeepSpeedConfig* config) {
  for (const auto& item : object.items()) {
    const std::string path =
        section.empty() ? item.key() : absl::StrCat(section, ".", item.key());
    const DeepSpeedKeySpec* spec = FindDeepSpeedKey(path);
    if (spec == nullptr) {
      return KeyError(
          path, absl::StrCat("unknown key (the keys Strata knows",
                             section.empty() ? "" : " in " + section, ": ",
                             KnownKeysOf(section), ")"));
    }
    switch (spec->support) {
      case DeepSpeedSupport::kRejected:
        return KeyError(path, spec->why);
      case DeepSpeedSupport::kDisabledOnly:
        if (absl::Status s = CheckDisabledSection(*spec, item.value());
            !s.ok()) {
          return s;
        }
        config->given.insert(path);
        continue;
      case DeepSpeedSupport::kRead:
      case DeepSpeedSupport::kOnlyDefault:
        break;
    }
    config->given.insert(path);
    if (spec->kind == DeepSpeedKind::kSection) {
      if (!item.value().is_object()) return TypeError(*spec, item.value());
      if (spec->field != nullptr) Assign(spec->field(*config), true);
      if (absl::Status s = Walk(item.value(), path, config); !s.ok()) {
        return s;
      }
      continue;
    }
    absl::StatusOr<DeepSpeedValue> value = Convert(*spec, item.value());
    if (!value.ok()) return value.status();
    if (absl::Status s = CheckValue(*spec, *value); !s.ok()) return s;
    if (spec->field != nullptr) Assign(spec->field(*config), *value);
  }
  return absl::OkStatus();
}

// DeepSpeed's own optimizers that Strata does not implement (DeepSpeed
// matches these in any case), and torch.optim classes DeepSpeed would build
// by name.
constexpr const char* kOtherDeepSpeedOptimizers[] = {
    "adagrad", "lamb",    "onebitadam", "zerooneadam", "onebitlamb",
    "muadam",  "muadamw", "musgd",      "lion",        "muon"};
constexpr const char* kOtherTorchOptimizers[] = {
    "Adadelta", "Adagrad", "Adamax",  "ASGD",  "LBFGS",
    "NAdam",    "RAdam",   "RMSprop", "Rprop", "SparseAdam"};
constexpr const char* kOtherSchedulers[] = {"OneCycle",
                                            "LRRangeTest",
                                            "LambdaLR",
                                            "MultiplicativeLR",
                                            "StepLR",
                                            "MultiStepLR",
                                            "ConstantLR",
                                            "LinearLR",
                                            "ExponentialLR",
                                            "SequentialLR",
                                            "CosineAnnealingLR",
                                            "ChainedScheduler",
                                            "ReduceLROnPlateau",
                                            "CyclicLR",
                                            "CosineAnnealingWarmRestarts",
                                            "OneCycleLR",
                                            "PolynomialLR"};

template <size_t N>
bool Contains(const char* const (&names)[N], absl::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

// optimizer.type as DeepSpeed resolves it: Adam and AdamW in any case
// (DeepSpeed lower-cases its own optimizers' names), anything else as a
// torch.optim class name, which is case-sensitive ("SGD").
absl::StatusOr<std::string> OptimizerType(const std::string& type) {
  const std::string lower = absl::AsciiStrToLower(type);
  if (lower == "adam" || lower == "adamw") return lower;
  if (type == "SGD") return std::string("sgd");
  const std::string path = "optimizer.type";
  if (lower == "sgd") {
    return KeyError(
        path, absl::StrCat("\"", type,
                           "\" is not an optimizer DeepSpeed knows: "
                           "DeepSpeed builds SGD as torch.optim.SGD, "
                           "whose name is case-sensitive; write \"SGD\""));
  }
  if (Contains(kOtherDeepSpeedOptimizers, lower) ||
      Contains(kOtherTorchOptimizers, type)) {
    return KeyError(path, absl::StrCat("Strata does not implement the \"", type,
                                       "\" optimizer; Strata runs Adam, "
                                       "AdamW and SGD"));
  }
  return KeyError(path, absl::StrCat("\"", type,
                                     "\" is neither a DeepSpeed optimizer "
                                     "nor a torch.optim class; Strata runs "
                                     "Adam, AdamW (any case) and SGD"));
}

// Every given key of `section`.params is one the type takes.
absl::Status CheckParams(const DeepSpeedConfig& config,
                         const std::string& section,
                         const std::vector<std::string>& allowed,
                         const std::string& type_name) {
  const std::string prefix = section + ".params.";
  for (const std::string& path : config.given) {
    if (!absl::StartsWith(path, prefix)) continue;
    const std::string key = path.substr(prefix.size());
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return KeyError(
          path,
          absl::StrCat("not a parameter of ", type_name, " (DeepSpeed passes ",
                       section, ".params to its constructor, which takes ",
                       absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptimizer(DeepSpeedConfig* config) {
  DeepSpeedOptimizerConfig& o = config->optimizer;
  if (!o.present) return absl::OkStatus();
  if (!config->Given("optimizer.type")) {
    return KeyError("optimizer.type",
                    "missing: the optimizer section needs its type (Adam, "
                    "AdamW or SGD)");
  }
  const std::string written = o.type;
  absl::StatusOr<std::string> type = OptimizerType(written);
  if (!type.ok()) return type.status();
  o.type = *type;
  if (absl::Status s = CheckParams(*config, "optimizer",
                                   OptimizerParamKeys(o.type), written);
      !s.ok()) {
    return s;
  }
  if (o.type != "sgd") return absl::OkStatus();
  if (!config->Given("optimizer.params.lr")) {
    return KeyError("optimizer.params.lr",
                    "missing: torch.optim.SGD (PyTorch 1.13) has no default "
                    "learning rate");
  }
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    return KeyError("optimizer.params.nesterov",
                    absl::StrCat("true needs momentum > 0 and dampening 0 "
                                 "(as torch.optim.SGD), got momentum ",
                                 o.momentum, " and dampening ", o.dampening));
  }
  return absl::OkStatus();
}

absl::Status CheckScheduler(DeepSpeedConfig* config) {
  const DeepSpeedSchedulerConfig& s = config->scheduler;
  if (!s.present) return absl::OkStatus();
  const std::string path = "scheduler.type";
  if (!config->Given(path)) {
    return KeyError(path,
                    "missing: the scheduler section needs its type "
                    "(WarmupLR, WarmupDecayLR or WarmupCosineLR)");
  }
  if (SchedulerParamKeys(s.type).empty()) {
    if (Contains(kOtherSchedulers, s.type)) {
      return KeyError(path,
                      absl::StrCat("Strata does not implement the \"", s.type,
                                   "\" schedule; Strata runs WarmupLR, "
                                   "WarmupDecayLR and WarmupCosineLR"));
    }
    return KeyError(path, absl::StrCat("\"", s.type,
                                       "\" is not one of WarmupLR, "
                                       "WarmupDecayLR, WarmupCosineLR "
                                       "(DeepSpeed's names are "
                                       "case-sensitive)"));
  }
  if (absl::Status status =
          CheckParams(*config, "scheduler", SchedulerParamKeys(s.type), s.type);
      !status.ok()) {
    return status;
  }
  if (s.type == "WarmupLR") return absl::OkStatus();
  if (!s.total_num_steps.has_value()) {
    return KeyError(
        "scheduler.params.total_num_steps",
        absl::StrCat("missing: ", s.type, " needs the total number of steps"));
  }
  // DeepSpeed warms up over at least 2 steps, and its cosine divides by
  // total_num_steps minus that: equal, DeepSpeed fails (division by zero)
  // at the end of the warm-up.
  const int64_t warmup = std::max<int64_t>(2, s.warmup_num_steps);
  if (s.type == "WarmupCosineLR" && *s.total_num_steps == warmup) {
    return KeyError(
        "scheduler.params.total_num_steps",
        absl::StrCat(*s.total_num_steps,
                     " equals the warm-up (max(2, warmup_num_steps) = ", warmup,
                     "): WarmupCosineLR divides by their difference; make "
                     "total_num_steps larger"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeepSpeedConfig> ParseDeepSpeedConfig(absl::string_view json,
                                                     absl::string_view source) {
  absl::StatusOr<Json> parsed = ParseJson(json, source);
  if (!parsed.ok()) return parsed.status();
  const Json& root = *parsed;
  auto fail = [&](const absl::Status& status) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", status.message()));
  };
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object of DeepSpeed keys, got ",
                     Shown(root)));
  }
  DeepSpeedConfig config;
  config.source = std::string(source);
  for (const DeepSpeedKeySpec& spec : DeepSpeedKeySchema()) {
    if (spec.kind != DeepSpeedKind::kSection && spec.field != nullptr) {
      Assign(spec.field(config), spec.fallback);
    }
  }
  if (absl::Status s = Walk(root, "", &config); !s.ok()) return fail(s);
  if (absl::Status s = CheckOptimizer(&config); !s.ok()) return fail(s);
  if (absl::Status s = CheckScheduler(&config); !s.ok()) return fail(s);
  return config;
}

}  // namespace strata::launch
