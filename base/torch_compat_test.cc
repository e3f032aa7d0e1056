#include "base/torch_compat.h"

#include <ATen/Functions.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/version.h>

namespace strata::torch_compat {
namespace {

TEST(TorchCompatTest, TorchVersionIsTheHeadersVersion) {
  EXPECT_EQ(TorchVersion(), TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR);
  EXPECT_GE(TorchVersion(), 113);  // Strata needs LibTorch 1.13 or later.
}

TEST(TorchCompatTest, CpuAutocastIsOffByDefault) {
  EXPECT_FALSE(IsAutocastEnabled(c10::kCPU));
  EXPECT_FALSE(IsAutocastEnabled(c10::kCUDA));
}

// What the switch does, not only what it reads back: with CPU autocast on in
// bf16, an fp32 matmul runs (and returns) in bf16; off again, in fp32.
TEST(TorchCompatTest, EnablingCpuAutocastCastsMatmulsToItsDtype) {
  const at::Tensor a = at::ones({2, 3}, at::kFloat);
  const at::Tensor b = at::ones({3, 2}, at::kFloat);
  SetAutocastDtype(c10::kCPU, at::kBFloat16);
  SetAutocastEnabled(c10::kCPU, true);
  ASSERT_TRUE(IsAutocastEnabled(c10::kCPU));
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
  SetAutocastEnabled(c10::kCPU, false);
  at::autocast::clear_cache();
  EXPECT_FALSE(IsAutocastEnabled(c10::kCPU));
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kFloat);
}

TEST(TorchCompatTest, CpuAndCudaSwitchesAreIndependent) {
  SetAutocastEnabled(c10::kCUDA, true);
  EXPECT_TRUE(IsAutocastEnabled(c10::kCUDA));
  EXPECT_FALSE(IsAutocastEnabled(c10::kCPU));
  SetAutocastEnabled(c10::kCUDA, false);
  EXPECT_FALSE(IsAutocastEnabled(c10::kCUDA));
}

TEST(TorchCompatTest, StateRoundTripsPerDevice) {
  const AutocastState cpu_before = GetAutocastState(c10::kCPU);
  const AutocastState cuda_before = GetAutocastState(c10::kCUDA);
  SetAutocastState(c10::kCUDA, {true, at::kBFloat16});
  EXPECT_TRUE(GetAutocastState(c10::kCUDA).enabled);
  EXPECT_EQ(AutocastDtype(c10::kCUDA), at::kBFloat16);
  SetAutocastState(c10::kCUDA, cuda_before);
  EXPECT_EQ(GetAutocastState(c10::kCUDA).enabled, cuda_before.enabled);
  EXPECT_EQ(AutocastDtype(c10::kCUDA), cuda_before.dtype);
  EXPECT_EQ(GetAutocastState(c10::kCPU).enabled, cpu_before.enabled);
  EXPECT_EQ(AutocastDtype(c10::kCPU), cpu_before.dtype);
}

// Counts Allocate() calls and hands out plain host memory.
class CountingAllocator final : public AllocatorBase {
 public:
  c10::DataPtr Allocate(size_t nbytes) const override {
    ++calls_;
    void* data = ::operator new(nbytes);
    return c10::DataPtr(data, data, &Free, c10::Device(c10::kCPU));
  }
  int calls() const { return calls_; }

 private:
  static void Free(void* data) { ::operator delete(data); }
  mutable int calls_ = 0;
};

// LibTorch calls c10::Allocator::allocate() (const before 2.3, not after);
// either way it must reach Allocate().
TEST(TorchCompatTest, AllocatorBaseForwardsAllocateToAllocate) {
  CountingAllocator counting;
  c10::Allocator& as_c10 = counting;
  c10::DataPtr block = as_c10.allocate(64);
  ASSERT_NE(block.get(), nullptr);
  EXPECT_EQ(counting.calls(), 1);
  static_cast<char*>(block.get())[63] = 7;  // The whole block is writable.
  EXPECT_EQ(static_cast<char*>(block.get())[63], 7);
}

struct OptionsWithLibUV {
  bool useLibUV = true;
};
struct OptionsWithoutLibUV {
  int port = 0;
};

TEST(TorchCompatTest, ClassicTcpStoreBackendTurnsLibUVOff) {
  OptionsWithLibUV options;
  UseClassicTcpStoreBackend(options);
  EXPECT_FALSE(options.useLibUV);
}

TEST(TorchCompatTest, ClassicTcpStoreBackendLeavesOptionsWithoutLibUV) {
  OptionsWithoutLibUV options;
  UseClassicTcpStoreBackend(options);  // Compiles, and changes nothing.
  EXPECT_EQ(options.port, 0);
}

TEST(TorchCompatDeathTest, OtherDeviceTypesAreRejected) {
  EXPECT_DEATH(IsAutocastEnabled(c10::kMeta), "only handled for CPU and CUDA");
}

}  // namespace
}  // namespace strata::torch_compat
