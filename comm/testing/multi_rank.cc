#include "comm/testing/multi_rank.h"

#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::comm::testing {

GroupOptions TestGroupOptions() {
  GroupOptions options;
  options.timeout = absl::Seconds(30);
  options.check_collectives = true;
  options.hostname = "127.0.0.1";
  return options;
}

absl::Status RunOnRanks(int world_size,
                        const std::function<void(Group& group)>& body,
                        const GroupOptions& base) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("RunOnRanks: world_size must be >= 1, got ", world_size));
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<absl::Status> join_status(world_size);
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      GroupOptions options = base;
      options.rank = rank;
      options.world_size = world_size;
      auto group = Group::Create(store, options);
      if (!group.ok()) {
        join_status[rank] = group.status();
        return;
      }
      body(**group);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::string> errors;
  for (int rank = 0; rank < world_size; ++rank) {
    if (!join_status[rank].ok()) {
      errors.push_back(
          absl::StrCat("rank ", rank, ": ", join_status[rank].message()));
    }
  }
  if (!errors.empty()) {
    return absl::UnavailableError(
        absl::StrCat("could not form a test group of ", world_size,
                     " ranks: ", absl::StrJoin(errors, "; ")));
  }
  return absl::OkStatus();
}

}  // namespace strata::comm::testing
