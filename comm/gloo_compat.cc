#include "comm/gloo_compat.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>

#include <memory>
#include <utility>

namespace strata::comm::internal {
namespace {

// The first overload is chosen where the shared_ptr form compiles.
template <typename Context>
auto Connect(Context& context, std::shared_ptr<gloo::rendezvous::Store> store,
             std::shared_ptr<gloo::transport::Device>& device, int)
    -> decltype(context.connectFullMesh(store, device), void()) {
  context.connectFullMesh(store, device);
}
template <typename Context>
void Connect(Context& context, std::shared_ptr<gloo::rendezvous::Store> store,
             std::shared_ptr<gloo::transport::Device>& device, long) {
  context.connectFullMesh(*store, device);
}

}  // namespace

void ConnectFullMesh(gloo::rendezvous::Context& context,
                     std::shared_ptr<gloo::rendezvous::Store> store,
                     std::shared_ptr<gloo::transport::Device>& device) {
  Connect(context, std::move(store), device, 0);
}

}  // namespace strata::comm::internal
