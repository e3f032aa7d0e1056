#include "strategies/autocast.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include "base/torch_compat.h"

namespace strata::strategies {
namespace {

// A unit whose forward is one matmul of fp32 tensors.
at::Tensor MatmulForward(const at::Tensor& input) {
  return at::matmul(input, at::ones({4, 3}, at::kFloat));
}

TEST(AutocastInterceptorTest, MatmulInsideRunsInBf16) {
  AutocastInterceptor interceptor;
  const at::Tensor out = interceptor.Run(
      models::UnitInfo{}, at::ones({2, 4}, at::kFloat), MatmulForward);
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
}

TEST(AutocastInterceptorTest, MatmulOutsideStaysFp32) {
  AutocastInterceptor interceptor;
  interceptor.Run(models::UnitInfo{}, at::ones({2, 4}, at::kFloat),
                  MatmulForward);
  EXPECT_EQ(MatmulForward(at::ones({2, 4}, at::kFloat)).scalar_type(),
            at::kFloat);
}

TEST(AutocastInterceptorTest, RestoresDisabledAutocast) {
  ASSERT_FALSE(torch_compat::IsAutocastEnabled(c10::kCPU));
  AutocastInterceptor interceptor;
  interceptor.Run(models::UnitInfo{}, at::ones({2, 4}, at::kFloat),
                  MatmulForward);
  EXPECT_FALSE(torch_compat::IsAutocastEnabled(c10::kCPU));
}

TEST(AutocastInterceptorTest, RestoresEnabledAutocast) {
  const at::ScalarType default_dtype = torch_compat::AutocastDtype(c10::kCPU);
  torch_compat::SetAutocastEnabled(c10::kCPU, true);
  AutocastInterceptor interceptor;
  bool enabled_inside = false;
  interceptor.Run(models::UnitInfo{}, at::ones({2, 4}, at::kFloat),
                  [&](const at::Tensor& input) {
                    enabled_inside = torch_compat::IsAutocastEnabled(c10::kCPU);
                    return MatmulForward(input);
                  });
  const bool enabled_after = torch_compat::IsAutocastEnabled(c10::kCPU);
  const at::ScalarType dtype_after = torch_compat::AutocastDtype(c10::kCPU);
  torch_compat::SetAutocastEnabled(c10::kCPU, false);
  EXPECT_TRUE(enabled_inside);
  EXPECT_TRUE(enabled_after);
  // CPU autocast accepts only bf16 in LibTorch 1.13, so the dtype cannot
  // be changed beforehand; it must at least come back unchanged.
  EXPECT_EQ(dtype_after, default_dtype);
}

}  // namespace
}  // namespace strata::strategies
