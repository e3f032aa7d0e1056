// FsdpStrategy's state: memory figures, the sharded model and optimizer
// state, the full state, and summoning full parameters (fsdp.h). Part of the
// fsdp library; split from fsdp.cc to keep each file readable.
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <glog/logging.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "strategies/fsdp.h"
#include "strategies/fsdp_unit.h"

namespace strata::strategies {

// --- State -----------------------------------------------------------------

std::vector<ShardedTensor> FsdpStrategy::ModelState() const {
  std::vector<ShardedTensor> out;
  for (const auto& unit : flat_units_) {
    AppendShardRuns(*unit, shard_rank_, master_, "", &out);
  }
  return out;
}

std::vector<ShardedTensor> FsdpStrategy::OptimizerState() const {
  std::vector<ShardedTensor> out;
  optim::NamedTensors state = optimizer_->State();
  for (const auto& unit : flat_units_) {
    for (const auto& [key, tensor] : state) {
      if (key != "step") AppendShardRuns(*unit, shard_rank_, tensor, key, &out);
    }
  }
  for (const auto& [key, tensor] : state) {
    if (key == "step") out.push_back({"step", {}, 0, tensor});
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
FsdpStrategy::FullModelState() {
  if (in_micro_batch_) {
    return absl::FailedPreconditionError(
        "fsdp: FullModelState during a micro-batch");
  }
  std::map<std::string, at::Tensor> values;
  for (auto& unit : flat_units_) {
    at::Tensor master =
        master_.narrow(0, unit->master_offset, unit->shard_numel);
    at::Tensor full;
    if (shard_size_ > 1) {
      full = at::empty({unit->padded_numel}, at::kFloat);
      STRATA_RETURN_IF_ERROR(Annotate(
          shard_group_->AllGather(master, full),
          absl::StrCat("fsdp: gathering the full state of unit ", unit->name)));
    } else {
      full = master;
    }
    for (const auto& e : unit->entries) {
      values[e.name] = full.narrow(0, e.offset, e.numel).view(e.shape).clone();
    }
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : model().named_parameters()) {
    out.emplace_back(item.key(), values.at(item.key()));
  }
  return out;
}

absl::Status FsdpStrategy::SummonFullParams() {
  if (in_micro_batch_ || last_micro_batch_done()) {
    return absl::FailedPreconditionError(
        "fsdp: SummonFullParams between a step's micro-batches; call it "
        "before the first micro-batch or after Step()");
  }
  if (summoned_) return absl::OkStatus();
  for (auto& unit : flat_units_) Gather(*unit);
  summoned_ = true;
  return latched_error();
}

absl::Status FsdpStrategy::ReleaseFullParams(bool writeback) {
  if (!summoned_) {
    return absl::FailedPreconditionError(
        "fsdp: ReleaseFullParams without SummonFullParams");
  }
  if (writeback && param_dtype() != at::kFloat) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fsdp: ReleaseFullParams(writeback = true) needs fp32 parameters; the "
        "model computes in ",
        c10::toString(param_dtype()),
        " and its values are rounded copies of the fp32 masters"));
  }
  summoned_ = false;
  for (auto& unit : flat_units_) {
    if (writeback && !unit->full_aliases_master) {
      at::NoGradGuard no_grad;
      master_.narrow(0, unit->master_offset, unit->shard_numel)
          .copy_(unit->full.narrow(0, shard_rank_ * unit->shard_numel,
                                   unit->shard_numel));
    }
    Reshard(*unit);  // Not a root that stays gathered.
  }
  return latched_error();
}

std::vector<FsdpStrategy::FlatUnitInfo> FsdpStrategy::flat_units() const {
  std::vector<FlatUnitInfo> out;
  for (const auto& unit : flat_units_) {
    std::vector<std::string> names;
    for (const auto& e : unit->entries) names.push_back(e.name);
    out.push_back({unit->name, unit->root, std::move(names), unit->numel,
                   unit->padded_numel});
  }
  return out;
}

}  // namespace strata::strategies
