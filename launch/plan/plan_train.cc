#include "launch/plan/plan_train.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/torch_compat.h"
#include "launch/config/flag_error.h"
#include "launch/config/option_kinds.h"
#include "launch/config/train_options.h"
#include "launch/plan/plan.h"
#include "strategies/options.h"

namespace strata::launch {

absl::StatusOr<PlanInput> PlanInputOf(const TrainOptions& o, int world_size) {
  absl::StatusOr<models::ModelConfig> model = ModelConfigOf(o.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<at::Device> device = ResolveDevice(o);
  if (!device.ok()) return device.status();
  return PlanInputOf(o, *model, world_size, device->is_cuda());
}

absl::StatusOr<PlanInput> PlanInputOf(const TrainOptions& o,
                                      const models::ModelConfig& model,
                                      int world_size, bool cuda) {
  if (world_size < 1 || o.global_batch % world_size != 0) {
    return FlagError("global_batch",
                     absl::StrFormat("%d sequences do not split evenly over "
                                     "%d ranks",
                                     o.global_batch, world_size));
  }
  const int64_t local_batch = o.global_batch / world_size;
  const int64_t micro = o.micro_batch == 0 ? local_batch : o.micro_batch;
  if (micro < 1 || local_batch % micro != 0) {
    return FlagError(
        "micro_batch",
        absl::StrFormat("must divide the per-rank batch %d, got %d",
                        local_batch, micro));
  }
  PlanInput in;
  in.model = model;
  if (o.vocab_size > 0) in.model.vocab_size = o.vocab_size;
  in.model.loss_chunk_tokens = o.loss_chunk_tokens;
  in.world_size = world_size;
  const strategies::StrategyOptions& strategy = o.strategy;
  in.strategy = strategies::StrategyKindName(strategy.kind);
  in.fsdp_sharding = strategies::ShardingStrategyName(strategy.fsdp.sharding);
  in.hybrid_shard_group_size = strategy.fsdp.hybrid_shard_group_size;
  // FSDP's schedule as the strategy resolves it for the run's device.
  const strategies::FsdpSchedule schedule =
      strategies::ResolveFsdpSchedule(strategy.fsdp, cuda);
  in.fsdp_backward_prefetch =
      schedule.backward_prefetch == strategies::BackwardPrefetch::kBackwardPre;
  in.fsdp_reductions_in_flight = schedule.reductions_in_flight;
  in.fsdp_reduce_scatter_every_micro_step =
      strategy.fsdp.reduce_scatter_every_micro_step;
  in.micro_batch = micro;
  in.seq_len = o.seq_len;
  in.grad_accumulation = local_batch / micro;
  // The parameters' dtype: --precision=fp16 keeps the model in fp16;
  // otherwise --param_dtype. --precision=bf16 is autocast over them.
  in.precision = o.precision == Precision::kFp16
                     ? "fp16"
                     : strategies::MixedPrecisionDtypeName(
                           strategy.mixed_precision.param_dtype);
  in.autocast = o.precision == Precision::kBf16;
  in.activation_checkpointing = !strategy.checkpoint_units.empty();
  in.checkpoint_every = strategy.checkpoint_every;
  in.cpu_offload = strategy.fsdp.cpu_offload;
  in.bucket_bytes = strategy.bucket_bytes;
  in.first_bucket_bytes = strategy.first_bucket_bytes;
  in.torch_version = torch_compat::TorchVersion();  // This binary's LibTorch.
  if (absl::Status s = ValidatePlanInput(in); !s.ok()) return s;
  return in;
}

std::string PlanLine(const PlanInput& in, const MemoryPlan& plan) {
  return absl::StrFormat(
      "plan: predicted peak %.1f MiB per rank (tensor storage; %s on %d "
      "ranks, micro-batch %d x %d, at %s)",
      plan.peak_bytes / 1048576.0, in.strategy, in.world_size, in.micro_batch,
      in.seq_len > 0 ? in.seq_len : in.model.seq_len, plan.peak_moment);
}

namespace {

// The index of the largest value (the first of equals); `v` non-empty.
size_t ArgMax(const std::vector<int64_t>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

}  // namespace

std::string PlanEndLine(const MemoryPlan& plan,
                        const std::vector<int64_t>& tensor_peak_bytes,
                        const std::vector<int64_t>& peak_resident_bytes) {
  constexpr double kMiB = 1048576.0;
  std::string line = absl::StrFormat("plan: predicted peak %.2f MiB, ",
                                     plan.peak_bytes / kMiB);
  if (tensor_peak_bytes.empty()) {
    absl::StrAppend(&line,
                    "measured: not tracked (tensor storage needs the tracking "
                    "allocator, train --track_tensor_memory, on the CPU)");
  } else {
    const size_t rank = ArgMax(tensor_peak_bytes);
    const int64_t measured = tensor_peak_bytes[rank];
    absl::StrAppendFormat(
        &line,
        "measured %.2f MiB (tensor storage, tracking allocator; largest rank "
        "%d of %d), error %+.1f %%",
        measured / kMiB, rank, tensor_peak_bytes.size(),
        measured > 0 ? 100.0 * (plan.peak_bytes - measured) / measured : 0.0);
  }
  if (!peak_resident_bytes.empty()) {
    const size_t rank = ArgMax(peak_resident_bytes);
    absl::StrAppendFormat(&line, "; peak resident set %d MiB (largest rank %d)",
                          peak_resident_bytes[rank] >> 20, rank);
  }
  return line;
}

}  // namespace strata::launch
