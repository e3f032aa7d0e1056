#include "launch/train/generator_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "comm/exchange.h"

namespace strata::launch {
namespace {

constexpr char kRankKeyPrefix[] = "generator.cpu.rank";

at::Tensor StateTensor(const std::string& state) {
  at::Tensor t = at::empty({static_cast<int64_t>(state.size())}, at::kByte);
  if (!state.empty()) std::memcpy(t.data_ptr(), state.data(), state.size());
  return t;
}

absl::Status SetState(at::Generator& generator, const std::string& state,
                      const std::string& where) {
  const at::Tensor t = StateTensor(state);
  std::lock_guard<std::mutex> lock(generator.mutex());
  absl::Status s =
      StatusFromCall(absl::StrCat(where, ": restoring the CPU generator state"),
                     [&] { generator.set_state(t); });
  if (s.ok()) return s;
  return absl::InvalidArgumentError(s.message());
}

}  // namespace

std::string GeneratorKeyForRank(int rank) {
  return absl::StrCat(kRankKeyPrefix, rank);
}

bool IsGeneratorKey(const std::string& key) {
  return key == kLegacyGeneratorKey || absl::StartsWith(key, kRankKeyPrefix);
}

std::string DefaultGeneratorState() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state();
  }
  return std::string(static_cast<const char*>(state.data_ptr()), state.numel());
}

absl::StatusOr<checkpoint::NamedValues> GatherGeneratorStates(
    comm::Group* group) {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> states,
                          comm::AllGatherBytes(group, DefaultGeneratorState()));
  checkpoint::NamedValues out;
  for (size_t r = 0; r < states.size(); ++r) {
    out.emplace_back(GeneratorKeyForRank(static_cast<int>(r)),
                     checkpoint::Bytes{std::move(states[r])});
  }
  return out;
}

absl::StatusOr<GeneratorStateChoice> ChooseGeneratorState(
    const checkpoint::NamedValues& extra, int rank, int world_size,
    const std::string& where) {
  GeneratorStateChoice choice;
  std::set<std::string> seen;
  const checkpoint::Bytes* legacy = nullptr;
  const checkpoint::Bytes* own = nullptr;
  for (const auto& [key, value] : extra) {
    if (!IsGeneratorKey(key)) continue;
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": extra '", key, "' appears more than once"));
    }
    const checkpoint::Bytes* bytes = std::get_if<checkpoint::Bytes>(&value);
    if (bytes == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": extra '", key,
                       "' is not bytes (expected a CPU generator state)"));
    }
    if (key == kLegacyGeneratorKey) {
      legacy = bytes;
      continue;
    }
    int saved_rank = -1;
    const std::string suffix = key.substr(sizeof(kRankKeyPrefix) - 1);
    if (!absl::SimpleAtoi(suffix, &saved_rank) || saved_rank < 0 ||
        GeneratorKeyForRank(saved_rank) != key) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": extra '", key, "' does not name a rank (",
                       kRankKeyPrefix, "<rank>, rank >= 0)"));
    }
    ++choice.saved_ranks;
    if (saved_rank >= world_size) choice.unused_ranks.push_back(saved_rank);
    if (saved_rank == rank) own = bytes;
  }
  if (own != nullptr) {
    choice.found = true;
    choice.state = own->data;
    choice.key = GeneratorKeyForRank(rank);
  } else if (legacy != nullptr) {
    choice.found = true;
    choice.state = legacy->data;
    choice.key = kLegacyGeneratorKey;
  }
  std::sort(choice.unused_ranks.begin(), choice.unused_ranks.end());
  return choice;
}

absl::Status CheckGeneratorState(const std::string& state,
                                 const std::string& where) {
  at::Generator scratch = at::make_generator<at::CPUGeneratorImpl>();
  return SetState(scratch, state, where);
}

absl::Status SetDefaultGeneratorState(const std::string& state,
                                      const std::string& where) {
  STRATA_RETURN_IF_ERROR(CheckGeneratorState(state, where));
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  return SetState(generator, state, where);
}

}  // namespace strata::launch
