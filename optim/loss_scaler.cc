#include "optim/loss_scaler.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/named_state.h"
#include "base/status.h"

namespace strata::optim {
namespace {

constexpr int64_t kGrainSize = 32768;
constexpr double kFloatMax = std::numeric_limits<float>::max();
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53
constexpr std::array<const char*, 8> kStateKeys = {
    "scale",          "growth_factor", "backoff_factor", "growth_interval",
    "growth_tracker", "hysteresis",    "min_scale",      "hysteresis_left"};

// Scales n floats by `factor`; returns whether any result is not finite
// (exponent bits all ones), with a branch-free loop the compiler vectorises.
bool ScaleAndFindNonFinite(float* __restrict data, int64_t n, float factor) {
  uint32_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = data[i] * factor;
    data[i] = v;
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    non_finite |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return non_finite != 0;
}

template <typename T>
bool ScaleAndFindNonFinite(T* data, int64_t n, float factor) {
  bool non_finite = false;
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, double>) {
      data[i] = data[i] * static_cast<double>(factor);
      non_finite |= !std::isfinite(data[i]);
    } else {  // BFloat16, Half: computed in float, as LibTorch does.
      data[i] = static_cast<T>(static_cast<float>(data[i]) * factor);
      non_finite |= !std::isfinite(static_cast<float>(data[i]));
    }
  }
  return non_finite;
}

template <typename T>
bool UnscaleAll(T* data, int64_t n, float factor) {
  std::atomic<bool> found{false};
  at::parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    if (ScaleAndFindNonFinite(data + begin, end - begin, factor)) {
      found.store(true, std::memory_order_relaxed);
    }
  });
  return found.load();
}

}  // namespace

absl::Status ValidateLossScalerOptions(const LossScalerOptions& options) {
  if (!(options.init_scale > 0 && options.init_scale <= kFloatMax)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler init_scale must be > 0 and fit in float32, got ",
        options.init_scale));
  }
  if (!(options.growth_factor >= 1 && std::isfinite(options.growth_factor))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler growth_factor must be >= 1, got ", options.growth_factor));
  }
  if (!(options.backoff_factor > 0 && options.backoff_factor <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler backoff_factor must be in (0, 1], got ",
                     options.backoff_factor));
  }
  if (options.growth_interval < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler growth_interval must be >= 1, got ",
                     options.growth_interval));
  }
  if (options.hysteresis < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler hysteresis must be >= 1, got ", options.hysteresis));
  }
  if (!(options.min_scale >= 0 && options.min_scale <= kFloatMax)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler min_scale must be >= 0 and fit in float32, got ",
        options.min_scale));
  }
  return absl::OkStatus();
}

LossScaler::LossScaler(const LossScalerOptions& options)
    : options_(options),
      scale_(static_cast<float>(options.init_scale)),
      hysteresis_left_(options.hysteresis) {}

absl::StatusOr<std::unique_ptr<LossScaler>> LossScaler::Create(
    const LossScalerOptions& options) {
  if (absl::Status s = ValidateLossScalerOptions(options); !s.ok()) return s;
  return std::unique_ptr<LossScaler>(new LossScaler(options));
}

bool LossScaler::UnscaleAndCheck(
    at::Tensor grads, const std::function<bool(bool)>& any_across_shards) {
  CHECK(grads.defined()) << "gradients are an undefined tensor";
  CHECK(grads.is_contiguous()) << "gradients must be contiguous";
  // GradScaler: inv_scale = scale.double().reciprocal().float().
  const float inv_scale = static_cast<float>(1.0 / scale_);
  const int64_t n = grads.numel();
  bool found_inf = false;
  if (grads.is_cuda()) {
    // GradScaler's order: check the scaled values, then multiply.
    found_inf = !grads.isfinite().all().item<bool>();
    grads.mul_(inv_scale);
    if (any_across_shards) found_inf = any_across_shards(found_inf);
    return !found_inf;
  }
  CHECK(grads.device().is_cpu()) << "gradients must be on the CPU or CUDA";
  switch (grads.scalar_type()) {
    case at::kFloat:
      found_inf = UnscaleAll(grads.data_ptr<float>(), n, inv_scale);
      break;
    case at::kDouble:
      found_inf = UnscaleAll(grads.data_ptr<double>(), n, inv_scale);
      break;
    case at::kBFloat16:
      found_inf = UnscaleAll(grads.data_ptr<c10::BFloat16>(), n, inv_scale);
      break;
    case at::kHalf:
      found_inf = UnscaleAll(grads.data_ptr<c10::Half>(), n, inv_scale);
      break;
    default:
      LOG(FATAL) << "gradients must be Float, Double, BFloat16 or Half, got "
                 << grads.scalar_type();
  }
  if (any_across_shards) found_inf = any_across_shards(found_inf);
  return !found_inf;
}

