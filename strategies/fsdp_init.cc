#include "strategies/fsdp_init.h"

#include <ATen/ops/zeros.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/shape.h"
#include "base/status.h"
#include "strategies/replicas.h"

namespace strata::strategies {
namespace {

// The initial value of unit.entries[entry]: the parameter's own value, or
// for a meta parameter the model's InitialParameter.
absl::StatusOr<at::Tensor> InitialValue(const FlatUnitPlan& unit,
                                        const std::vector<at::Tensor>& params,
                                        size_t entry,
                                        const ShardSource& source) {
  const FlatUnitPlan::Entry& e = unit.entries[entry];
  const at::Tensor& param = params[entry];
  if (!param.is_meta()) return param.detach();
  const bool user = source.param_init_fn != nullptr && *source.param_init_fn;
  absl::StatusOr<at::Tensor> initial =
      user ? (*source.param_init_fn)(e.name, e.shape)
           : source.model->InitialParameter(e.name, source.init_seed);
  const std::string what =
      user ? "FsdpOptions::param_init_fn" : "the model's InitialParameter";
  if (!initial.ok()) {
    return Annotate(initial.status(), absl::StrCat("fsdp: materialising ",
                                                   e.name, " with ", what));
  }
  if (!initial->defined() || initial->sizes().vec() != e.shape ||
      !initial->is_floating_point()) {
    const std::string got =
        !initial->defined()
            ? "an undefined tensor"
            : absl::StrCat(c10::toString(initial->scalar_type()), " of shape ",
                           c10::str(initial->sizes()));
    return (user ? absl::InvalidArgumentError
                 : absl::InternalError)(absl::StrCat(
        "fsdp: ", what, " returned ", got, " for ", e.name,
        ", expected a floating-point tensor of shape ", ShapeString(e.shape)));
  }
  return *std::move(initial);
}

}  // namespace

PlanInput PlanInputOf(const models::UnitModel& model, std::vector<int> wrapped,
                      int shard_size) {
  PlanInput input;
  for (const auto& item : model.named_parameters()) {
    input.parameters.push_back(
        {item.key(), item.value().sizes().vec(), item.value().requires_grad()});
  }
  for (const models::UnitInfo& unit : model.units()) {
    input.units.push_back({unit.name, unit.parameters});
  }
  input.wrapped = std::move(wrapped);
  for (const auto& [name, readers] : model.SharedParameters()) {
    input.shared.insert(name);
  }
  input.shard_size = shard_size;
  return input;
}

absl::Status CheckSamePlanOnAllRanks(comm::Group& group, const FsdpPlan& plan) {
  std::vector<NamedShape> layout;
  for (const FlatUnitPlan& unit : plan.units) {
    layout.push_back({unit.name, {unit.padded_numel}});
    for (const FlatUnitPlan::Entry& e : unit.entries) {
      layout.push_back(
          {absl::StrCat(unit.name, "/", e.name), {e.offset, e.numel}});
    }
  }
  SameOnAllRanksWording wording;
  wording.differ = "ranks cut the model into different flat parameters";
  wording.items = "flat-parameter entries";
  wording.item = "flat-parameter entry";
  wording.order = "in flat-parameter order";
  wording.remedy = "every rank must use the same wrap policy and model";
  return Annotate(CheckSameOnAllRanks(group, layout, wording),
                  "fsdp: exchanging the flat-parameter layout");
}

absl::Status FillMasterShard(const FlatUnitPlan& unit,
                             const std::vector<at::Tensor>& params,
                             int shard_rank, const ShardSource& source,
                             const at::Tensor& master) {
  const int64_t shard_begin = unit.shard_begin(shard_rank);
  const int64_t shard_end = shard_begin + unit.shard_numel;
  if (source.deferred) {
    // Each parameter's full value exists only while its overlap with this
    // rank's shard is copied: peak = the shards + one parameter.
    for (size_t i = 0; i < unit.entries.size(); ++i) {
      const FlatUnitPlan::Entry& e = unit.entries[i];
      STRATA_ASSIGN_OR_RETURN(at::Tensor value,
                              InitialValue(unit, params, i, source));
      const int64_t begin = std::max(e.offset, shard_begin);
      const int64_t end = std::min(e.offset + e.numel, shard_end);
      if (begin < end) {
        master.narrow(0, begin - shard_begin, end - begin)
            .copy_(value.reshape(-1).narrow(0, begin - e.offset, end - begin));
      }
    }
    return absl::OkStatus();
  }
  // sync_module_states: every rank starts from rank 0's values.
  at::Tensor staging = at::zeros(
      {unit.padded_numel},
      at::TensorOptions().dtype(at::kFloat).device(source.staging_device));
  for (size_t i = 0; i < unit.entries.size(); ++i) {
    const FlatUnitPlan::Entry& e = unit.entries[i];
    staging.narrow(0, e.offset, e.numel).copy_(params[i].detach().reshape(-1));
  }
  if (source.world != nullptr && source.world->size() > 1) {
    STRATA_RETURN_IF_ERROR(Annotate(
        source.world->Broadcast(staging, 0),
        absl::StrCat("fsdp: broadcasting rank 0's parameters of ", unit.name)));
  }
  master.copy_(
      staging.narrow(0, shard_begin, unit.shard_numel).to(master.device()));
  return absl::OkStatus();
}

absl::Status CastAndBroadcastBuffers(models::UnitModel& model,
                                     at::ScalarType dtype, comm::Group* world) {
  for (const auto& item : model.named_buffers()) {
    at::Tensor buffer = item.value();
    if (!buffer.is_floating_point()) continue;
    if (buffer.scalar_type() != dtype) buffer.set_data(buffer.to(dtype));
    if (world != nullptr && world->size() > 1) {
      at::Tensor b = buffer.contiguous();
      STRATA_RETURN_IF_ERROR(
          Annotate(world->Broadcast(b, 0),
                   absl::StrCat("fsdp: broadcasting buffer ", item.key())));
      buffer.set_data(b);
    }
  }
  return absl::OkStatus();
}

}  // namespace strata::strategies
