// FlatParameters: a model's parameters as views into one contiguous buffer.
//
// The flat-parameter mechanism every strategy reuses (docs/ARCHITECTURE.md,
// "Flat parameters"). Create copies the parameters' values into one flat
// buffer, in the given order, padded with zeros to a multiple of `align_elems`
// (so that ZeRO / FSDP can shard it evenly across ranks), and makes every
// parameter a view into it (Tensor::set_data), so module code keeps working
// unchanged. It also allocates a flat gradient buffer of the same size and
// sets each requires_grad parameter's .grad to its view of it: autograd's
// AccumulateGrad then does `grad += new_grad` in place, so a backward pass
// leaves every gradient in grads() with no copy, ready for an all-reduce or
// reduce-scatter and for an optimizer over the flat buffers (optimizer.h).
//
// Keep the .grad views alive: never set .grad to undefined
// (Module::zero_grad(/*set_to_none=*/true), Tensor::mutable_grad().reset())
// or replace it. Autograd would then allocate a fresh gradient tensor and the
// flat buffer would silently stop receiving that parameter's gradients. Use
// ZeroGrad() (or Module::zero_grad() with its default set_to_none = false,
// which zeroes in place); CheckGradViews() detects a broken view.
//
// Threading: not thread-safe; the buffers are read and written by the
// training loop and autograd's backward pass.
#ifndef STRATA_OPTIM_FLAT_PARAMETERS_H_
#define STRATA_OPTIM_FLAT_PARAMETERS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "optim/optimizer.h"

namespace strata::optim {

// A module parameter (a leaf Variable), e.g. from Module::named_parameters().
struct NamedParameter {
  std::string name;
  at::Tensor tensor;
};

class FlatParameters {
 public:
  // Where a parameter lives in the flat buffers.
  struct Entry {
    std::string name;
    int64_t offset = 0;  // In elements, into params() and grads().
    std::vector<int64_t> shape;
    int64_t numel = 0;
    bool requires_grad = false;
  };

  // Flattens `params` (see above) into buffers of `dtype` (a floating type);
  // the parameters' values are converted to it. A parameter whose .grad is
  // already defined has its gradient copied into the flat gradient buffer;
  // the rest of the gradient buffer (padding included) starts at zero.
  //
  // Errors (nothing is changed): an empty list, an empty or duplicate name,
  // an undefined, non-CPU, non-strided, non-floating or non-leaf tensor, a
  // tensor that shares storage with another one (tied weights must be passed
  // once), parameters of different dtypes, a .grad whose shape differs from
  // its parameter's, align_elems < 1, a non-floating `dtype`.
  static absl::StatusOr<std::unique_ptr<FlatParameters>> Create(
      std::vector<NamedParameter> params, int64_t align_elems = 1,
      at::ScalarType dtype = at::kFloat);

  FlatParameters(const FlatParameters&) = delete;
  FlatParameters& operator=(const FlatParameters&) = delete;

  // The flat parameter buffer: 1-D, padded_numel() elements; parameters are
  // views into it. Writing it (e.g. an optimizer step, an all-gather) updates
  // the parameters.
  at::Tensor params() const { return params_; }
  // The flat gradient buffer, same size and dtype as params().
  at::Tensor grads() const { return grads_; }

  // Sum of the entries' numel (without the padding).
  int64_t numel() const { return numel_; }
  // numel() rounded up to a multiple of align_elems.
  int64_t padded_numel() const { return params_.numel(); }
  // One entry per parameter, in the order given to Create.
  const std::vector<Entry>& entries() const { return entries_; }
  // The parameter of entries()[i] (the caller's Variable, now a view).
  const at::Tensor& parameter(size_t i) const { return tensors_.at(i); }

  // Optimizer ranges over entries() (DecayRanges): `weight_decay` for
  // matrices and embeddings (2+ dims), none for biases and norm gains,
  // frozen ranges for parameters with requires_grad false.
  std::vector<ParamRange> MatrixDecayRanges(double weight_decay) const;

  // Zeroes the gradient buffer in place; the .grad views stay valid.
  void ZeroGrad();

  // OK iff every requires_grad parameter's .grad is still the view of grads()
  // at its offset; otherwise an error naming the first parameter whose .grad
  // was reset or replaced.
  absl::Status CheckGradViews() const;

 private:
  FlatParameters() = default;

  at::Tensor params_;
  at::Tensor grads_;
  int64_t numel_ = 0;
  std::vector<Entry> entries_;
  std::vector<at::Tensor> tensors_;
};

}  // namespace strata::optim

#endif  // STRATA_OPTIM_FLAT_PARAMETERS_H_
