#include "models/dropout.h"

#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/fnv.h"

namespace strata::models {
namespace {

// Philox4x32 round constants (Salmon et al. 2011, table 2).
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

// The Philox key of (seed, step, site): FNV-1a over their bytes.
std::array<uint32_t, 2> StepKey(uint64_t seed, int64_t step, uint64_t site) {
  uint64_t h = Fnv1a(kFnv1aOffset, &seed, sizeof(seed));
  h = Fnv1a(h, &step, sizeof(step));
  h = Fnv1a(h, &site, sizeof(site));
  return {static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
}

// The 24 high bits of a word as a float in [0, 1).
inline float ToUniform(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// Fills mask[0, n) for one sample: mask[e] = (uniform(e) >= p) * scale.
template <typename T>
void FillRow(T* mask, int64_t n, std::array<uint32_t, 2> key, int64_t sample_id,
             float p, float scale) {
  const uint64_t sample = static_cast<uint64_t>(sample_id);
  const T kept = static_cast<T>(scale);
  const T dropped = static_cast<T>(0.0f);
  for (int64_t block = 0; block * 4 < n; ++block) {
    const auto words = Philox4x32(
        {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
         static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)},
        key);
    const int64_t base = block * 4;
    const int64_t count = std::min<int64_t>(4, n - base);
    for (int64_t j = 0; j < count; ++j) {
      mask[base + j] = ToUniform(words[j]) >= p ? kept : dropped;
    }
  }
}

}  // namespace

uint64_t DropoutSiteKey(std::string_view unit, std::string_view site) {
  uint64_t h = Fnv1a(kFnv1aOffset, unit);
  h = Fnv1a(h, "/");
  return Fnv1a(h, site);
}

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> c,
                                   std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kMul0, c[0], &hi0, &lo0);
    MulHiLo(kMul1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k = {k[0] + kWeyl0, k[1] + kWeyl1};
  }
  return c;
}

float DropoutUniform(uint64_t seed, int64_t step, uint64_t site,
                     int64_t sample_id, int64_t element) {
  const uint64_t sample = static_cast<uint64_t>(sample_id);
  const int64_t block = element / 4;
  const auto words = Philox4x32(
      {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
       static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)},
      StepKey(seed, step, site));
  return ToUniform(words[element % 4]);
}

at::Tensor CounterDropout(const at::Tensor& x, double p, uint64_t site,
                          const DropoutContext& context) {
  if (!(p >= 0 && p < 1)) {
    throw std::invalid_argument(
        absl::StrCat("dropout probability must be in [0, 1), got ", p));
  }
  if (x.dim() < 1 ||
      x.size(0) != static_cast<int64_t>(context.sample_ids.size())) {
    throw std::invalid_argument(absl::StrCat(
        "CounterDropout: the activation has ", x.dim() < 1 ? 0 : x.size(0),
        " rows but the dropout context names ", context.sample_ids.size(),
        " samples; set UnitModel::SetDropoutContext for the batch being run"));
  }
  if (!x.device().is_cpu() && !x.device().is_cuda()) {
    throw std::invalid_argument(
        absl::StrCat("CounterDropout: tensors on ", x.device().str(),
                     " are not supported (CPU or CUDA)"));
  }
  const int64_t rows = x.size(0);
  const int64_t per_row = rows == 0 ? 0 : x.numel() / rows;
  const auto key = StepKey(context.seed, context.step, site);
  const float pf = static_cast<float>(p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  // The mask is drawn on the host (the same bits on every device) and, for a
  // CUDA activation, copied over.
  at::Tensor mask =
      at::empty(x.sizes(), x.options().device(at::kCPU).requires_grad(false));
  // One thread: mask generation (~6 ns per element) runs between GEMMs, and
  // an OpenMP region here leaves its threads spinning against OpenBLAS's on
  // small machines (measured: 46 % slower steps at 2 threads on 2 cores).
  auto fill = [&](auto* data) {
    for (int64_t b = 0; b < rows; ++b) {
      FillRow(data + b * per_row, per_row, key, context.sample_ids[b], pf,
              scale);
    }
  };
  switch (x.scalar_type()) {
    case at::kFloat:
      fill(mask.data_ptr<float>());
      break;
    case at::kDouble:
      fill(mask.data_ptr<double>());
      break;
    case at::kBFloat16:
      fill(mask.data_ptr<at::BFloat16>());
      break;
    case at::kHalf:
      fill(mask.data_ptr<at::Half>());
      break;
    default:
      throw std::invalid_argument(
          absl::StrCat("CounterDropout: unsupported dtype ",
                       std::string(c10::toString(x.scalar_type()))));
  }
  return at::mul(x, x.is_cuda() ? mask.to(x.device()) : mask);
}

at::Tensor Dropout(const at::Tensor& x, const DropoutSpec& spec) {
  if (!spec.train || spec.p == 0) return x;
  if (spec.context == nullptr) return at::dropout(x, spec.p, /*train=*/true);
  return CounterDropout(x, spec.p, spec.site, *spec.context);
}

}  // namespace strata::models
