#include "checkpoint/model_weights.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/sharded_tensor.h"
#include "base/status.h"
#include "checkpoint/contents.h"
#include "checkpoint/dcp/load.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/full.h"
#include "checkpoint/local.h"
#include "checkpoint/metadata.h"
#include "checkpoint/sharded.h"
#include "comm/exchange.h"
#include "models/hf_config.h"
#include "models/hf_layout.h"

namespace strata::checkpoint {
namespace {

using Parameters = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace

TensorState WholeTensorState(const Parameters& parameters) {
  TensorState state;
  for (const auto& [name, tensor] : parameters) {
    state.model.push_back(
        ShardedTensor{name, tensor.sizes().vec(), 0, tensor.detach()});
  }
  return state;
}

absl::Status LoadHfState(const std::string& path,
                         const models::ModelConfig& config,
                         const TensorState& live, comm::Group* group) {
  models::NamedTensors converted;
  absl::Status status = [&]() -> absl::Status {
    STRATA_RETURN_IF_ERROR(models::CheckHfConfig(path, config));
    STRATA_ASSIGN_OR_RETURN(models::NamedTensors hf,
                            models::ReadHfWeights(path));
    STRATA_ASSIGN_OR_RETURN(converted, models::ImportHf(hf, config, path));
    std::map<std::string, const at::Tensor*> by_name;
    for (const auto& [name, tensor] : converted) by_name[name] = &tensor;
    for (const ShardedTensor& run : live.model) {
      auto it = by_name.find(run.name);
      if (it == by_name.end() ||
          it->second->sizes().vec() != run.global_shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": the model's '", run.name, "' ",
            it == by_name.end() ? "is not among the converted tensors"
                                : "has another shape"));
      }
    }
    return absl::OkStatus();
  }();
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, status));
  std::map<std::string, at::Tensor> by_name(converted.begin(), converted.end());
  return StatusFromCall(
      absl::StrCat("copying the weights of ", path, " into the model"), [&] {
        at::NoGradGuard no_grad;
        for (const ShardedTensor& run : live.model) {
          const at::Tensor flat = by_name.at(run.name).reshape({-1});
          run.local.view({-1}).copy_(
              flat.narrow(0, run.offset, run.local.numel()));
        }
      });
}

absl::Status LoadModelWeights(const std::string& path,
                              const models::ModelConfig& config,
                              const Parameters& parameters) {
  const TensorState live = WholeTensorState(parameters);
  if (models::IsHfCheckpoint(path)) {
    return LoadHfState(path, config, live, /*group=*/nullptr);
  }
  if (dcp::IsDcpCheckpoint(path)) {
    return dcp::LoadModel(path, live, /*group=*/nullptr);
  }
  ReadOptions read;
  read.load_optimizer = false;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(path));
    if (md.format() == kLocalFormat) {
      // A one-process model holds its tensors as the "single" strategy
      // does; a local checkpoint of another layout is refused by name.
      return LoadLocal(path, live, "single", /*load_optimizer=*/false,
                       /*group=*/nullptr)
          .status();
    }
    return LoadSharded(path, live, read, /*group=*/nullptr).status();
  }
  if (std::filesystem::is_regular_file(path, ec)) {
    FullOptions full;
    for (const auto& [name, tensor] : parameters) {
      full.parameter_order.push_back(name);
    }
    return LoadFull(path, live, read, /*group=*/nullptr, full).status();
  }
  return absl::NotFoundError(absl::StrCat(
      "'", path, "' is not a checkpoint: no such file or directory"));
}

}  // namespace strata::checkpoint
