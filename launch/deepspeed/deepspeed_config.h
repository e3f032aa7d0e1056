// DeepSpeed's JSON configuration (the ds_config.json DeepSpeed, and
// mmengine's DeepSpeedStrategy, are configured with), read against a
// declared schema into a typed struct. Pure: no flags, no files, no
// environment and no LibTorch; launch/deepspeed/deepspeed_options.h maps the
// result onto TrainOptions.
//
// The schema is one table (DeepSpeedKeySchema() in deepspeed_schema.h):
// every key Strata knows, by its full path, with its JSON type, its range or
// accepted values, DeepSpeed's default and whether Strata implements it.
// Errors name the key's path and what was expected:
//
//   ds_config.json: zero_optimization.stage: 4 is not one of 0, 1, 2, 3
//   ds_config.json: optimizer.params.betas: expected an array of 2 numbers,
//     got "x"
//   ds_config.json: aio: Strata does not implement DeepSpeed's asynchronous
//     I/O (NVMe offload); remove the section
//   ds_config.json:3:18: JSON syntax error: ... (line:column of the byte)
//
// An unknown key, a value of the wrong type or out of range, a key given
// twice, a known DeepSpeed key Strata does not implement, or a value of it
// other than the one matching Strata's behaviour is an error; nothing is
// silently ignored. Decisions that need more than one key (per-optimizer and
// per-scheduler parameters) are made here too; what a value means for
// Strata's strategies (the ZeRO stage, offload, buckets) is the mapping's.
#ifndef STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_CONFIG_H_
#define STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_CONFIG_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launch/deepspeed/deepspeed_schema.h"

namespace strata::launch {

// Parses `json` (the text of the file `source`, which messages name) against
// the schema. InvalidArgument on a syntax error ("<source>:<line>:<column>:
// ..."), on a root that is not an object, and on any key or value the schema
// rejects ("<source>: <key path>: ...").
absl::StatusOr<DeepSpeedConfig> ParseDeepSpeedConfig(absl::string_view json,
                                                     absl::string_view source);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_CONFIG_H_