void LossScaler::Update(bool found_inf) {
  if (found_inf) {
    growth_tracker_ = 0;
    if (hysteresis_left_ > 1) {
      --hysteresis_left_;
      return;
    }
    scale_ = static_cast<float>(
        std::max(scale_ * options_.backoff_factor, options_.min_scale));
    return;
  }
  if (++growth_tracker_ < options_.growth_interval) return;
  const float grown = static_cast<float>(scale_ * options_.growth_factor);
  if (std::isfinite(grown)) scale_ = grown;
  growth_tracker_ = 0;
  hysteresis_left_ = options_.hysteresis;
}

std::vector<std::pair<std::string, double>> LossScaler::State() const {
  return {{"scale", scale_},
          {"growth_factor", options_.growth_factor},
          {"backoff_factor", options_.backoff_factor},
          {"growth_interval", static_cast<double>(options_.growth_interval)},
          {"growth_tracker", static_cast<double>(growth_tracker_)},
          {"hysteresis", static_cast<double>(options_.hysteresis)},
          {"min_scale", options_.min_scale},
          {"hysteresis_left", static_cast<double>(hysteresis_left_)}};
}

absl::Status LossScaler::LoadState(
    const std::vector<std::pair<std::string, double>>& state) {
  STRATA_ASSIGN_OR_RETURN(
      auto values,
      NamedStateMap<double>("loss scaler state", state, kStateKeys));
  for (const char* key :
       {"growth_interval", "growth_tracker", "hysteresis", "hysteresis_left"}) {
    const double v = values[key];
    if (!(std::floor(v) == v && std::abs(v) <= kMaxExactInteger)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "loss scaler state '", key, "' must be an integer, got ", v));
    }
  }
  if (!(values["scale"] > 0 && values["scale"] <= kFloatMax)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler state 'scale' must be > 0 and fit in float32, got ",
        values["scale"]));
  }
  LossScalerOptions options;
  options.init_scale = values["scale"];
  options.growth_factor = values["growth_factor"];
  options.backoff_factor = values["backoff_factor"];
  options.growth_interval = static_cast<int64_t>(values["growth_interval"]);
  options.hysteresis = static_cast<int64_t>(values["hysteresis"]);
  options.min_scale = values["min_scale"];
  if (absl::Status s = ValidateLossScalerOptions(options); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler state: ", s.message()));
  }
  const int64_t tracker = static_cast<int64_t>(values["growth_tracker"]);
  if (tracker < 0 || tracker >= options.growth_interval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler state 'growth_tracker' must be in [0, growth_interval = ",
        options.growth_interval, "), got ", tracker));
  }
  const int64_t hysteresis_left =
      static_cast<int64_t>(values["hysteresis_left"]);
  if (hysteresis_left < 1 || hysteresis_left > options.hysteresis) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss scaler state 'hysteresis_left' must be in [1, hysteresis = ",
        options.hysteresis, "], got ", hysteresis_left));
  }
  options_ = options;
  scale_ = static_cast<float>(options.init_scale);
  growth_tracker_ = tracker;
  hysteresis_left_ = hysteresis_left;
  return absl::OkStatus();
}

}  // namespace strata::optim
