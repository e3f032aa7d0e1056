#include "checkpoint/dcp/load.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/escape.h"
#include "base/status.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/dcp/reader.h"
#include "comm/exchange.h"

namespace strata::checkpoint::dcp {
namespace {

constexpr char kStepSuffix[] = ".step";
constexpr char kStrataOptimizer[] = "strata.optim.";

std::vector<std::string> Names(const std::vector<ShardedTensor>& runs) {
  std::vector<std::string> names;
  for (const ShardedTensor& run : runs) names.push_back(run.name);
  return names;
}

// A section of the checkpoint under Strata's names: infos[i] is read from
// DCP key keys[i].
struct Section {
  std::vector<TensorInfo> infos;
  std::vector<std::string> keys;
  std::string where;
  std::string live;  // What the runs are: "model" or "optimizer".
};

// The model's keys: under "model." (the {"model": ..., "optim": ...}
// layout) when some are and no live name starts with it (Strata's
// parameter names never do), else at the top level.
Section ModelSection(const std::string& dir, const Metadata& metadata,
                     const std::set<std::string>& all_names) {
  bool nested = false;
  for (const auto& [key, info] : metadata.tensors) {
    if (absl::StartsWith(key, kModelPrefix)) nested = true;
  }
  for (const std::string& name : all_names) {
    if (absl::StartsWith(name, kModelPrefix)) nested = false;
  }
  const std::string prefix = nested ? kModelPrefix : "";
  Section section;
  for (const auto& [key, info] : metadata.tensors) {
    if (!absl::StartsWith(key, prefix)) continue;
    if (nested || (!absl::StartsWith(key, "optim.") &&
                   !absl::StartsWith(key, kStrataPrefix))) {
      section.infos.push_back(
          {key.substr(prefix.size()), info.shape, info.dtype});
      section.keys.push_back(key);
    }
  }
  section.live = "model";
  section.where =
      nested ? absl::StrCat(dir, " (the \"model\" dict of a DCP checkpoint)")
             : absl::StrCat(dir, " (a DCP checkpoint)");
  return section;
}

bool IsStepKey(const std::string& key, const SavedTensor& info) {
  return absl::StartsWith(key, kOptimizerStatePrefix) &&
         absl::EndsWith(key, kStepSuffix) && info.shape.empty();
}

// The optimizer's keys under Strata's names; the steps are one "step".
Section OptimizerSection(const std::string& dir, const Metadata& metadata,
                         std::vector<std::string>* step_keys) {
  Section section;
  for (const auto& [key, info] : metadata.tensors) {
    if (IsStepKey(key, info)) {
      step_keys->push_back(key);
    } else if (absl::StartsWith(key, kOptimizerStatePrefix)) {
      section.infos.push_back(
          {key.substr(std::string(kOptimizerStatePrefix).size()), info.shape,
           info.dtype});
      section.keys.push_back(key);
    } else if (absl::StartsWith(key, kStrataOptimizer)) {
      section.infos.push_back({key.substr(std::string(kStrataOptimizer).size()),
                               info.shape, info.dtype});
      section.keys.push_back(key);
    }
  }
  if (!step_keys->empty()) {
    section.infos.push_back({"step", {}, at::kLong});
    section.keys.emplace_back();
  }
  section.live = "optimizer";
  section.where = absl::StrCat(dir, " (the optimizer of a DCP checkpoint)");
  return section;
}

// The one step every "optim.state.<param>.step" holds.
absl::StatusOr<int64_t> ReadStep(const Reader& reader,
                                 const std::vector<std::string>& keys) {
  int64_t step = -1;
  for (const std::string& key : keys) {
    STRATA_ASSIGN_OR_RETURN(const at::Tensor t, reader.ReadTensor(key));
    const double value = t.to(at::kDouble).item<double>();
    if (!(value >= 0) || value != std::floor(value) || value > 9.0e15) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader.dir(), ": '", EscapeBytes(key), "' is ", value,
                       ", not an optimizer step (a whole number >= 0)"));
    }
    if (step >= 0 && static_cast<int64_t>(value) != step) {
      return absl::InvalidArgumentError(absl::StrCat(
          reader.dir(), ": the parameters' optimizer steps differ ('",
          EscapeBytes(keys[0]), "' is ", step, ", '", EscapeBytes(key), "' ",
          value, "); Strata keeps one step for all parameters"));
    }
    step = static_cast<int64_t>(value);
  }
  return step;
}

// ReadStep of `keys`, or nullopt when there are none.
absl::StatusOr<std::optional<int64_t>> ReadSteps(
    const Reader& reader, const std::vector<std::string>& keys) {
  if (keys.empty()) return std::optional<int64_t>();
  STRATA_ASSIGN_OR_RETURN(const int64_t step, ReadStep(reader, keys));
  return std::optional<int64_t>(step);
}

