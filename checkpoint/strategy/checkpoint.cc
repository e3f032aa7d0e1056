#include "checkpoint/strategy/checkpoint.h"

#include <ATen/ops/empty_like.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/status.h"
#include "base/trace.h"
#include "checkpoint/dcp/load.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/dcp/writer.h"
#include "checkpoint/full.h"
#include "checkpoint/io.h"
#include "checkpoint/local.h"
#include "checkpoint/metadata.h"
#include "checkpoint/model_weights.h"
#include "comm/exchange.h"

namespace strata::checkpoint {
namespace {

std::vector<std::string> ParameterOrder(strategies::Strategy& strategy) {
  return ParametersOf(strategy).order;
}

// The step of a "step_<n>" / "step_<n>.pth" entry, or -1.
int64_t StepOf(const std::string& entry) {
  absl::string_view name = entry;
  if (!absl::ConsumePrefix(&name, "step_")) return -1;
  absl::ConsumeSuffix(&name, ".pth");
  int64_t step;
  return absl::SimpleAtoi(name, &step) && step >= 0 ? step : -1;
}

bool LooksComplete(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return std::filesystem::exists(path / kMetadataFile, ec) ||
           dcp::IsDcpCheckpoint(path.string());
  }
  return std::filesystem::is_regular_file(path, ec) &&
         path.extension() == ".pth";
}

// step -> path of the complete checkpoints under root.
std::map<int64_t, std::string> ListCheckpoints(const std::string& root) {
  std::map<int64_t, std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    const int64_t step = StepOf(name);
    if (step < 0 || absl::EndsWith(name, ".tmp")) continue;
    if (LooksComplete(entry.path())) out[step] = entry.path().string();
  }
  return out;
}

absl::Status Prune(const std::string& root, int keep_last,
                   const std::string& keep) {
  if (keep_last <= 0) return absl::OkStatus();
  std::map<int64_t, std::string> all = ListCheckpoints(root);
  int kept = 0;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (kept < keep_last || it->second == keep) {
      ++kept;
      continue;
    }
    std::error_code ec;
    std::filesystem::remove_all(it->second, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot remove old checkpoint '",
                                              it->second, "': ", ec.message()));
    }
    LOG(INFO) << "removed old checkpoint " << it->second << " (keep_last "
              << keep_last << ")";
  }
  return absl::OkStatus();
}

// After a committed save (rank 0): `latest`, then pruning.
absl::Status Publish(const std::string& root, const std::string& path,
                     int keep_last) {
  STRATA_RETURN_IF_ERROR(
      WriteFileAtomic(root + "/latest",
                      std::filesystem::path(path).filename().string() + "\n"));
  return Prune(root, keep_last, path);
}

}  // namespace

ModelParameters ParametersOf(strategies::Strategy& strategy) {
  ModelParameters out;
  for (const auto& item : strategy.model().named_parameters()) {
    out.order.push_back(item.key());
    if (!item.value().requires_grad()) out.frozen.insert(item.key());
  }
  return out;
}

TensorState CollectState(strategies::Strategy& strategy,
                         const SaveOptions& options) {
  std::set<std::string> frozen;
  if (options.exclude_frozen_parameters) {
    for (const auto& item : strategy.model().named_parameters()) {
      if (!item.value().requires_grad()) frozen.insert(item.key());
    }
  }
  TensorState state;
  for (auto& run : strategy.ModelState()) {
    if (frozen.count(run.name) == 0) state.model.push_back(std::move(run));
  }
  // The model's parameter order (ZeRO and FSDP list their flat order), so
  // that saved state dicts list parameters as the model registers them.
  std::map<std::string, size_t> position;
  for (const std::string& name : ParameterOrder(strategy)) {
    position.emplace(name, position.size());
  }
  std::stable_sort(
      state.model.begin(), state.model.end(),
      [&](const ShardedTensor& a, const ShardedTensor& b) {
        auto pa = position.find(a.name), pb = position.find(b.name);
        const size_t ia = pa == position.end() ? position.size() : pa->second;
        const size_t ib = pb == position.end() ? position.size() : pb->second;
        return ia < ib;
      });
  if (options.save_optimizer) {
    for (auto& run : strategy.OptimizerState()) {
      const size_t dot = run.name.rfind('.');
      if (dot != std::string::npos &&
          frozen.count(run.name.substr(0, dot)) > 0) {
        continue;
      }
      state.optimizer.push_back(std::move(run));
    }
  }
  return state;
}

