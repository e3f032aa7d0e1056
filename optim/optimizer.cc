#include "optim/optimizer.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/shape.h"

namespace strata::optim {

std::ostream& operator<<(std::ostream& os, const ParamRange& range) {
  os << "{offset " << range.offset << ", numel " << range.numel
     << ", weight_decay " << range.weight_decay;
  if (range.frozen) os << ", frozen";
  return os << "}";
}
std::string OptionName(absl::string_view optimizer, absl::string_view field,
                       absl::string_view flag_prefix) {
  return flag_prefix.empty() ? absl::StrCat(optimizer, " ", field)
                             : absl::StrCat(flag_prefix, field);
}

namespace {

// Elements per parallel chunk: small enough for two cores to share a
// bias-sized tensor, large enough that forking costs nothing.
constexpr int64_t kGrainSize = 32768;

std::string Describe(const at::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return absl::StrCat(ShapeString(t.sizes()), " (",
                      c10::toString(t.scalar_type()), ")");
}

absl::Status CheckFlatBuffer(const at::Tensor& t, absl::string_view what) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer ", what, " is an undefined tensor"));
  }
  if (!t.device().is_cpu() && !t.device().is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer ", what, " must be on the CPU or a CUDA device, got ",
        t.device().str()));
  }
  if (t.scalar_type() != at::kFloat || t.dim() != 1 || !t.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer ", what, " must be a 1-D contiguous Float tensor, got ",
        Describe(t), t.is_contiguous() ? "" : ", not contiguous"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateFlatBuffers(const at::Tensor& params,
                                 const at::Tensor& grads) {
  if (absl::Status s = CheckFlatBuffer(params, "params"); !s.ok()) return s;
  if (absl::Status s = CheckFlatBuffer(grads, "grads"); !s.ok()) return s;
  if (params.device() != grads.device()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer params are on ", params.device().str(),
                     " but grads on ", grads.device().str()));
  }
  if (params.numel() == 0) {
    return absl::InvalidArgumentError("optimizer params are empty");
  }
  if (params.numel() != grads.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer grads must have as many elements as params (",
                     params.numel(), "), got ", grads.numel()));
  }
  if (params.is_alias_of(grads)) {
    const int64_t p = params.storage_offset();
    const int64_t g = grads.storage_offset();
    if (p < g + grads.numel() && g < p + params.numel()) {
      return absl::InvalidArgumentError(
          "optimizer params and grads overlap in memory");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ParamRange>> NormalizeParamRanges(
    std::vector<ParamRange> ranges, int64_t numel) {
  if (ranges.empty()) return std::vector<ParamRange>{{0, numel, 0.0}};
  std::vector<ParamRange> result;
  int64_t expected_offset = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ParamRange& r = ranges[i];
    const std::string name = absl::StrCat("ranges[", i, "]");
    if (r.offset != expected_offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " starts at offset ", r.offset, ", expected ", expected_offset,
          i == 0 ? "" : absl::StrCat(" (where ranges[", i - 1, "] ends)"),
          ": ranges must be sorted, start at 0 and follow each other without "
          "gap or overlap"));
    }
    if (r.numel < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " has numel ", r.numel, ", expected >= 0"));
    }
    if (r.numel > numel - r.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " [", r.offset, ", ", r.offset + r.numel,
          ") ends past the end of the buffer (", numel, " elements)"));
    }
    if (!std::isfinite(r.weight_decay) || r.weight_decay < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " has weight_decay ", r.weight_decay, ", expected >= 0"));
    }
    expected_offset = r.offset + r.numel;
    if (r.numel > 0) result.push_back(r);
  }
  return result;
}

std::vector<ParamRange> SliceParamRanges(const std::vector<ParamRange>& ranges,
                                         int64_t offset, int64_t numel) {
  CHECK_GE(offset, 0);
  CHECK_GE(numel, 0);
  std::vector<ParamRange> result;
  for (const ParamRange& r : ranges) {
    const int64_t begin = std::max(r.offset, offset);
    const int64_t end = std::min(r.offset + r.numel, offset + numel);
    if (begin < end) {
      result.push_back({begin - offset, end - begin, r.weight_decay, r.frozen});
    }
  }
  if (result.empty()) result.push_back({0, 0, 0.0});
  return result;
}