// Strata's contents ("strata.*" values), or what a PyTorch checkpoint
// shows in their place.
// `step`: the parameters' one optimizer step (ReadStep), if they have one.
absl::StatusOr<Contents> ReadContents(const Reader& reader,
                                      std::optional<int64_t> step) {
  Contents contents;
  const std::string meta = absl::StrCat(kStrataPrefix, "meta.");
  const std::string scheduler = absl::StrCat(kStrataPrefix, "param_scheduler.");
  const std::string extra = absl::StrCat(kStrataPrefix, "extra.");
  bool has_meta = false;
  for (const auto& [key, range] : reader.metadata().values) {
    const std::string where =
        absl::StrCat(reader.dir(), ": '", EscapeBytes(key), "'");
    if (!absl::StartsWith(key, kStrataPrefix)) continue;
    STRATA_ASSIGN_OR_RETURN(const c10::IValue value, reader.ReadValue(key));
    const std::optional<StateValue> value_or = ValueFromIValue(value);
    if (!value_or.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " holds a ", value.tagKind(),
                       ", expected an int, a float, a str or a uint8 vector"));
    }
    const StateValue& v = *value_or;
    if (absl::StartsWith(key, scheduler)) {
      contents.param_scheduler.emplace_back(key.substr(scheduler.size()), v);
    } else if (absl::StartsWith(key, extra)) {
      contents.extra.emplace_back(key.substr(extra.size()), v);
    } else if (absl::StartsWith(key, meta)) {
      has_meta = true;
      const std::string field = key.substr(meta.size());
      Meta& m = contents.meta;
      const int64_t* i = std::get_if<int64_t>(&v);
      const std::string* s = std::get_if<std::string>(&v);
      const bool is_int =
          field == "step" || field == "seed" || field == "world_size";
      if (is_int ? i == nullptr : s == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " is not ", is_int ? "an int" : "a str"));
      }
      if (field == "step") m.step = *i;
      if (field == "seed") m.seed = static_cast<uint64_t>(*i);
      if (field == "world_size") m.world_size = static_cast<int>(*i);
      if (field == "time") m.time = *s;
      if (field == "strata_version") m.strata_version = *s;
      if (field == "git_hash") m.git_hash = *s;
      if (field == "strategy") m.strategy = *s;
      if (field == "model_config") m.model_config = *s;
      if (field == "optimizer") m.optimizer = *s;
    }
  }
  if (has_meta) return contents;
  // Written by PyTorch: the optimizer's step, and the class its first param
  // group shows (torch_optimizer.h).
  if (step.has_value()) contents.meta.step = *step;
  const std::string momentum = absl::StrCat(kParamGroupsPrefix, "0.momentum");
  if (reader.metadata().values.count(momentum) > 0) {
    STRATA_ASSIGN_OR_RETURN(const c10::IValue m, reader.ReadValue(momentum));
    contents.meta.optimizer =
        m.isDouble() && m.toDouble() != 0 ? "sgd_momentum" : "sgd";
  } else if (step.has_value()) {
    contents.meta.optimizer = kAdamOrAdamW;
  }
  return contents;
}

// Reads every run of `runs` that `match` maps into fresh tensors.
absl::Status Stage(const Reader& reader, const Section& section,
                   const std::vector<ShardedTensor>& runs,
                   const std::vector<int>& match, int64_t step,
                   std::vector<at::Tensor>& staged) {
  staged.assign(runs.size(), at::Tensor());
  for (size_t i = 0; i < runs.size(); ++i) {
    if (match[i] < 0) continue;
    const ShardedTensor& run = runs[i];
    const TensorInfo& info = section.infos[match[i]];
    const std::string& key = section.keys[match[i]];
    if (key.empty()) {  // The step, from the parameters' steps.
      if (run.local.scalar_type() != at::kLong || run.local.numel() != 1) {
        return absl::InternalError(
            absl::StrCat("the live optimizer's step is not an int64 scalar"));
      }
      staged[i] = at::full({1}, step, at::kLong);
      continue;
    }
    if (info.dtype != run.local.scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          section.where, ": key '", EscapeBytes(key), "' is ",
          c10::toString(info.dtype), " in the checkpoint but ",
          c10::toString(run.local.scalar_type()), " in the ", section.live,
          " (save the state dict in the ", section.live, "'s dtype)"));
    }
    staged[i] = at::empty({run.local.numel()}, run.local.options());
    STRATA_RETURN_IF_ERROR(reader.ReadRange(key, run.offset, staged[i]));
  }
  return absl::OkStatus();
}

