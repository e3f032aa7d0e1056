#include "optim/lr_schedule.h"

#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/named_state.h"
#include "base/status.h"

namespace strata::optim {
namespace {

constexpr std::array<const char*, 7> kKindNames = {
    "constant",  "cosine",          "linear",          "step",
    "warmup_lr", "warmup_decay_lr", "warmup_cosine_lr"};
constexpr std::array<const char*, 2> kWarmupTypes = {"linear", "log"};
constexpr double kPi = 3.14159265358979323846;
// Integers that a double holds exactly.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

constexpr std::array<const char*, 11> kStateKeys = {
    "kind",        "base_lr",          "warmup_steps", "total_steps",
    "min_lr",      "step_size",        "gamma",        "last_step",
    "warmup_type", "warmup_min_ratio", "min_ratio"};
// The keys a state saved before DeepSpeed's kinds lacks, and their values.
constexpr std::array<std::pair<const char*, double>, 3> kLaterStateKeys = {
    {{"warmup_type", 0.0}, {"warmup_min_ratio", 0.0}, {"min_ratio", 0.0}}};

template <size_t N>
int IndexOf(const std::array<const char*, N>& names, absl::string_view name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (name == names[i]) return static_cast<int>(i);
  }
  return -1;
}

// DeepSpeed warms up over at least 2 steps.
int64_t DeepSpeedWarmup(const LrScheduleOptions& o) {
  return std::max<int64_t>(2, o.warmup_steps);
}

// DeepSpeed's kinds: warm-up type, ratios and the cosine's period.
absl::Status ValidateDeepSpeedOptions(const LrScheduleOptions& options,
                                      const std::string& prefix) {
  if (!(std::isfinite(options.min_lr) && options.min_lr >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, " needs min_lr >= 0, got ", options.min_lr));
  }
  for (auto [name, ratio] : {std::pair<const char*, double>{
                                 "warmup_min_ratio", options.warmup_min_ratio},
                             {"min_ratio", options.min_ratio}}) {
    if (!(ratio >= 0 && ratio <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, " needs ", name, " in [0, 1], got ", ratio));
    }
  }
  if (options.kind == LrScheduleKind::kWarmupCosineLr &&
      options.total_steps == DeepSpeedWarmup(options)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix,
                     " needs total_steps != max(2, warmup_steps) (its cosine "
                     "divides by their difference), got both ",
                     options.total_steps));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ToInteger(const std::string& key, double value) {
  if (!(std::floor(value) == value && std::abs(value) <= kMaxExactInteger)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_schedule state '", key, "' must be an integer, got ", value));
  }
  return static_cast<int64_t>(value);
}

}  // namespace

absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name,
                                                   absl::string_view what) {
  if (const int index = IndexOf(kKindNames, name); index >= 0) {
    return static_cast<LrScheduleKind>(index);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": must be ",
      absl::StrJoin(kKindNames.begin(), kKindNames.end() - 1, ", "), " or ",
      kKindNames.back(), ", got '", name, "'"));
}

absl::string_view LrScheduleKindName(LrScheduleKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kKindNames.size() ? kKindNames[index] : "unknown";
}

bool IsDeepSpeedSchedule(LrScheduleKind kind) {
  return kind == LrScheduleKind::kWarmupLr ||
         kind == LrScheduleKind::kWarmupDecayLr ||
         kind == LrScheduleKind::kWarmupCosineLr;
}