Contents PrepareContents(Contents contents, strategies::Strategy& strategy,
                         comm::Group* group, const SaveOptions& options) {
  const Meta fresh = NewMeta();
  if (contents.meta.time.empty()) contents.meta.time = fresh.time;
  if (contents.meta.strata_version.empty()) {
    contents.meta.strata_version = fresh.strata_version;
  }
  if (contents.meta.git_hash.empty()) contents.meta.git_hash = fresh.git_hash;
  contents.meta.world_size = group == nullptr ? 1 : group->size();
  if (contents.meta.strategy.empty()) contents.meta.strategy = strategy.name();
  // The state saved is the strategy's optimizer's, whatever the caller says.
  contents.meta.optimizer =
      strategies::OptimizerStateName(strategy.optimizer_config());
  if (!options.save_param_scheduler) contents.param_scheduler.clear();
  for (const auto& kv : options.extra) contents.extra.push_back(kv);
  if (options.callback) options.callback(contents);
  return contents;
}

OptimizerHyperparameters HyperparametersOf(
    const strategies::OptimizerConfig& config, double lr) {
  OptimizerHyperparameters h;
  h.lr = lr;
  h.weight_decay = config.weight_decay;
  h.beta1 = config.adamw.beta1;
  h.beta2 = config.adamw.beta2;
  h.eps = config.adamw.eps;
  h.momentum = config.sgd.momentum;
  h.dampening = config.sgd.dampening;
  h.nesterov = config.sgd.nesterov;
  return h;
}

absl::Status SaveState(const std::string& path, const TensorState& state,
                       const Contents& contents, const std::string& strategy,
                       const ModelParameters& parameters,
                       const OptimizerHyperparameters& hyperparameters,
                       comm::Group* group, const SaveOptions& options) {
  trace::Span span("checkpoint write", "checkpoint");
  switch (options.format) {
    case Format::kFull: {
      FullOptions full;
      full.parameter_order = parameters.order;
      full.frozen = parameters.frozen;
      full.hyper = hyperparameters;
      return SaveFull(path, state, contents, group, full);
    }
    case Format::kLocal:
      return SaveLocal(path, state, contents, strategy, group);
    case Format::kSharded:
      return SaveSharded(path, state, contents, group, options.write);
    case Format::kDcp: {
      dcp::WriteOptions write;
      write.parameter_order = parameters.order;
      write.frozen = parameters.frozen;
      write.hyper = hyperparameters;
      write.before_commit = options.write.before_commit;
      return dcp::SaveDcp(path, state, contents, group, write);
    }
  }
  return absl::InternalError("unknown format");
}

absl::Status SaveCheckpoint(const std::string& path,
                            strategies::Strategy& strategy, comm::Group* group,
                            Contents contents, const SaveOptions& options) {
  const TensorState state = CollectState(strategy, options);
  return SaveState(
      path, state,
      PrepareContents(std::move(contents), strategy, group, options),
      strategy.name(), ParametersOf(strategy),
      HyperparametersOf(strategy.optimizer_config(), options.optimizer_lr),
      group, options);
}

absl::StatusOr<Contents> LoadCheckpoint(const std::string& path,
                                        strategies::Strategy& strategy,
                                        comm::Group* group,
                                        const LoadOptions& options) {
  // The same order as saving (CollectState): the local format compares
  // layouts run by run.
  const TensorState live = CollectState(strategy, SaveOptions());
  const std::string optimizer =
      strategies::OptimizerStateName(strategy.optimizer_config());
  ReadOptions read;
  read.strict = options.strict;
  read.revise_keys = options.revise_keys;
  read.load_optimizer = options.load_optimizer;
  read.model_keys = options.model_keys;
  read.may_be_missing = options.may_be_missing;
  std::error_code ec;
  absl::StatusOr<Contents> contents;
  if (dcp::IsDcpCheckpoint(path)) {
    // torch.distributed.checkpoint: Strata's own (--ckpt_format=dcp) or
    // PyTorch's (dcp.save of get_state_dict's layout).
    contents = dcp::LoadDcp(path, live, read, optimizer, group);
    if (!contents.ok()) return contents.status();
    STRATA_RETURN_IF_ERROR(strategy.AfterStateLoaded());
    return contents;
  }
  if (std::filesystem::is_directory(path, ec)) {
    // Every rank reads the metadata to pick the loader; a failure there is
    // the same on every rank (same file), so no rank enters a collective
    // alone.
    absl::StatusOr<proto::Metadata> md = ReadMetadataFile(path);
    STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, md.status()));
    if (options.load_optimizer) {
      STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(
          group, CheckOptimizer(
                     absl::StrCat("checkpoint '", path, "' (meta.optimizer in ",
                                  kMetadataFile, ")"),
                     md->meta().optimizer(), optimizer)));
    }
    if (md->format() == kLocalFormat) {
      contents =
          LoadLocal(path, live, strategy.name(), options.load_optimizer, group);
    } else {
      contents = LoadSharded(path, live, read, group);
    }
  } else if (std::filesystem::is_regular_file(path, ec)) {
    const ModelParameters parameters = ParametersOf(strategy);
    FullOptions full;
    full.parameter_order = parameters.order;
    full.frozen = parameters.frozen;
    full.optimizer = optimizer;
    contents = LoadFull(path, live, read, group, full);
  } else {
    return comm::AgreeOnStatus(
        group, absl::NotFoundError(absl::StrCat(
                   "'", path,
                   "' is not a Strata checkpoint: no such file or directory")));
  }
  if (!contents.ok()) return contents.status();
  STRATA_RETURN_IF_ERROR(strategy.AfterStateLoaded());
  return contents;
}

