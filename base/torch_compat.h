// The one place where Strata's sources differ between the LibTorch
// generations they build against: 1.13 (Debian 12, the default) and 2.x
// (Debian 13's 2.6, PyTorch's downloads and wheels). Everything else compiles
// unchanged against both; each function here names the difference it hides,
// so that no `#if TORCH_VERSION_*` appears anywhere else.
//
// Thread safety: autocast state is thread-local in every LibTorch; these
// functions read and write the calling thread's state only.
#ifndef STRATA_BASE_TORCH_COMPAT_H_
#define STRATA_BASE_TORCH_COMPAT_H_

#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#include <cstddef>
#include <type_traits>
#include <utility>

// True when compiling against LibTorch `major`.`minor` or newer.
#define STRATA_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||         \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace strata::torch_compat {

// The LibTorch Strata was compiled against, as major * 100 + minor (113 for
// 1.13, 206 for 2.6), from torch/version.h.
int TorchVersion();

// Autocast per device type (c10::kCPU or c10::kCUDA).
//
// LibTorch 1.13 has one function per device (is_cpu_enabled / is_enabled for
// CUDA, get_autocast_cpu_dtype / get_autocast_gpu_dtype, ...); 2.4 added
// functions taking the device type and deprecated the per-device ones (2.6
// warns on every use). Other device types are a programming error (CHECK).
bool IsAutocastEnabled(c10::DeviceType device);
void SetAutocastEnabled(c10::DeviceType device, bool enabled);
c10::ScalarType AutocastDtype(c10::DeviceType device);
void SetAutocastDtype(c10::DeviceType device, c10::ScalarType dtype);

// One device type's autocast switch and dtype, to save and restore around a
// region (activation checkpointing's recomputation, the bf16 interceptor).
struct AutocastState {
  bool enabled = false;
  c10::ScalarType dtype = c10::ScalarType::BFloat16;
};
AutocastState GetAutocastState(c10::DeviceType device);
void SetAutocastState(c10::DeviceType device, const AutocastState& state);

// Base for a c10::Allocator written once for every LibTorch: derive from it and
// implement Allocate() instead of c10::Allocator::allocate().
//
// LibTorch 2.3 dropped the const from c10::Allocator::allocate() and added a
// pure virtual copy_data() (used by Storage copies); 1.13 has the const and no
// copy_data. This class declares whichever allocate() the compiled-against
// LibTorch has and forwards it to Allocate(); copy_data() is a memcpy, which
// is right for any allocator handing out plain host memory.
class AllocatorBase : public c10::Allocator {
 public:
  // Returns `nbytes` of memory; called by LibTorch from any thread.
  virtual c10::DataPtr Allocate(size_t nbytes) const = 0;

#if STRATA_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(size_t nbytes) override { return Allocate(nbytes); }
  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t nbytes) const override {
    return Allocate(nbytes);
  }
#endif
};

// Asks a c10d::TCPStoreOptions for the classic socket backend.
//
// LibTorch 2.2 added a libuv TCPStore backend (TCPStoreOptions::useLibUV) and
// 2.4 made it the default; a LibTorch built without libuv (Debian's) then
// fails every TCPStore ("use_libuv was requested but PyTorch was build without
// libuv support"). The classic backend is the one 1.13 has and serves
// Strata's world sizes; before 2.2 this does nothing. A template, detecting the
// field, so that this header needs no c10d include.
template <typename TcpStoreOptions>
void UseClassicTcpStoreBackend(TcpStoreOptions& options);

// Implementation details follow.
namespace internal {
template <typename T, typename = void>
struct HasUseLibUV : std::false_type {};
template <typename T>
struct HasUseLibUV<T, std::void_t<decltype(std::declval<T&>().useLibUV)>>
    : std::true_type {};
}  // namespace internal

template <typename TcpStoreOptions>
void UseClassicTcpStoreBackend(TcpStoreOptions& options) {
  if constexpr (internal::HasUseLibUV<TcpStoreOptions>::value) {
    options.useLibUV = false;
  }
}

}  // namespace strata::torch_compat

#endif  // STRATA_BASE_TORCH_COMPAT_H_
