#include "launch/train/training_checkpoint.h"

#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/fault_point.h"
#include "base/status.h"
#include "comm/exchange.h"
#include "launch/train/generator_state.h"
#include "models/hf_layout.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule_state.h"

namespace strata::launch {

using checkpoint::AsyncCheckpointer;
using checkpoint::Bytes;
using checkpoint::CheckpointPathForStep;
using checkpoint::Contents;
using checkpoint::Format;
using checkpoint::Resume;
using checkpoint::SaveCheckpointToRoot;
using checkpoint::SaveOptions;

namespace {

constexpr char kSamplerPrefix[] = "sampler.";
constexpr char kLossScalerPrefix[] = "loss_scaler.";

}  // namespace

TrainingCheckpoints::TrainingCheckpoints(
    const TrainingCheckpointOptions& options, Format format,
    strategies::Strategy* strategy, data::DistributedSampler* sampler,
    comm::Group* group)
    : options_(options),
      format_(format),
      strategy_(strategy),
      sampler_(sampler),
      group_(group) {}

TrainingCheckpoints::~TrainingCheckpoints() {
  absl::Status s = Finish();
  if (!s.ok()) LOG(ERROR) << s;
}

absl::StatusOr<std::unique_ptr<TrainingCheckpoints>>
TrainingCheckpoints::Create(const TrainingCheckpointOptions& options,
                            strategies::Strategy* strategy,
                            data::DistributedSampler* sampler,
                            comm::Group* group) {
  STRATA_RETURN_IF_ERROR(ValidateTrainingCheckpointOptions(options));
  std::unique_ptr<TrainingCheckpoints> out(new TrainingCheckpoints(
      options, options.format, strategy, sampler, group));
  if (options.async_save && options.save_every > 0) {
    if (group != nullptr) {
      STRATA_ASSIGN_OR_RETURN(out->async_group_, group->Split(0, "ckpt"));
    }
    out->async_ = std::make_unique<AsyncCheckpointer>(out->async_group_.get());
  }
  return out;
}

absl::StatusOr<Contents> TrainingCheckpoints::Collect(
    int64_t steps_done) const {
  Contents c;
  c.meta.step = steps_done;
  c.meta.seed = options_.seed;
  c.meta.model_config = options_.model_config;
  absl::StatusOr<std::unique_ptr<optim::LrSchedule>> schedule =
      optim::LrSchedule::Create(options_.schedule);
  if (schedule.ok()) {
    c.param_scheduler =
        optim::LrScheduleFields(options_.schedule, steps_done - 1);
  }
  for (const auto& [key, value] : sampler_->State()) {
    c.extra.emplace_back(absl::StrCat(kSamplerPrefix, key), value);
  }
  // Every rank's generator state (a collective; the formats write rank 0's
  // extras).
  STRATA_ASSIGN_OR_RETURN(checkpoint::NamedValues generators,
                          GatherGeneratorStates(group_));
  for (auto& kv : generators) c.extra.push_back(std::move(kv));
  if (const optim::LossScaler* scaler = strategy_->loss_scaler()) {
    for (const auto& [key, value] : scaler->State()) {
      c.extra.emplace_back(absl::StrCat(kLossScalerPrefix, key), value);
    }
  }
  return c;
}

absl::Status TrainingCheckpoints::RestoreLossScaler(
    const checkpoint::NamedValues& extra) const {
  const std::string where = absl::StrCat("--resume=", options_.resume);
  std::vector<std::pair<std::string, double>> state;
  for (const auto& [key, value] : extra) {
    if (!absl::StartsWith(key, kLossScalerPrefix)) continue;
    const double* v = std::get_if<double>(&value);
    if (v == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", key, "' is not a number"));
    }
    state.emplace_back(key.substr(strlen(kLossScalerPrefix)), *v);
  }
  optim::LossScaler* scaler = strategy_->mutable_loss_scaler();
  if (scaler == nullptr) {
    if (!state.empty() && (group_ == nullptr ? 0 : group_->rank()) == 0) {
      LOG(WARNING) << where
                   << ": the checkpoint holds a loss scaler's state (an fp16 "
                      "run) and this run has no loss scaling; ignoring it";
    }
    return absl::OkStatus();
  }
  if (state.empty()) {
    LOG(WARNING) << where << ": rank "
                 << (group_ == nullptr ? 0 : group_->rank())
                 << ": no loss scaler state in the checkpoint; starting from "
                    "the initial scale "
                 << scaler->scale();
    return absl::OkStatus();
  }
  return Annotate(scaler->LoadState(state),
                  absl::StrCat(where, ": loss scaler state"));
}

absl::StatusOr<int64_t> TrainingCheckpoints::MaybeResume() {
  if (options_.resume.empty()) return 0;
  // Frozen parameters keep their (initial) values where a checkpoint saved
  // with --ckpt_exclude_frozen_parameters left them out.
  std::set<std::string> frozen;
  for (const auto& item : strategy_->model().named_parameters()) {
    if (!item.value().requires_grad()) frozen.insert(item.key());
  }
  absl::StatusOr<Contents> resumed = Resume(options_.resume, *strategy_, group_,
                                            true, true, options_.dir, frozen);
  // "auto" with nothing (valid) to resume: the first start of a run, or
  // every checkpoint corrupt (each was reported).
  if (options_.resume == "auto" &&
      resumed.status().code() == absl::StatusCode::kNotFound) {
    LOG(WARNING) << "rank " << (group_ == nullptr ? 0 : group_->rank())
                 << ": --resume=auto: " << resumed.status().message()
                 << "; starting from scratch at step 0";
    return 0;
  }
  STRATA_RETURN_IF_ERROR(
      Annotate(resumed.status(), absl::StrCat("--resume=", options_.resume)));
  Contents& c = *resumed;
  std::vector<std::pair<std::string, int64_t>> sampler_state;
  for (const auto& [key, value] : c.extra) {
    if (absl::StartsWith(key, kSamplerPrefix)) {
      const int64_t* v = std::get_if<int64_t>(&value);
      if (v == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--resume=", options_.resume, ": '", key, "' is not an integer"));
      }
      sampler_state.emplace_back(key.substr(strlen(kSamplerPrefix)), *v);
    }
  }
  STRATA_RETURN_IF_ERROR(RestoreLossScaler(c.extra));
  if (sampler_state.empty()) sampler_state = DerivedSamplerState(c.meta.step);
  STRATA_RETURN_IF_ERROR(Annotate(sampler_->LoadState(sampler_state),
                                  absl::StrCat("--resume=", options_.resume)));
  STRATA_RETURN_IF_ERROR(RestoreGenerator(c.extra));
  if (!c.param_scheduler.empty()) {
    auto restored = optim::LrScheduleFromFields(c.param_scheduler);
    auto current = optim::LrSchedule::Create(options_.schedule);
    if (!restored.ok()) {
      LOG(WARNING) << "--resume=" << options_.resume
                   << ": the checkpoint's LR schedule is unreadable ("
                   << restored.status().message()
                   << "); continuing with the flags' schedule";
    } else if (current.ok() &&
               restored->schedule->State(0) != (*current)->State(0)) {
      LOG(WARNING) << "--resume=" << options_.resume
                   << ": the checkpoint's LR schedule differs from the flags'; "
                      "continuing with the flags' schedule";
    }
  }
  if (c.meta.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume=", options_.resume, ": negative step ", c.meta.step));
  }
  return c.meta.step;
}

absl::Status TrainingCheckpoints::RestoreGenerator(
    const checkpoint::NamedValues& extra) const {
  const int rank = group_ == nullptr ? 0 : group_->rank();
  const int world_size = group_ == nullptr ? 1 : group_->size();
  const std::string where = absl::StrCat("--resume=", options_.resume);
  absl::StatusOr<GeneratorStateChoice> choice =
      ChooseGeneratorState(extra, rank, world_size, where);
  absl::Status local = choice.status();
  if (local.ok() && choice->found) {
    local = CheckGeneratorState(choice->state,
                                absl::StrCat(where, " (", choice->key, ")"));
  }
  // No rank changes its generator unless every rank can.
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group_, local));
  if (!choice->found && choice->saved_ranks > 0) {
    LOG(WARNING) << where << ": rank " << rank << ": the checkpoint holds the "
                 << "generator states of " << choice->saved_ranks
                 << " rank(s), none for rank " << rank
                 << "; it keeps its seeded state, so its random draws from "
                    "the default generator differ from the original run";
  } else if (!choice->found) {
    LOG(WARNING) << where << ": rank " << rank
                 << ": no generator state in the checkpoint; random draws "
                    "from the default generator will differ from the "
                    "original run";
  } else if (choice->key == kLegacyGeneratorKey && world_size > 1) {
    LOG(WARNING) << where << ": rank " << rank
                 << ": the checkpoint holds one generator state ('"
                 << kLegacyGeneratorKey
                 << "', the saving rank 0's); restored on this rank too";
  }
  if (choice->found) {
    STRATA_RETURN_IF_ERROR(SetDefaultGeneratorState(choice->state, where));
  }
  if (!choice->unused_ranks.empty()) {
    LOG(WARNING) << where << ": rank " << rank << ": the generator states of "
                 << choice->unused_ranks.size() << " saved rank(s) ("
                 << absl::StrJoin(choice->unused_ranks, ", ")
                 << ") are unused: this job has " << world_size << " rank(s)";
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, int64_t>>
TrainingCheckpoints::DerivedSamplerState(int64_t step) const {
  std::vector<std::pair<std::string, int64_t>> state = sampler_->State();
  const int64_t global_batch = sampler_->options().global_batch_size;
  for (auto& [key, value] : state) {
    if (key == "position") value = step * global_batch;
  }
  LOG(INFO) << "--resume=" << options_.resume
            << ": the checkpoint has no data sampler state (e.g. saved by "
               "PyTorch); assuming the run consumed meta.step "
            << step << " x global batch " << global_batch << " = "
            << step * global_batch
            << " samples of this data in this sampler's order (--seed, "
               "--seq_len)";
  return state;
}

double TrainingCheckpoints::NextLr(int64_t steps_done) const {
  absl::StatusOr<std::unique_ptr<optim::LrSchedule>> schedule =
      optim::LrSchedule::Create(options_.schedule);
  // The lr of the next step: PyTorch's group lr after scheduler.step().
  return schedule.ok() ? (*schedule)->LrAt(steps_done)
                       : options_.schedule.base_lr;
}

namespace {

// How --load_weights matches keys: strictly (the default, and always for
// --resume's weights), or as --load_weights_strict and
// --load_weights_revise_keys say.
// The model-only load --load_weights asks for: strict or not, with its
// revise_keys rules.
absl::StatusOr<checkpoint::LoadOptions> WeightsLoadOptionsOf(
    const TrainingCheckpointOptions& options) {
  checkpoint::LoadOptions load;
  load.load_optimizer = false;
  load.strict = options.load_weights_strict;
  STRATA_ASSIGN_OR_RETURN(load.revise_keys,
                          ParseReviseKeys(options.load_weights_revise_keys));
  return load;
}

// Logs (rank 0) how a non-strict or revised load matched the model's keys.
void LogKeyReport(const std::string& path, const checkpoint::KeyReport& keys,
                  comm::Group* group) {
  if (group != nullptr && group->rank() != 0) return;
  LOG(INFO) << "--load_weights=" << path << ": loaded " << keys.loaded
            << " model tensors";
  for (const auto& [names, what] :
       {std::pair{&keys.missing,
                  "model tensors are not in the checkpoint and "
                  "keep their initial values"},
        std::pair{
            &keys.unexpected,
            "checkpoint tensors are not in the model and were ignored"}}) {
    if (names->empty()) continue;
    LOG(WARNING) << "rank 0: --load_weights=" << path << ": " << names->size()
                 << " " << what << " (--load_weights_strict=false): "
                 << absl::StrJoin(*names, ", ");
  }
}

// LoadModelWeights without naming a flag in errors. `load`: a model-only
// load (load_optimizer false); its model_keys is set here.
absl::Status LoadWeightsFrom(const std::string& path,
                             const models::ModelConfig& config,
                             strategies::Strategy& strategy, comm::Group* group,
                             checkpoint::LoadOptions load) {
  const bool default_matching = load.strict && load.revise_keys.empty();
  if (models::IsHfCheckpoint(path)) {
    if (!default_matching) {
      return absl::InvalidArgumentError(
          "Hugging Face weights are converted by name and load strictly: "
          "--load_weights_strict=false and --load_weights_revise_keys "
          "apply to Strata, PyTorch and DCP checkpoints");
    }
    return checkpoint::LoadHfWeights(path, config, strategy, group);
  }
  checkpoint::KeyReport keys;
  load.model_keys = &keys;
  STRATA_RETURN_IF_ERROR(
      checkpoint::LoadCheckpoint(path, strategy, group, load).status());
  if (!default_matching) LogKeyReport(path, keys, group);
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadModelWeights(const TrainingCheckpointOptions& options,
                              const models::ModelConfig& config,
                              strategies::Strategy& strategy,
                              comm::Group* group) {
  const std::string& path = options.load_weights;
  absl::StatusOr<checkpoint::LoadOptions> load = WeightsLoadOptionsOf(options);
  if (!load.ok()) return load.status();
  return Annotate(LoadWeightsFrom(path, config, strategy, group, *load),
                  absl::StrCat("--load_weights=", path));
}

absl::StatusOr<std::string> LoadWeightsOnly(
    const TrainingCheckpointOptions& options, const models::ModelConfig& config,
    strategies::Strategy& strategy, comm::Group* group) {
  if (!options.load_weights.empty()) {
    STRATA_RETURN_IF_ERROR(LoadModelWeights(options, config, strategy, group));
    return options.load_weights;
  }
  if (options.resume.empty()) {
    return absl::InvalidArgumentError(
        "no weights to load: pass --load_weights or --resume");
  }
  std::string path = options.resume;
  if (path == "auto") {
    absl::StatusOr<std::string> latest = checkpoint::FindLatest(options.dir);
    if (!latest.ok()) {
      return Annotate(latest.status(),
                      "--resume=auto (the latest checkpoint under the "
                      "checkpoint directory, --ckpt_dir)");
    }
    path = *latest;
  }
  checkpoint::LoadOptions load;
  load.load_optimizer = false;
  STRATA_RETURN_IF_ERROR(
      Annotate(LoadWeightsFrom(path, config, strategy, group, load),
               absl::StrCat("--resume=", options.resume)));
  return path;
}

absl::Status TrainingCheckpoints::MaybeLoadWeights(
    const models::ModelConfig& config) {
  if (options_.load_weights.empty()) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(
      LoadModelWeights(options_, config, *strategy_, group_));
  LOG(INFO) << "--load_weights=" << options_.load_weights
            << ": loaded the model weights; starting at step 0 with a fresh "
               "optimizer and schedule";
  return absl::OkStatus();
}

absl::Status TrainingCheckpoints::AfterStep(int64_t steps_done) {
  if (options_.save_every <= 0 || steps_done % options_.save_every != 0) {
    return absl::OkStatus();
  }
  SaveOptions save;
  save.format = format_;
  save.exclude_frozen_parameters = options_.exclude_frozen_parameters;
  save.optimizer_lr = NextLr(steps_done);
  // Chaos tests pause or kill a rank here (base/fault_point.h); the save
  // follows step steps_done - 1.
  save.write.before_commit = [async = async_ != nullptr, steps_done] {
    ReachFaultPoint(async ? FaultSite::kAsyncSave : FaultSite::kSave,
                    steps_done - 1);
  };
  const auto start = std::chrono::steady_clock::now();
  absl::Status s;
  absl::StatusOr<Contents> contents = Collect(steps_done);
  if (!contents.ok()) {
    s = contents.status();
  } else if (async_ != nullptr) {
    s = async_->SaveToRoot(options_.dir, steps_done, options_.keep_last,
                           *strategy_, *std::move(contents), save);
  } else {
    s = SaveCheckpointToRoot(options_.dir, steps_done, options_.keep_last,
                             *strategy_, group_, *std::move(contents), save);
  }
  last_stall_s_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (s.ok()) {
    LOG(INFO) << (async_ != nullptr ? "saving" : "saved") << " checkpoint "
              << CheckpointPathForStep(options_.dir, steps_done, format_)
              << " (" << checkpoint::FormatName(format_)
              << ", training stalled " << last_stall_s_ << " s)";
  }
  return s;
}

absl::Status TrainingCheckpoints::Finish() {
  if (async_ == nullptr) return absl::OkStatus();
  return async_->Wait();
}

}  // namespace strata::launch