absl::Status LoadHfWeights(const std::string& path,
                           const models::ModelConfig& config,
                           strategies::Strategy& strategy, comm::Group* group) {
  STRATA_RETURN_IF_ERROR(
      LoadHfState(path, config, CollectState(strategy, SaveOptions()), group));
  return strategy.AfterStateLoaded();
}

absl::StatusOr<Contents> Resume(const std::string& path,
                                strategies::Strategy& strategy,
                                comm::Group* group, bool resume_optimizer,
                                bool resume_param_scheduler,
                                const std::string& root,
                                const std::set<std::string>& may_be_missing) {
  LoadOptions options;
  options.load_optimizer = resume_optimizer;
  options.may_be_missing = may_be_missing;
  auto finish = [&](const std::string& resolved, Contents contents) {
    if (!resume_param_scheduler) contents.param_scheduler.clear();
    LOG(INFO) << "resumed from " << resolved << " at step "
              << contents.meta.step;
    return contents;
  };
  if (path != "auto") {
    STRATA_ASSIGN_OR_RETURN(Contents contents,
                            LoadCheckpoint(path, strategy, group, options));
    return finish(path, std::move(contents));
  }
  const int rank = group == nullptr ? 0 : group->rank();
  const std::vector<std::string> candidates = CheckpointsNewestFirst(root);
  for (const std::string& candidate : candidates) {
    absl::StatusOr<Contents> contents =
        LoadCheckpoint(candidate, strategy, group, options);
    if (contents.ok()) return finish(candidate, *std::move(contents));
    // A failed load changed nothing. Corrupt, or sound but not this run's?
    absl::Status corrupt = contents.status();
    if (corrupt.code() != absl::StatusCode::kDataLoss) {
      corrupt = comm::AgreeOnStatus(
          group, rank == 0 ? VerifyCheckpoint(candidate) : absl::OkStatus());
      if (corrupt.ok()) return contents.status();
    }
    LOG(WARNING) << "rank " << rank << ": resume auto: skipping checkpoint "
                 << candidate << ", it is corrupt (" << corrupt.message()
                 << "); trying the previous one";
  }
  if (candidates.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint to resume under '", root, "'"));
  }
  return absl::NotFoundError(
      absl::StrCat("no valid checkpoint to resume under '", root, "' (",
                   candidates.size(), " checkpoint(s), all corrupt)"));
}

std::string CheckpointPathForStep(const std::string& root, int64_t step,
                                  Format format) {
  return absl::StrFormat("%s/step_%08d%s", root, step,
                         format == Format::kFull ? ".pth" : "");
}

absl::StatusOr<std::string> FindLatest(const std::string& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) {
    return absl::NotFoundError(absl::StrCat("no checkpoint to resume: '", root,
                                            "' is not a directory"));
  }
  const std::vector<std::string> all = CheckpointsNewestFirst(root);
  if (all.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint to resume under '", root,
                     "' (no 'latest' and no complete step_* checkpoint)"));
  }
  return all.front();
}

