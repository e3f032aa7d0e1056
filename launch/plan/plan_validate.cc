// ValidatePlanInput (plan.h): the checks of a PlanInput, each error naming
// the strata_plan flag.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "launch/plan/plan.h"
#include "models/config.h"

namespace strata::launch {

absl::Status ValidatePlanInput(const PlanInput& in) {
  if (absl::Status s = models::ValidateConfig(in.model); !s.ok()) return s;
  if (in.checkpoint_every < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every must be >= 1, got ", in.checkpoint_every));
  }
  if (in.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world_size must be >= 1, got ", in.world_size));
  }
  const std::vector<std::string> strategies = {"single", "ddp", "zero1",
                                               "zero2", "fsdp"};
  if (std::find(strategies.begin(), strategies.end(), in.strategy) ==
      strategies.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy must be single, ddp, zero1, zero2 or fsdp, got '",
        in.strategy, "'"));
  }
  if (in.strategy == "single" && in.world_size != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy single needs --world_size 1, got ", in.world_size));
  }
  const std::vector<std::string> shardings = {"full_shard", "shard_grad_op",
                                              "no_shard", "hybrid_shard",
                                              "hybrid_shard_zero2"};
  if (std::find(shardings.begin(), shardings.end(), in.fsdp_sharding) ==
      shardings.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fsdp_sharding must be full_shard, shard_grad_op, "
                     "no_shard, hybrid_shard or hybrid_shard_zero2, got '",
                     in.fsdp_sharding, "'"));
  }
  if (in.strategy == "fsdp" && (in.fsdp_sharding == "hybrid_shard" ||
                                in.fsdp_sharding == "hybrid_shard_zero2")) {
    if (in.hybrid_shard_group_size < 1 ||
        in.world_size % in.hybrid_shard_group_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fsdp_hybrid_shard_group_size must divide --world_size (",
          in.world_size, "), got ", in.hybrid_shard_group_size));
    }
  }
  if (in.fsdp_reductions_in_flight < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fsdp_reductions_in_flight must be >= 0, got ",
                     in.fsdp_reductions_in_flight));
  }
  if (in.micro_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--micro_batch must be >= 1, got ", in.micro_batch));
  }
  if (in.seq_len < 0 || in.seq_len > in.model.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--seq_len must be in [1, ", in.model.seq_len,
        "] (the model's context; 0: all of it), got ", in.seq_len));
  }
  if (in.grad_accumulation < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grad_accumulation must be >= 1, got ", in.grad_accumulation));
  }
  if (in.precision != "fp32" && in.precision != "bf16" &&
      in.precision != "fp16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision must be fp32, bf16 or fp16, got '", in.precision, "'"));
  }
  if (in.bucket_bytes < 1 || in.first_bucket_bytes < 1) {
    return absl::InvalidArgumentError(
        "--bucket_bytes and --first_bucket_bytes must be >= 1");
  }
  if (in.torch_version < 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--torch_version must be the run's LibTorch as major * 100 + minor "
        "(113 for 1.13, 206 for 2.6), got ",
        in.torch_version));
  }
  return absl::OkStatus();
}

}  // namespace strata::launch
