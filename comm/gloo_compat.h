// Gloo across the versions LibTorch brings (Debian's 1.13 and 2.6, PyTorch
// 2.11's wheels), for comm::Group's ring context. Internal to comm/.
#ifndef STRATA_COMM_GLOO_COMPAT_H_
#define STRATA_COMM_GLOO_COMPAT_H_

#include <memory>

namespace gloo {
namespace rendezvous {
class Context;
class Store;
}  // namespace rendezvous
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace strata::comm::internal {

// context.connectFullMesh(store, device): Gloo takes the store by reference
// up to 2024 (LibTorch 1.13 to 2.6) and as a shared_ptr since (2.11's).
void ConnectFullMesh(gloo::rendezvous::Context& context,
                     std::shared_ptr<gloo::rendezvous::Store> store,
                     std::shared_ptr<gloo::transport::Device>& device);

}  // namespace strata::comm::internal

#endif  // STRATA_COMM_GLOO_COMPAT_H_
