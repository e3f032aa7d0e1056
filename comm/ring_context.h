// The Gloo context comm::Group's rings (ring.h) run on, connected by c10d.
// Internal to comm/.
//
// The context comes from a second c10d::ProcessGroupGloo on the group's
// store (one worker thread, never given a collective): c10d connects it, and
// Strata borrows its first context. Connecting through c10d rather than
// through gloo::rendezvous keeps Strata off Gloo's rendezvous interfaces
// (Context::connectFullMesh, rendezvous::Store), which changed between the
// Gloo versions LibTorch bundles: PyTorch's wheels carry a Gloo without
// headers, and a store Strata compiled against other Gloo headers crashes
// that Gloo (seen with LibTorch 2.11). What Strata still uses of Gloo:
// gloo::Context's leading members (rank, size), createUnboundBuffer, Slot,
// and the transport::UnboundBuffer interface.
#ifndef STRATA_COMM_RING_CONTEXT_H_
#define STRATA_COMM_RING_CONTEXT_H_

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>

namespace c10d {
class ProcessGroupGloo;
class Store;
}  // namespace c10d
namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace strata::comm::internal {

struct RingContext {
  // Owns `context` (keep it alive as long as the context is used).
  c10::intrusive_ptr<c10d::ProcessGroupGloo> owner;
  std::shared_ptr<gloo::Context> context;
};

// Connects a ring context of `size` ranks (this one `rank`) over `store`
// (borrowed: shared) with `device`; every rank of the group calls it with
// the same store prefix. Blocks until all joined or `timeout` passed; throws
// what c10d throws (callers convert with StatusFromCall).
RingContext ConnectRingContext(c10::intrusive_ptr<c10d::Store> store, int rank,
                               int size,
                               std::shared_ptr<gloo::transport::Device> device,
                               std::chrono::milliseconds timeout);

}  // namespace strata::comm::internal

#endif  // STRATA_COMM_RING_CONTEXT_H_
