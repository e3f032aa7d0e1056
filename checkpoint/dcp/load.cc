#include "checkpoint/dcp/load.h"

#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "checkpoint/dcp/reader.h"
#include "comm/exchange.h"

namespace strata::checkpoint::dcp {

absl::Status LoadModel(const std::string& dir, const TensorState& live,
                       comm::Group* group) {
  std::vector<std::string> names;
  for (const ShardedTensor& run : live.model) names.push_back(run.name);
  // First, as it is a collective: nothing before it can fail on one rank.
  STRATA_ASSIGN_OR_RETURN(const std::set<std::string> all_names,
                          comm::AllGatherNames(group, names));
  std::vector<at::Tensor> staged(live.model.size());
  const absl::Status status = [&]() -> absl::Status {
    STRATA_RETURN_IF_ERROR(CheckRuns(live.model));
    STRATA_ASSIGN_OR_RETURN(const std::unique_ptr<Reader> reader,
                            Reader::Open(dir));
    const Metadata& metadata = reader->metadata();
    // The {"model": ..., "optim": ...} layout when the model's keys are
    // under "model." (Strata's parameter names never start with it).
    bool nested = false;
    for (const auto& [key, info] : metadata.tensors) {
      if (absl::StartsWith(key, kModelPrefix)) nested = true;
    }
    for (const std::string& name : all_names) {
      if (absl::StartsWith(name, kModelPrefix)) nested = false;
    }
    const std::string prefix = nested ? kModelPrefix : "";
    std::vector<checkpoint::TensorInfo> saved;
    for (const auto& [key, info] : metadata.tensors) {
      if (!absl::StartsWith(key, prefix)) continue;
      saved.push_back({key.substr(prefix.size()), info.shape, info.dtype});
    }
    const std::string where =
        nested ? absl::StrCat(dir, " (the \"model\" dict of a DCP checkpoint)")
               : absl::StrCat(dir, " (a DCP checkpoint)");
    ReadOptions options;
    options.load_optimizer = false;
    STRATA_ASSIGN_OR_RETURN(
        const std::vector<int> match,
        MatchRuns(where, live.model, all_names, saved, options,
                  /*revise=*/false));
    for (size_t i = 0; i < live.model.size(); ++i) {
      const ShardedTensor& run = live.model[i];
      const checkpoint::TensorInfo& info = saved[match[i]];
      if (info.dtype != run.local.scalar_type()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": key '", prefix, run.name, "' is ",
            c10::toString(info.dtype), " in the checkpoint but ",
            c10::toString(run.local.scalar_type()),
            " in the model (save the state dict in the model's dtype)"));
      }
      staged[i] = at::empty({run.local.numel()}, run.local.options());
      STRATA_RETURN_IF_ERROR(
          reader->ReadRange(prefix + run.name, run.offset, staged[i]));
    }
    return absl::OkStatus();
  }();
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, status));
  return StatusFromCall(
      absl::StrCat("copying the weights of ", dir, " into the model"), [&] {
        at::NoGradGuard no_grad;
        for (size_t i = 0; i < live.model.size(); ++i) {
          live.model[i].local.view({-1}).copy_(staged[i]);
        }
      });
}

}  // namespace strata::checkpoint::dcp