std::vector<ParamRange> DecayRanges(const std::vector<RangeParameter>& params,
                                    double weight_decay) {
  std::vector<ParamRange> ranges;
  for (const RangeParameter& p : params) {
    const bool frozen = !p.requires_grad;
    const double wd = !frozen && p.ndim >= 2 ? weight_decay : 0.0;
    if (!ranges.empty() && ranges.back().weight_decay == wd &&
        ranges.back().frozen == frozen &&
        ranges.back().offset + ranges.back().numel == p.offset) {
      ranges.back().numel += p.numel;
    } else {
      ranges.push_back({p.offset, p.numel, wd, frozen});
    }
  }
  return ranges;
}

std::vector<ParamRange> ConcatenateShardRanges(
    const std::vector<ShardPlacement>& placements, int64_t buffer_numel) {
  std::vector<ParamRange> ranges;
  auto covered = [&] {
    return ranges.empty() ? 0 : ranges.back().offset + ranges.back().numel;
  };
  for (const ShardPlacement& placement : placements) {
    for (const ParamRange& r : SliceParamRanges(
             placement.ranges, placement.shard_offset, placement.shard_numel)) {
      if (r.numel == 0) continue;
      const int64_t offset = placement.buffer_offset + r.offset;
      const int64_t cursor = covered();
      CHECK_GE(offset, cursor) << "placements overlap or are out of order";
      if (offset > cursor) {
        ranges.push_back({cursor, offset - cursor, 0.0, /*frozen=*/true});
      }
      ranges.push_back({offset, r.numel, r.weight_decay, r.frozen});
    }
  }
  const int64_t cursor = covered();
  CHECK_LE(cursor, buffer_numel);
  if (cursor < buffer_numel) {
    ranges.push_back({cursor, buffer_numel - cursor, 0.0, /*frozen=*/true});
  }
  return ranges;
}

Optimizer::Optimizer(at::Tensor params, at::Tensor grads,
                     std::vector<ParamRange> ranges)
    : params_(std::move(params)),
      grads_(std::move(grads)),
      ranges_(std::move(ranges)),
      step_(at::zeros({}, at::kLong)) {
  CHECK(ValidateFlatBuffers(params_, grads_).ok());
}

int64_t Optimizer::num_steps() const { return *step_.data_ptr<int64_t>(); }

int64_t Optimizer::IncrementStep() { return ++*step_.data_ptr<int64_t>(); }

void Optimizer::ParallelForEachRange(
    const std::function<void(size_t, int64_t, int64_t)>& fn) const {
  if (ranges_.empty()) return;
  const int64_t end = ranges_.back().offset + ranges_.back().numel;
  at::parallel_for(0, end, kGrainSize, [&](int64_t begin, int64_t chunk_end) {
    // The first range that ends after `begin` contains it: ranges are
    // contiguous from 0 and non-empty.
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), begin,
                               [](int64_t value, const ParamRange& r) {
                                 return value < r.offset + r.numel;
                               });
    for (size_t i = it - ranges_.begin(); begin < chunk_end; ++i) {
      CHECK_LT(i, ranges_.size());
      const int64_t segment_end =
          std::min(chunk_end, ranges_[i].offset + ranges_[i].numel);
      if (!ranges_[i].frozen) fn(i, begin, segment_end);
      begin = segment_end;
    }
  });
}

absl::Status Optimizer::LoadState(const NamedTensors& state) {
  NamedTensors live = State();
  std::map<std::string, const at::Tensor*> loaded;
  std::vector<std::string> expected_names;
  for (const auto& [key, tensor] : live) expected_names.push_back(key);
  const std::string context = absl::StrCat("optimizer '", name(), "' state");
  for (const auto& [key, tensor] : state) {
    if (std::find(expected_names.begin(), expected_names.end(), key) ==
        expected_names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          context, " has unexpected key '", key,
          "'; expected keys: ", absl::StrJoin(expected_names, ", ")));
    }
    if (!loaded.emplace(key, &tensor).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, " has key '", key, "' twice"));
    }
  }
  for (const auto& [key, target] : live) {
    auto it = loaded.find(key);
    if (it == loaded.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, " is missing key '", key, "'"));
    }
    const at::Tensor& source = *it->second;
    if (!source.defined() || source.scalar_type() != target.scalar_type() ||
        source.sizes() != target.sizes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, " '", key, "': expected shape ",
                       Describe(target), ", got ", Describe(source)));
    }
    if (key == "step" && source.item<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          context, " 'step' must be >= 0, got ", source.item<int64_t>()));
    }
  }
  at::NoGradGuard no_grad;
  for (auto& [key, target] : live) target.copy_(*loaded.at(key));
  return absl::OkStatus();
}

}  // namespace strata::optim
