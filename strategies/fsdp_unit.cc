#include "strategies/fsdp_unit.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <glog/logging.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "models/init.h"  // ReplaceParameterData

namespace strata::strategies {

FlatUnit::FlatUnit(FlatUnitPlan plan, std::vector<at::Tensor> params)
    : FlatUnitPlan(std::move(plan)), params(std::move(params)) {
  CHECK_EQ(this->params.size(), entries.size());
}

void FlatUnit::CreateViews(const at::Tensor& master,
                           const at::Tensor& grad_shard, bool alias_master,
                           bool alias_grad_shard, at::ScalarType dtype,
                           at::Device device, UnitBufferPool* pool) {
  CHECK(alias_master || !alias_grad_shard);
  // The root is released for long stretches (all of the blocks' forward or
  // backward): pooled, its memory would sit beside their peak. Not pooled.
  if (root) pool = nullptr;
  if (alias_master) {
    full = master;
    full_aliases_master = true;
  } else {
    full = at::empty({padded_numel},
                     at::TensorOptions().dtype(dtype).device(device));
    full_storage = ReleasableBuffer(full, pool);
  }
  if (alias_grad_shard) {
    full_grad = grad_shard;
    grad_aliases_shard = true;
  } else {
    // Released below; AllocateGrads zeroes it when it is needed.
    full_grad = at::empty_like(full);
    grad_storage = ReleasableBuffer(full_grad, pool);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    models::ReplaceParameterData(
        params[i], full.narrow(0, e.offset, e.numel).view(e.shape));
    if (e.requires_grad) {
      params[i].mutable_grad() =
          full_grad.narrow(0, e.offset, e.numel).view(e.shape);
    }
  }
  grads_allocated = grad_aliases_shard;
  grad_storage.Release();
  gathered = full_aliases_master;
}

void FlatUnit::ReleaseFull() {
  full_storage.Release();
  gathered = false;
}

void FlatUnit::AllocateGrads() {
  if (grads_allocated) return;
  grad_storage.AllocateZeroed();
  grads_allocated = true;
}

void FlatUnit::ReleaseGrads() {
  if (grad_aliases_shard) return;
  grad_storage.Release();
  grads_allocated = false;
  grad_accum = at::Tensor();
}

void FlatUnit::AccumulateGradsInFp32() {
  if (!grad_accum.defined()) {
    grad_accum = full_grad.to(at::kFloat);
  } else {
    grad_accum.add_(full_grad);
  }
  full_grad.zero_();
}

int64_t FlatUnit::held_gradient_bytes() const {
  return grad_storage.held_bytes() +
         (grad_accum.defined() ? grad_accum.nbytes() : 0);
}

int64_t FlatUnit::held_staging_bytes() const {
  return gather_input.defined() && gather_input.scalar_type() != at::kFloat
             ? gather_input.nbytes()
             : 0;
}

void AppendShardRuns(const FlatUnit& unit, int shard_rank,
                     const at::Tensor& flat, const std::string& suffix,
                     std::vector<ShardedTensor>* out) {
  unit.ForEachRun(
      shard_rank, flat,
      [&](const FlatUnitPlan::Entry& e, int64_t offset, at::Tensor run) {
        out->push_back(
            {suffix.empty() ? e.name : absl::StrCat(e.name, ".", suffix),
             e.shape, offset, std::move(run)});
      });
}

}  // namespace strata::strategies