// Every tensor of `section` whole (offset 0), into `runs` (empty).
absl::Status ReadWhole(const Reader& reader, const Section& section,
                       int64_t step, std::vector<ShardedTensor>& runs) {
  std::vector<int> match;
  for (const TensorInfo& info : section.infos) {
    match.push_back(static_cast<int>(runs.size()));
    runs.push_back(ShardedTensor{info.name, info.shape, 0,
                                 at::empty(info.shape, info.dtype)});
  }
  std::vector<at::Tensor> staged;
  STRATA_RETURN_IF_ERROR(Stage(reader, section, runs, match, step, staged));
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].local = staged[i].view(runs[i].global_shape);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Contents> LoadDcp(const std::string& dir,
                                 const TensorState& live,
                                 const ReadOptions& options,
                                 const std::string& optimizer,
                                 comm::Group* group) {
  // First, as they are collectives: nothing before them can fail on one
  // rank.
  STRATA_ASSIGN_OR_RETURN(const std::set<std::string> model_names,
                          comm::AllGatherNames(group, Names(live.model)));
  STRATA_ASSIGN_OR_RETURN(const std::set<std::string> optimizer_names,
                          comm::AllGatherNames(group, Names(live.optimizer)));
  std::vector<at::Tensor> model_staged, optimizer_staged;
  absl::StatusOr<Contents> contents = [&]() -> absl::StatusOr<Contents> {
    STRATA_RETURN_IF_ERROR(CheckRuns(live.model));
    STRATA_RETURN_IF_ERROR(CheckRuns(live.optimizer));
    STRATA_ASSIGN_OR_RETURN(const std::unique_ptr<Reader> reader,
                            Reader::Open(dir));
    const Metadata& metadata = reader->metadata();
    const Section model = ModelSection(dir, metadata, model_names);
    STRATA_ASSIGN_OR_RETURN(
        const std::vector<int> model_match,
        MatchRuns(model.where, live.model, model_names, model.infos, options,
                  /*revise=*/true, options.model_keys));
    STRATA_RETURN_IF_ERROR(
        Stage(*reader, model, live.model, model_match, 0, model_staged));
    if (!options.load_optimizer) return Contents();
    std::vector<std::string> step_keys;
    const Section section = OptimizerSection(dir, metadata, &step_keys);
    STRATA_ASSIGN_OR_RETURN(const std::optional<int64_t> step,
                            ReadSteps(*reader, step_keys));
    STRATA_ASSIGN_OR_RETURN(Contents read, ReadContents(*reader, step));
    STRATA_RETURN_IF_ERROR(
        CheckOptimizer(absl::StrCat("DCP checkpoint '", dir, "'"),
                       read.meta.optimizer, optimizer));
    STRATA_ASSIGN_OR_RETURN(
        const std::vector<int> optimizer_match,
        MatchRuns(section.where, live.optimizer, optimizer_names, section.infos,
                  options, /*revise=*/false));
    STRATA_RETURN_IF_ERROR(Stage(*reader, section, live.optimizer,
                                 optimizer_match, step.value_or(0),
                                 optimizer_staged));
    return read;
  }();
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, contents.status()));
  CopyStaged(live.model, model_staged);
  // Empty when the optimizer was not loaded.
  if (!optimizer_staged.empty()) CopyStaged(live.optimizer, optimizer_staged);
  return contents;
}

absl::StatusOr<std::pair<TensorState, Contents>> ReadDcpCheckpoint(
    const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(const std::unique_ptr<Reader> reader,
                          Reader::Open(dir));
  const Metadata& metadata = reader->metadata();
  std::vector<std::string> step_keys;
  const Section model = ModelSection(dir, metadata, {});
  const Section optimizer = OptimizerSection(dir, metadata, &step_keys);
  STRATA_ASSIGN_OR_RETURN(const std::optional<int64_t> step,
                          ReadSteps(*reader, step_keys));
  STRATA_ASSIGN_OR_RETURN(Contents contents, ReadContents(*reader, step));
  TensorState state;
  STRATA_RETURN_IF_ERROR(
      ReadWhole(*reader, model, step.value_or(0), state.model));
  STRATA_RETURN_IF_ERROR(
      ReadWhole(*reader, optimizer, step.value_or(0), state.optimizer));
  return std::make_pair(std::move(state), std::move(contents));
}

absl::Status LoadModel(const std::string& dir, const TensorState& live,
                       comm::Group* group) {
  ReadOptions options;
  options.load_optimizer = false;
  TensorState model;
  model.model = live.model;
  return LoadDcp(dir, model, options, "", group).status();
}

}  // namespace strata::checkpoint::dcp
