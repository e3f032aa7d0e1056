// The planner (plan.h) for the train binary's options: what
// `train --plan_only` prints and the start-up / end-of-run "plan:" lines.
#ifndef STRATA_LAUNCH_PLAN_PLAN_TRAIN_H_
#define STRATA_LAUNCH_PLAN_PLAN_TRAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/config/train_options.h"
#include "launch/plan/plan.h"
#include "models/config.h"

namespace strata::launch {

// The plan input of a training run of `options` on `world_size` ranks: the
// model --model names (with --vocab_size, --loss_chunk_tokens), per-rank
// micro-batch and accumulation from --global_batch / --micro_batch,
// --strategy and its FSDP flags, --param_dtype (or fp16 with
// --precision=fp16), --precision=bf16 as autocast over those parameters,
// --checkpoint_units non-empty as every block checkpointed, or every
// --checkpoint_every-th.
// Errors name the flag (a --global_batch the world does not divide, ...).
// The device is this machine's (ResolveDevice: FSDP's `auto` schedule as it
// resolves here).
absl::StatusOr<PlanInput> PlanInputOf(const TrainOptions& options,
                                      int world_size);

// As above for a given model config (`options.model` is not read;
// --vocab_size and --loss_chunk_tokens are applied to it, as above) and
// for a run on CUDA devices (`cuda`) or on the CPU, wherever it will run
// (strata_plan plans other machines than its own).
absl::StatusOr<PlanInput> PlanInputOf(const TrainOptions& options,
                                      const models::ModelConfig& model,
                                      int world_size, bool cuda);

// "plan: predicted peak X MiB per rank (tensor storage; <strategy> on N
// ranks, micro-batch B x T, at <moment>)".
std::string PlanLine(const PlanInput& input, const MemoryPlan& plan);

// The end-of-run line: the prediction against the tracking allocator's
// measured peak (the largest over ranks of `tensor_peak_bytes`, each rank's
// peak of tensor storage during the steps, launch/observe/tensor_memory.h) and
// the largest peak resident set (`peak_resident_bytes`, VmHWM: also the
// process's non-tensor memory):
//   "plan: predicted peak 5.29 MiB, measured 5.29 MiB (tensor storage,
//   tracking allocator; largest rank 1 of 2), error -0.0 %; peak resident
//   set 402 MiB (largest rank 0)"
// With no tensor figures (not tracked) the measured part says so.
std::string PlanEndLine(const MemoryPlan& plan,
                        const std::vector<int64_t>& tensor_peak_bytes,
                        const std::vector<int64_t>& peak_resident_bytes);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_PLAN_PLAN_TRAIN_H_
