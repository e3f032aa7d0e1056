// A DeepSpeed config (launch/deepspeed/deepspeed_config.h) as TrainOptions:
// what `train --deepspeed_config=ds_config.json` runs, the way mmengine's
// DeepSpeedStrategy hands the file to DeepSpeed. README.md ("DeepSpeed
// configs") has the whole mapping as a table; in short:
//
//  - the batch triple with DeepSpeed's rule (batch = micro x accumulation x
//    world) -> --global_batch, --micro_batch (per rank, as DeepSpeed's);
//  - zero_optimization.stage 0/1/2/3 -> --strategy single (one process) or
//    ddp / zero1 / zero2 / fsdp, with the knobs that have a Strata
//    counterpart (buckets, FSDP prefetch, wrapping, overlap, CPU offload,
//    MiCS as hybrid sharding);
//  - bf16 -> --param_dtype/--reduce_dtype/--buffer_dtype bf16 (bf16
//    parameters, fp32 masters and optimizer state); fp16 -> the same in
//    fp16 with --precision=fp16 and the --loss_scale flags;
//    gradient_clipping,
//    optimizer (Adam/AdamW/SGD with DeepSpeed's adam_w_mode meaning),
//    scheduler (WarmupLR, WarmupDecayLR, WarmupCosineLR: Strata's schedules
//    of the same names, exact), activation_checkpointing (the model's
//    blocks), steps_per_print, wall_clock_breakdown.
//
// Every setting the config governs takes the file's value or DeepSpeed's
// default; optimizer and scheduler, which DeepSpeed leaves to the client when
// absent, keep the flags' values then. A flag given explicitly wins over the
// config, and each such override is logged. A DeepSpeed knob without a
// Strata counterpart is accepted only at the value that describes what
// Strata does (else an error saying what Strata does); one DeepSpeed itself
// ignores at the configured stage, or one that only sizes DeepSpeed's own
// scheduling of the same arithmetic, is accepted and logged as having no
// effect. Nothing is dropped silently.
#ifndef STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_OPTIONS_H_
#define STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_OPTIONS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launch/config/train_options.h"
#include "launch/deepspeed/deepspeed_config.h"

namespace strata::launch {

// Applies `config` to `*options` for a world of `world_size` ranks.
// `explicit_flags` names the flags given on the command line (without
// "--"), which keep their values in `*options`. Appends to `*log_lines` what
// was set, each override ("--lr=0.001 overrides optimizer.params.lr=0.0003
// from ds_config.json") and each key accepted without effect.
// InvalidArgument naming the key (and the file) for what Strata cannot run:
// batch sizes that disagree with the world size, fp16 together with bf16,
// offload outside stage 3, knobs at values Strata does not implement.
absl::Status ApplyDeepSpeedConfig(const DeepSpeedConfig& config, int world_size,
                                  const std::set<std::string>& explicit_flags,
                                  TrainOptions* options,
                                  std::vector<std::string>* log_lines);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_OPTIONS_H_
