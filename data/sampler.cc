#include "data/sampler.h"

#include <ATen/ops/empty.h>
#include <glog/logging.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/named_state.h"
#include "base/status.h"
#include "data/rng.h"

namespace strata::data {
namespace {

constexpr const char* kStateKeys[] = {"position", "seed",
                                      "seq_len",  "global_batch_size",
                                      "shuffle",  "num_tokens"};

}  // namespace

absl::StatusOr<std::unique_ptr<DistributedSampler>> DistributedSampler::Create(
    const TokenSource* source, const SamplerOptions& options) {
  CHECK(source != nullptr) << "DistributedSampler needs a token source";
  if (options.seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("SamplerOptions.seq_len is ",
                                                   options.seq_len,
                                                   ", expected at least 1"));
  }
  if (options.global_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SamplerOptions.global_batch_size is ",
                     options.global_batch_size, ", expected at least 1"));
  }
  if (source->num_tokens() - 1 < options.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token source ", source->Describe(), " has ", source->num_tokens(),
        " tokens, expected at least seq_len + 1 = ", options.seq_len + 1,
        " for one training window"));
  }
  return std::unique_ptr<DistributedSampler>(
      new DistributedSampler(source, options));
}

DistributedSampler::DistributedSampler(const TokenSource* source,
                                       const SamplerOptions& options)
    : source_(source),
      options_(options),
      num_windows_((source->num_tokens() - 1) / options.seq_len) {
  CHECK_GE(num_windows_, 1);
}

absl::StatusOr<at::Tensor> DistributedSampler::NextBatch(int rank,
                                                         int world_size) {
  const int64_t batch = options_.global_batch_size;
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedSampler::NextBatch: world_size is ",
                     world_size, ", expected at least 1"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler::NextBatch: rank is ", rank,
        ", expected a rank in [0, world_size = ", world_size, ")"));
  }
  if (batch % world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler::NextBatch: global_batch_size ", batch,
        " is not divisible by world_size ", world_size,
        ", expected every rank to get the same number of sequences"));
  }
  const int64_t rows = batch / world_size;
  const int64_t width = options_.seq_len + 1;
  at::Tensor out = at::empty({rows, width}, at::kLong);
  int64_t* data = out.data_ptr<int64_t>();
  const int64_t first = position_ + rank * rows;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t window = WindowOfSample(first + i);
    source_->Read(window * options_.seq_len, width, data + i * width);
  }
  position_ += batch;
  return out;
}

int64_t DistributedSampler::WindowOfSample(int64_t k) {
  CHECK_GE(k, 0) << "negative sample index";
  const int64_t index = k % num_windows_;
  if (!options_.shuffle) return index;
  return Permutation(k / num_windows_)[index];
}

const std::vector<int64_t>& DistributedSampler::Permutation(int64_t epoch) {
  for (const CachedPermutation& cached : cache_) {
    if (cached.epoch == epoch) return cached.windows;
  }
  CachedPermutation& slot =
      cache_[0].epoch <= cache_[1].epoch ? cache_[0] : cache_[1];
  std::mt19937_64 gen(MixSeed(options_.seed, static_cast<uint64_t>(epoch)));
  slot.windows = RandomPermutation(num_windows_, gen);
  slot.epoch = epoch;
  return slot.windows;
}

int64_t DistributedSampler::position() const { return position_; }

int64_t DistributedSampler::epoch() const { return position_ / num_windows_; }

int64_t DistributedSampler::num_windows() const { return num_windows_; }

const SamplerOptions& DistributedSampler::options() const { return options_; }

std::vector<std::pair<std::string, int64_t>> DistributedSampler::State() const {
  return {{"position", position_},
          {"seed", static_cast<int64_t>(options_.seed)},
          {"seq_len", options_.seq_len},
          {"global_batch_size", options_.global_batch_size},
          {"shuffle", options_.shuffle ? 1 : 0},
          {"num_tokens", source_->num_tokens()}};
}

absl::Status DistributedSampler::LoadState(
    const std::vector<std::pair<std::string, int64_t>>& state) {
  STRATA_ASSIGN_OR_RETURN(
      auto values, NamedStateMap<int64_t>("sampler state", state, kStateKeys));
  for (const auto& [key, expected] : State()) {
    if (key == "position") continue;
    if (values[key] != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampler state has ", key, " = ", values[key],
                       ", but this sampler has ", key, " = ", expected,
                       " (over ", source_->Describe(), ")"));
    }
  }
  if (values["position"] < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampler state has position = ", values["position"],
                     ", expected at least 0"));
  }
  position_ = values["position"];
  return absl::OkStatus();
}

}  // namespace strata::data
