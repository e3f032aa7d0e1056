#include "comm/ring_context.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <utility>

namespace strata::comm::internal {
namespace {

// Exposes c10d's (protected) per-tag context; adds no state.
class RingProcessGroup final : public c10d::ProcessGroupGloo {
 public:
  using c10d::ProcessGroupGloo::ProcessGroupGloo;
  std::shared_ptr<gloo::Context> FirstContext() { return getContext(0); }
};

}  // namespace

RingContext ConnectRingContext(c10::intrusive_ptr<c10d::Store> store, int rank,
                               int size,
                               std::shared_ptr<gloo::transport::Device> device,
                               std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(std::move(device));
  options->threads = 1;
  auto group = c10::make_intrusive<RingProcessGroup>(std::move(store), rank,
                                                     size, options);
  RingContext ring;
  ring.context = group->FirstContext();
  ring.owner = std::move(group);
  return ring;
}

}  // namespace strata::comm::internal
