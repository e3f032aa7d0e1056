// A model's weights from any checkpoint Strata reads, without a strategy:
// what a one-process user of a model (strata_generate, an evaluation tool)
// loads. The Strategy-level API (checkpoint/strategy/checkpoint.h) loads a
// training run's whole state under any strategy and world size; this loads
// the model section alone into a model's own parameter tensors.
#ifndef STRATA_CHECKPOINT_MODEL_WEIGHTS_H_
#define STRATA_CHECKPOINT_MODEL_WEIGHTS_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/contents.h"
#include "comm/group.h"
#include "models/config.h"

namespace strata::checkpoint {

// `parameters` (whole tensors) as one process's model runs, each aliasing
// its tensor: what the formats save and load for a one-process model.
TensorState WholeTensorState(
    const std::vector<std::pair<std::string, at::Tensor>>& parameters);

// Hugging Face weights (`path`: a .safetensors file or a directory, single
// or sharded; models/hf_layout.h) converted for `config` (the model's
// config; a config.json beside the weights must describe the same
// architecture) and copied into the model runs of `live` (each rank its
// own runs). A collective over `group` (null: one process): every run is
// checked against the converted tensors and the result agreed across ranks
// before the first is written, so an error leaves every rank's state as it
// was.
absl::Status LoadHfState(const std::string& path,
                         const models::ModelConfig& config,
                         const TensorState& live, comm::Group* group);

// Loads into `parameters` — a model's named parameters, whole tensors in
// the model's registration order; the model is `config` — the model
// weights at `path`, strictly: a Strata full checkpoint or a PyTorch state
// dict file, a sharded checkpoint directory, a local checkpoint directory
// written by one process, a PyTorch torch.distributed.checkpoint (DCP)
// directory (checkpoint/dcp/load.h: the model's keys at the top level or
// under "model."), or Hugging Face weights (models::IsHfCheckpoint)
// converted for `config`. The optimizer state and the rest of the
// checkpoint are not read. One process; may be called from any thread that
// owns the parameters. Errors name the path and the key (missing,
// unexpected, another shape), a corrupted tensor, or a path that is no
// checkpoint; after an error every parameter holds what it held before.
absl::Status LoadModelWeights(
    const std::string& path, const models::ModelConfig& config,
    const std::vector<std::pair<std::string, at::Tensor>>& parameters);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_MODEL_WEIGHTS_H_
