#include "strategies/mixed_precision.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <glog/logging.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/torch_compat.h"

namespace strata::strategies {

absl::Status CheckCpuComputeDtype(at::ScalarType dtype) {
  if (dtype == at::kFloat) return absl::OkStatus();
  const auto options = at::TensorOptions().dtype(dtype);
  const auto trainable = [&](at::IntArrayRef shape) {
    return at::randn(shape, options).set_requires_grad(true);
  };
  std::string op;
  const absl::Status status = StatusFromCall("probe", [&] {
    at::AutoGradMode grad_mode(true);
    const at::Tensor table = trainable({8, 4});
    const at::Tensor weight = trainable({4, 4});
    const at::Tensor gain = at::ones({4}, options).set_requires_grad(true);
    op = "embedding";
    at::Tensor x = at::embedding(table, at::arange(3, at::kLong));
    op = "layer_norm";
    x = at::layer_norm(x, {4}, gain, {});
    op = "linear (addmm)";
    x = at::linear(x, weight);
    op = "gelu";
    x = at::gelu(x);
    op = "log_softmax";
    x = at::log_softmax(x, -1);
    op = "backward";
    x.sum().backward();
  });
  if (status.ok()) return status;
  const int version = torch_compat::TorchVersion();
  return absl::FailedPreconditionError(
      absl::StrCat("this LibTorch (", version / 100, ".", version % 100,
                   ") cannot train in ", c10::toString(dtype),
                   " on the CPU: ", op, " failed: ", status.message()));
}

at::Tensor ConcatenateFp32(const std::vector<optim::NamedParameter>& params,
                           int64_t align_elems) {
  CHECK_GE(align_elems, 1);
  int64_t numel = 0;
  for (const auto& p : params) numel += p.tensor.numel();
  const int64_t padded = (numel + align_elems - 1) / align_elems * align_elems;
  at::NoGradGuard no_grad;
  // On the parameters' device (CPU or CUDA).
  const at::Device device =
      params.empty() ? at::Device(at::kCPU) : params[0].tensor.device();
  at::Tensor out =
      at::zeros({padded}, at::TensorOptions().dtype(at::kFloat).device(device));
  int64_t offset = 0;
  for (const auto& p : params) {
    out.narrow(0, offset, p.tensor.numel())
        .view(p.tensor.sizes())
        .copy_(p.tensor.detach());
    offset += p.tensor.numel();
  }
  return out;
}

void CastBuffers(models::UnitModel& model, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  for (auto& item : model.named_buffers()) {
    at::Tensor buffer = item.value();
    if (!buffer.is_floating_point() || buffer.scalar_type() == dtype) continue;
    buffer.set_data(buffer.to(dtype));
  }
}

void FoldGradients(const at::Tensor& low, const at::Tensor& fp32) {
  CHECK_EQ(low.numel(), fp32.numel());
  at::NoGradGuard no_grad;
  fp32.add_(low);
  low.zero_();
}

ReleasableBuffer::ReleasableBuffer(at::Tensor tensor, UnitBufferPool* pool)
    : tensor_(std::move(tensor)), pool_(pool) {
  CHECK(tensor_.is_contiguous());
  CHECK_EQ(tensor_.storage_offset(), 0);
  full_bytes_ = tensor_.nbytes();
  CHECK_EQ(static_cast<int64_t>(tensor_.storage().nbytes()), full_bytes_);
  if (pool_ != nullptr && allocated()) pool_->Track(full_bytes_);
}

bool ReleasableBuffer::allocated() const {
  return tensor_.defined() && tensor_.storage().data() != nullptr;
}

int64_t ReleasableBuffer::held_bytes() const {
  return allocated() ? full_bytes_ : 0;
}

void ReleasableBuffer::Release() {
  if (!allocated()) return;
  c10::StorageImpl* storage = tensor_.storage().unsafeGetStorageImpl();
  if (pool_ == nullptr) {
    storage->reset();
    return;
  }
  // As reset(), keeping the memory for the pool.
  pool_->Give(storage->set_data_ptr(c10::DataPtr(nullptr, tensor_.device())),
              full_bytes_);
  storage->set_nbytes(size_t{0});
}

void ReleasableBuffer::Allocate() {
  if (!tensor_.defined() || allocated()) return;
  c10::StorageImpl* storage = tensor_.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(pool_ != nullptr
                                   ? pool_->Take(full_bytes_, tensor_.device())
                                   : AllocateOn(tensor_.device(), full_bytes_));
  storage->set_nbytes(full_bytes_);
}

void ReleasableBuffer::AllocateZeroed() {
  if (!tensor_.defined() || allocated()) return;
  Allocate();
  at::NoGradGuard no_grad;
  tensor_.zero_();
}

}  // namespace strata::strategies