absl::Status ValidateLrScheduleOptions(const LrScheduleOptions& options) {
  if (LrScheduleKindName(options.kind) == "unknown") {
    return absl::InvalidArgumentError(
        absl::StrCat("lr_schedule kind must be an LrScheduleKind, got code ",
                     static_cast<int>(options.kind)));
  }
  const std::string prefix =
      absl::StrCat("lr_schedule '", LrScheduleKindName(options.kind), "'");
  if (!(std::isfinite(options.base_lr) && options.base_lr >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, " needs base_lr >= 0, got ", options.base_lr));
  }
  if (options.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, " needs warmup_steps >= 0, got ", options.warmup_steps));
  }
  if (options.total_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, " needs total_steps >= 0, got ", options.total_steps));
  }
  if (options.kind == LrScheduleKind::kCosine ||
      options.kind == LrScheduleKind::kLinear) {
    if (options.total_steps <= options.warmup_steps) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, " needs total_steps > warmup_steps, got ", "total_steps ",
          options.total_steps, " and warmup_steps ", options.warmup_steps));
    }
    if (!(options.min_lr >= 0 && options.min_lr <= options.base_lr)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, " needs 0 <= min_lr <= base_lr, got min_lr ",
                       options.min_lr, " and base_lr ", options.base_lr));
    }
  }
  if (IndexOf(kWarmupTypes, options.warmup_type) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, " needs warmup_type linear or log, got '",
                     options.warmup_type, "'"));
  }
  if (IsDeepSpeedSchedule(options.kind)) {
    return ValidateDeepSpeedOptions(options, prefix);
  }
  if (options.warmup_type != "linear") {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, " warms up linearly; warmup_type '", options.warmup_type,
        "' is for warmup_lr, warmup_decay_lr and warmup_cosine_lr"));
  }
  if (options.kind == LrScheduleKind::kStep) {
    if (options.step_size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, " needs step_size > 0, got ", options.step_size));
    }
    if (!(std::isfinite(options.gamma) && options.gamma > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, " needs gamma > 0, got ", options.gamma));
    }
  }
  return absl::OkStatus();
}

