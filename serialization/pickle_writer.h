// The pickle half of writing a PyTorch file: a value pickled as torch.save
// and torch::pickle_save do it (torch::jit::Pickler), with the tensors whose
// storages the pickle names. The zip container around it is torch_file.h's
// TorchArchiveWriter; ReadPickle (pickle_reader.h) reads the pickle back.
#ifndef STRATA_SERIALIZATION_PICKLE_WRITER_H_
#define STRATA_SERIALIZATION_PICKLE_WRITER_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::serialization {

struct Pickled {
  // The pickle (a PyTorch file's data.pkl record).
  std::string data;
  // The tensors whose storages the pickle names: storage i has the key
  // "<i>" (archive record "data/<i>"). Tensors sharing a storage share one
  // entry.
  std::vector<at::Tensor> tensors;
};

// Pickles `value` (dicts, lists, tuples, strings, numbers, bools, None and
// CPU tensors; what an IValue holds) as plain pickle containers: typed lists
// and dicts are written untyped, with no torch.jit globals, so that
// torch.load(weights_only=True) (PyTorch 2.6's default) reads the result; read
// back, lists are List[Any]. Errors (Internal) come from the
// pickler, e.g. for a value it cannot pickle.
absl::StatusOr<Pickled> Pickle(const c10::IValue& value);

// The bytes of `tensor`'s whole storage: what a PyTorch file's record for
// that storage holds. Borrows the tensor's memory (a CPU tensor).
absl::string_view StorageBytes(const at::Tensor& tensor);

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_PICKLE_WRITER_H_