std::vector<std::string> CheckpointsNewestFirst(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return out;
  // Entries of `latest`'s step and later ones (another run's) come after it
  // only when it is unusable.
  int64_t below = std::numeric_limits<int64_t>::max();
  absl::StatusOr<std::string> latest = ReadWholeFile(root + "/latest");
  if (latest.ok()) {
    const std::string name(absl::StripAsciiWhitespace(*latest));
    const std::filesystem::path path = std::filesystem::path(root) / name;
    if (!name.empty() && LooksComplete(path)) {
      out.push_back(path.string());
      if (StepOf(name) >= 0) below = StepOf(name);
    } else {
      LOG(WARNING) << "'" << root << "/latest' names '" << name
                   << "', which is not a complete checkpoint; using the "
                      "newest complete one";
    }
  }
  const std::map<int64_t, std::string> all = ListCheckpoints(root);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->first < below) out.push_back(it->second);
  }
  return out;
}

absl::Status VerifyCheckpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    return ReadFullCheckpoint(path).status();
  }
  if (dcp::IsDcpCheckpoint(path)) return dcp::ReadDcpCheckpoint(path).status();
  STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(path));
  if (md.format() == kLocalFormat) return ReadLocalCheckpoint(path).status();
  return VerifySharded(path).status();
}

absl::Status SaveCheckpointToRoot(const std::string& root, int64_t step,
                                  int keep_last, strategies::Strategy& strategy,
                                  comm::Group* group, Contents contents,
                                  const SaveOptions& options) {
  const std::string path = CheckpointPathForStep(root, step, options.format);
  contents.meta.step = step;
  STRATA_RETURN_IF_ERROR(
      SaveCheckpoint(path, strategy, group, std::move(contents), options));
  const int rank = group == nullptr ? 0 : group->rank();
  return comm::AgreeOnStatus(
      group, rank == 0 ? Publish(root, path, keep_last) : absl::OkStatus());
}

// --- AsyncCheckpointer ------------------------------------------------------

AsyncCheckpointer::AsyncCheckpointer(comm::Group* group) : group_(group) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  absl::Status s = Wait();
  if (!s.ok()) LOG(ERROR) << "asynchronous checkpoint failed: " << s;
}

absl::Status AsyncCheckpointer::Wait() {
  if (thread_.joinable()) thread_.join();
  return status_;
}

absl::Status AsyncCheckpointer::SaveToRoot(const std::string& root,
                                           int64_t step, int keep_last,
                                           strategies::Strategy& strategy,
                                           Contents contents,
                                           const SaveOptions& options) {
  absl::Status previous = Wait();
  status_ = absl::OkStatus();
  const auto start = std::chrono::steady_clock::now();
  const int64_t copy_start_us = trace::Enabled() ? trace::NowMicros() : -1;
  const TensorState live = CollectState(strategy, options);
  // Staging buffers, reused while the layout stays the same.
  auto stage = [](const std::vector<ShardedTensor>& from,
                  std::vector<ShardedTensor>& to) {
    bool same = from.size() == to.size();
    for (size_t i = 0; same && i < from.size(); ++i) {
      same = to[i].name == from[i].name && to[i].offset == from[i].offset &&
             to[i].local.sizes() == from[i].local.sizes() &&
             to[i].local.scalar_type() == from[i].local.scalar_type();
    }
    if (!same) {
      to.clear();
      for (const auto& run : from) {
        to.push_back({run.name, run.global_shape, run.offset,
                      at::empty_like(run.local)});
      }
    }
    for (size_t i = 0; i < from.size(); ++i) to[i].local.copy_(from[i].local);
  };
  stage(live.model, staging_.model);
  stage(live.optimizer, staging_.optimizer);
  if (copy_start_us >= 0) {
    trace::Record("checkpoint copy", "checkpoint", copy_start_us,
                  trace::NowMicros());
  }
  last_stage_s_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  contents.meta.step = step;
  Contents prepared =
      PrepareContents(std::move(contents), strategy, group_, options);
  const std::string path = CheckpointPathForStep(root, step, options.format);
  thread_ = std::thread(
      [this, path, root, keep_last, options, prepared = std::move(prepared),
       name = strategy.name(), parameters = ParametersOf(strategy),
       hyperparameters = HyperparametersOf(strategy.optimizer_config(),
                                           options.optimizer_lr)]() {
        trace::SetThreadName("checkpoint writer");
        absl::Status s = SaveState(path, staging_, prepared, name, parameters,
                                   hyperparameters, group_, options);
        if (s.ok()) {
          const int rank = group_ == nullptr ? 0 : group_->rank();
          s = comm::AgreeOnStatus(group_, rank == 0
                                              ? Publish(root, path, keep_last)
                                              : absl::OkStatus());
        }
        status_ = s;
      });
  return previous;
}

}  // namespace strata::checkpoint