LrSchedule::LrSchedule(const LrScheduleOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<LrSchedule>> LrSchedule::Create(
    const LrScheduleOptions& options) {
  if (absl::Status s = ValidateLrScheduleOptions(options); !s.ok()) return s;
  return std::unique_ptr<LrSchedule>(new LrSchedule(options));
}

double LrSchedule::DeepSpeedLrAt(int64_t step) const {
  const LrScheduleOptions& o = options_;
  // The lr DeepSpeed sets when it builds the scheduler, used by step 0.
  if (step == 0) {
    return o.kind == LrScheduleKind::kWarmupCosineLr ? 0.0 : o.min_lr;
  }
  // Step s runs at the value for DeepSpeed's last_batch_iteration s - 1.
  const int64_t i = step - 1;
  const int64_t warmup = DeepSpeedWarmup(o);
  const double inverse_log_warmup = 1.0 / std::log(static_cast<double>(warmup));
  double gamma = 1.0;  // The warm-up fraction g(i).
  if (i < warmup) {
    gamma = o.warmup_type == "log"
                ? inverse_log_warmup * std::log(static_cast<double>(i + 1))
                : static_cast<double>(i) / static_cast<double>(warmup);
  }
  if (o.kind == LrScheduleKind::kWarmupCosineLr) {
    double ratio = 0;
    if (i < warmup) {
      ratio = o.warmup_min_ratio + gamma * (1.0 - o.warmup_min_ratio);
    } else {
      const double real_last_step = static_cast<double>(i - warmup + 1);
      const double real_total_steps =
          static_cast<double>(o.total_steps - warmup);
      ratio = (1 + std::cos(kPi * real_last_step / real_total_steps)) / 2;
      ratio = std::max(0.0, o.min_ratio + (1.0 - o.min_ratio) * ratio);
    }
    return o.base_lr * ratio;
  }
  if (o.kind == LrScheduleKind::kWarmupDecayLr && i >= warmup) {
    gamma = std::max(
        0.0, static_cast<double>(o.total_steps - i) /
                 std::max(1.0, static_cast<double>(o.total_steps - warmup)));
  }
  return o.min_lr + (o.base_lr - o.min_lr) * gamma;
}

double LrSchedule::LrAt(int64_t step) const {
  CHECK_GE(step, 0) << "lr_schedule steps count from 0";
  const LrScheduleOptions& o = options_;
  if (IsDeepSpeedSchedule(o.kind)) return DeepSpeedLrAt(step);
  if (step < o.warmup_steps) {
    return o.base_lr * static_cast<double>(step + 1) /
           static_cast<double>(o.warmup_steps);
  }
  const int64_t t = step - o.warmup_steps;
  const double period = static_cast<double>(o.total_steps - o.warmup_steps);
  switch (o.kind) {
    case LrScheduleKind::kConstant:
      return o.base_lr;
    case LrScheduleKind::kCosine:
      if (step >= o.total_steps) return o.min_lr;
      return o.min_lr +
             (o.base_lr - o.min_lr) *
                 (1 + std::cos(kPi * static_cast<double>(t) / period)) / 2;
    case LrScheduleKind::kLinear:
      if (step >= o.total_steps) return o.min_lr;
      return o.min_lr +
             (o.base_lr - o.min_lr) * (1 - static_cast<double>(t) / period);
    case LrScheduleKind::kStep:
      return o.base_lr *
             std::pow(o.gamma, static_cast<double>(t / o.step_size));
    case LrScheduleKind::kWarmupLr:
    case LrScheduleKind::kWarmupDecayLr:
    case LrScheduleKind::kWarmupCosineLr:
      break;  // DeepSpeedLrAt.
  }
  LOG(FATAL) << "unknown lr_schedule kind " << static_cast<int>(o.kind);
}

std::vector<std::pair<std::string, double>> LrSchedule::State(
    int64_t last_step) const {
  CHECK_GE(last_step, -1);
  const LrScheduleOptions& o = options_;
  return {{"kind", static_cast<double>(o.kind)},
          {"base_lr", o.base_lr},
          {"warmup_steps", static_cast<double>(o.warmup_steps)},
          {"total_steps", static_cast<double>(o.total_steps)},
          {"min_lr", o.min_lr},
          {"step_size", static_cast<double>(o.step_size)},
          {"gamma", o.gamma},
          {"last_step", static_cast<double>(last_step)},
          {"warmup_type",
           static_cast<double>(IndexOf(kWarmupTypes, o.warmup_type))},
          {"warmup_min_ratio", o.warmup_min_ratio},
          {"min_ratio", o.min_ratio}};
}

absl::StatusOr<RestoredLrSchedule> LrSchedule::FromState(
    const std::vector<std::pair<std::string, double>>& saved) {
  std::vector<std::pair<std::string, double>> state = saved;
  // A state saved before DeepSpeed's kinds: none of the later keys.
  const bool earlier = std::none_of(
      state.begin(), state.end(), [](const std::pair<std::string, double>& kv) {
        for (const auto& [key, value] : kLaterStateKeys) {
          if (kv.first == key) return true;
        }
        return false;
      });
  if (earlier) {
    for (const auto& [key, value] : kLaterStateKeys) {
      state.emplace_back(key, value);
    }
  }
  STRATA_ASSIGN_OR_RETURN(
      auto values,
      NamedStateMap<double>("lr_schedule state", state, kStateKeys));
  for (const char* key : {"kind", "warmup_type"}) {
    absl::StatusOr<int64_t> code = ToInteger(key, values[key]);
    if (!code.ok()) return code.status();
  }
  const double kind = values["kind"];
  if (kind < 0 || kind >= static_cast<double>(kKindNames.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_schedule state 'kind' must be 0 (constant), 1 (cosine), 2 "
        "(linear), 3 (step), 4 (warmup_lr), 5 (warmup_decay_lr) or 6 "
        "(warmup_cosine_lr), got ",
        kind));
  }
  const double warmup_type = values["warmup_type"];
  if (warmup_type < 0 || warmup_type >= kWarmupTypes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lr_schedule state 'warmup_type' must be 0 (linear) or "
                     "1 (log), got ",
                     warmup_type));
  }
  LrScheduleOptions options;
  options.kind = static_cast<LrScheduleKind>(kind);
  options.warmup_type = kWarmupTypes[static_cast<size_t>(warmup_type)];
  options.base_lr = values["base_lr"];
  options.min_lr = values["min_lr"];
  options.gamma = values["gamma"];
  options.warmup_min_ratio = values["warmup_min_ratio"];
  options.min_ratio = values["min_ratio"];
  int64_t last_step = 0;
  for (auto [key, field] :
       std::initializer_list<std::pair<const char*, int64_t*>>{
           {"warmup_steps", &options.warmup_steps},
           {"total_steps", &options.total_steps},
           {"step_size", &options.step_size},
           {"last_step", &last_step}}) {
    absl::StatusOr<int64_t> value = ToInteger(key, values[key]);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  return FromOptions(options, last_step);
}

absl::StatusOr<RestoredLrSchedule> LrSchedule::FromOptions(
    const LrScheduleOptions& options, int64_t last_step) {
  if (last_step < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_schedule state 'last_step' must be >= -1, got ", last_step));
  }
  absl::StatusOr<std::unique_ptr<LrSchedule>> schedule = Create(options);
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lr_schedule state: ", schedule.status().message()));
  }
  return RestoredLrSchedule{*std::move(schedule), last_step};
}

}  // namespace strata::optim
