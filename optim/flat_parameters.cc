#include "optim/flat_parameters.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/ScalarType.h>
#include <glog/logging.h>

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/shape.h"

namespace strata::optim {
namespace {

// Checks one parameter on its own; `name` is already quoted.
absl::Status CheckTensor(const std::string& name, const at::Tensor& t) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter ", name, " is an undefined tensor"));
  }
  if (!t.device().is_cpu() && !t.device().is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter ", name, " must be on the CPU or a CUDA device, got ",
        t.device().str()));
  }
  if (t.layout() != at::kStrided) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter ", name, " must be a dense (strided) tensor, got layout ",
        c10::toString(t.layout())));
  }
  if (!at::isFloatingType(t.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter ", name, " must have a floating dtype, got ",
                     c10::toString(t.scalar_type())));
  }
  if (!t.is_leaf()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter ", name,
        " is not a leaf tensor (it was computed from other tensors); pass "
        "the module's parameters"));
  }
  const at::Tensor& grad = t.grad();
  if (grad.defined() && grad.sizes() != t.sizes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter ", name, " has a .grad of shape ", ShapeString(grad.sizes()),
        ", expected its shape ", ShapeString(t.sizes())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FlatParameters>> FlatParameters::Create(
    std::vector<NamedParameter> params, int64_t align_elems,
    at::ScalarType dtype) {
  if (params.empty()) {
    return absl::InvalidArgumentError(
        "FlatParameters needs at least one parameter, got none");
  }
  if (align_elems < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FlatParameters align_elems must be >= 1, got ", align_elems));
  }
  if (!at::isFloatingType(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("FlatParameters dtype must be a floating type, got ",
                     c10::toString(dtype)));
  }

  std::set<std::string> names;
  std::map<const c10::StorageImpl*, std::string> storages;
  const at::ScalarType param_dtype =
      params[0].tensor.defined() ? params[0].tensor.scalar_type() : dtype;
  int64_t numel = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const NamedParameter& p = params[i];
    if (p.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter #", i, " has an empty name"));
    }
    const std::string name = absl::StrCat("'", p.name, "'");
    if (!names.insert(p.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", name, " is given twice"));
    }
    if (absl::Status s = CheckTensor(name, p.tensor); !s.ok()) return s;
    if (p.tensor.device() != params[0].tensor.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", name, " is on ", p.tensor.device().str(),
          " but parameter '", params[0].name, "' is on ",
          params[0].tensor.device().str(),
          ": all parameters must be on one device (move the model first)"));
    }
    if (p.tensor.scalar_type() != param_dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", name, " has dtype ",
          c10::toString(p.tensor.scalar_type()), " but parameter '",
          params[0].name, "' has ", c10::toString(param_dtype),
          ": all parameters must have the same dtype"));
    }
    const c10::StorageImpl* storage = p.tensor.storage().unsafeGetStorageImpl();
    auto [it, inserted] = storages.emplace(storage, p.name);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", name, " shares storage with parameter '",
                       it->second, "': tied weights must be passed once"));
    }
    numel += p.tensor.numel();
  }

  const int64_t padded_numel =
      (numel + align_elems - 1) / align_elems * align_elems;
  auto flat = std::unique_ptr<FlatParameters>(new FlatParameters());
  flat->numel_ = numel;
  // The buffers live where the parameters are (CPU or one CUDA device).
  const at::TensorOptions options =
      at::TensorOptions().dtype(dtype).device(params[0].tensor.device());
  at::NoGradGuard no_grad;
  flat->params_ = at::empty({padded_numel}, options);
  flat->params_.narrow(0, numel, padded_numel - numel).zero_();
  flat->grads_ = at::zeros({padded_numel}, options);

  // Copy everything first: parameters change only once nothing can fail.
  int64_t offset = 0;
  for (NamedParameter& p : params) {
    Entry entry;
    entry.name = std::move(p.name);
    entry.offset = offset;
    entry.shape = p.tensor.sizes().vec();
    entry.numel = p.tensor.numel();
    entry.requires_grad = p.tensor.requires_grad();
    flat->params_.narrow(0, offset, entry.numel)
        .view(entry.shape)
        .copy_(p.tensor.detach());
    if (entry.requires_grad && p.tensor.grad().defined()) {
      flat->grads_.narrow(0, offset, entry.numel)
          .view(entry.shape)
          .copy_(p.tensor.grad());
    }
    offset += entry.numel;
    flat->entries_.push_back(std::move(entry));
    flat->tensors_.push_back(std::move(p.tensor));
  }
  CHECK_EQ(offset, numel);

  for (size_t i = 0; i < flat->entries_.size(); ++i) {
    const Entry& e = flat->entries_[i];
    at::Tensor& t = flat->tensors_[i];
    t.set_data(flat->params_.narrow(0, e.offset, e.numel).view(e.shape));
    if (e.requires_grad) {
      t.mutable_grad() =
          flat->grads_.narrow(0, e.offset, e.numel).view(e.shape);
    }
  }
  return flat;
}

void FlatParameters::ZeroGrad() { grads_.zero_(); }

absl::Status FlatParameters::CheckGradViews() const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!e.requires_grad) continue;
    const at::Tensor& grad = tensors_[i].grad();
    if (!grad.defined()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parameter '", e.name,
          "' has no .grad: it was reset (e.g. by "
          "Module::zero_grad(/*set_to_none=*/true)), so the flat gradient "
          "buffer no longer receives its gradient; use "
          "FlatParameters::ZeroGrad() to zero gradients"));
    }
    const bool is_view =
        grad.is_alias_of(grads_) &&
        grad.storage_offset() == grads_.storage_offset() + e.offset &&
        grad.scalar_type() == grads_.scalar_type() &&
        grad.sizes() == at::IntArrayRef(e.shape) && grad.is_contiguous();
    if (!is_view) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parameter '", e.name,
          "' has a .grad that is not its view of the flat gradient buffer "
          "(offset ",
          e.offset, ", shape ", ShapeString(e.shape),
          "): it was replaced, so the flat gradient buffer no longer "
          "receives its gradient"));
    }
  }
  return absl::OkStatus();
}

std::vector<ParamRange> FlatParameters::MatrixDecayRanges(
    double weight_decay) const {
  std::vector<RangeParameter> params;
  for (const Entry& e : entries()) {
    params.push_back({e.offset, e.numel, static_cast<int64_t>(e.shape.size()),
                      e.requires_grad});
  }
  return DecayRanges(params, weight_decay);
}

}  // namespace strata::optim
