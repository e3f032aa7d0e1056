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

constexpr std::array<const char*, 4> kKindNames = {"constant", "cosine",
                                                   "linear", "step"};
constexpr double kPi = 3.14159265358979323846;
// Integers that a double holds exactly.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

constexpr std::array<const char*, 8> kStateKeys = {
    "kind",   "base_lr",   "warmup_steps", "total_steps",
    "min_lr", "step_size", "gamma",        "last_step"};

int KindIndex(const std::string& kind) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (kind == kKindNames[i]) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<int64_t> ToInteger(const std::string& key, double value) {
  if (!(std::floor(value) == value && std::abs(value) <= kMaxExactInteger)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_schedule state '", key, "' must be an integer, got ", value));
  }
  return static_cast<int64_t>(value);
}

}  // namespace

absl::Status ValidateLrScheduleOptions(const LrScheduleOptions& options) {
  const int kind = KindIndex(options.kind);
  if (kind < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_schedule kind must be one of ", absl::StrJoin(kKindNames, ", "),
        "; got '", options.kind, "'"));
  }
  const std::string prefix = absl::StrCat("lr_schedule '", options.kind, "'");
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
  if (options.kind == "cosine" || options.kind == "linear") {
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
  if (options.kind == "step") {
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

LrSchedule::LrSchedule(const LrScheduleOptions& options, Kind kind)
    : options_(options), kind_(kind) {}

absl::StatusOr<std::unique_ptr<LrSchedule>> LrSchedule::Create(
    const LrScheduleOptions& options) {
  if (absl::Status s = ValidateLrScheduleOptions(options); !s.ok()) return s;
  return std::unique_ptr<LrSchedule>(
      new LrSchedule(options, static_cast<Kind>(KindIndex(options.kind))));
}

double LrSchedule::LrAt(int64_t step) const {
  CHECK_GE(step, 0) << "lr_schedule steps count from 0";
  const LrScheduleOptions& o = options_;
  if (step < o.warmup_steps) {
    return o.base_lr * static_cast<double>(step + 1) /
           static_cast<double>(o.warmup_steps);
  }
  const int64_t t = step - o.warmup_steps;
  const double period = static_cast<double>(o.total_steps - o.warmup_steps);
  switch (kind_) {
    case Kind::kConstant:
      return o.base_lr;
    case Kind::kCosine:
      if (step >= o.total_steps) return o.min_lr;
      return o.min_lr +
             (o.base_lr - o.min_lr) *
                 (1 + std::cos(kPi * static_cast<double>(t) / period)) / 2;
    case Kind::kLinear:
      if (step >= o.total_steps) return o.min_lr;
      return o.min_lr +
             (o.base_lr - o.min_lr) * (1 - static_cast<double>(t) / period);
    case Kind::kStep:
      return o.base_lr *
             std::pow(o.gamma, static_cast<double>(t / o.step_size));
  }
  LOG(FATAL) << "unknown lr_schedule kind " << static_cast<int>(kind_);
}

std::vector<std::pair<std::string, double>> LrSchedule::State(
    int64_t last_step) const {
  CHECK_GE(last_step, -1);
  const LrScheduleOptions& o = options_;
  return {{"kind", static_cast<double>(kind_)},
          {"base_lr", o.base_lr},
          {"warmup_steps", static_cast<double>(o.warmup_steps)},
          {"total_steps", static_cast<double>(o.total_steps)},
          {"min_lr", o.min_lr},
          {"step_size", static_cast<double>(o.step_size)},
          {"gamma", o.gamma},
          {"last_step", static_cast<double>(last_step)}};
}

absl::StatusOr<RestoredLrSchedule> LrSchedule::FromState(
    const std::vector<std::pair<std::string, double>>& state) {
  STRATA_ASSIGN_OR_RETURN(
      auto values,
      NamedStateMap<double>("lr_schedule state", state, kStateKeys));
  absl::StatusOr<int64_t> kind = ToInteger("kind", values["kind"]);
  if (!kind.ok()) return kind.status();
  if (*kind < 0 || *kind >= static_cast<int64_t>(kKindNames.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr_schedule state 'kind' must be 0 (constant), 1 (cosine), 2 "
        "(linear) or 3 (step), got ",
        values["kind"]));
  }
  LrScheduleOptions options;
  options.kind = kKindNames[*kind];
  options.base_lr = values["base_lr"];
  options.min_lr = values["min_lr"];
  options.gamma = values["gamma"];
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
