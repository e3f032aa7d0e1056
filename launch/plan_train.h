// The planner (plan.h) for the train binary's options: what
// `train --plan_only` prints and the start-up / end-of-run "plan:" lines.
#ifndef STRATA_LAUNCH_PLAN_TRAIN_H_
#define STRATA_LAUNCH_PLAN_TRAIN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "launch/plan.h"
#include "launch/train_options.h"

namespace strata::launch {

// The plan input of a training run of `options` on `world_size` ranks: the
// model --model names (with --vocab_size, --loss_chunk_tokens), per-rank
// micro-batch and accumulation from --global_batch / --micro_batch,
// --strategy and its FSDP flags, --param_dtype or --precision=fp16 (bf16
// and fp16 both plan 2 bytes an element; --precision=bf16, CPU autocast
// over fp32 parameters, is planned as fp32, which over-states its
// activations), --checkpoint_units non-empty as every block checkpointed.
// Errors name the flag (a --global_batch the world does not divide, ...).
absl::StatusOr<PlanInput> PlanInputOf(const TrainOptions& options,
                                      int world_size);

// "plan: predicted peak X MiB per rank (tensor storage; <strategy> on N
// ranks, micro-batch B x T, at <moment>)".
std::string PlanLine(const PlanInput& input, const MemoryPlan& plan);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_PLAN_TRAIN_H_
