// Reading PyTorch files (Python's torch.save, zip format, and LibTorch's
// torch::pickle_save) into IValues.
//
// LibTorch 1.13's torch::pickle_load cannot read the most common such file,
// `torch.save(model.state_dict(), path)`: a state dict is a
// collections.OrderedDict, which its unpickler turns into None. ReadTorchFile
// interprets the pickle itself (the opcode subset torch.save emits, pickle
// protocols 2 to 4) and loads the tensors from the archive's records.
#ifndef STRATA_MODELS_TORCH_FILE_H_
#define STRATA_MODELS_TORCH_FILE_H_

#include <ATen/core/ivalue.h>

#include <string>

#include "absl/status/statusor.h"

namespace strata::models {

// Reads the object saved in `path`. Supported: dict and
// collections.OrderedDict (as a generic dict; an OrderedDict's attributes,
// such as a state dict's `_metadata`, are dropped), list, tuple, str, int,
// float, bool, None, torch.device, torch.Size (as a tuple), tensors of the
// usual dtypes (on CPU whatever device they were saved from; tensors that
// shared a storage in the file share it again) and nn.Parameter (as its
// tensor). Errors (InvalidArgument unless said otherwise), all naming
// `path`: no such file (NotFound), a directory, unreadable
// (PermissionDenied), not a PyTorch zip file (e.g. the legacy pre-1.6
// format or a TorchScript archive), or content outside the subset above
// (naming the Python type or the pickle opcode).
absl::StatusOr<c10::IValue> ReadTorchFile(const std::string& path);

}  // namespace strata::models

#endif  // STRATA_MODELS_TORCH_FILE_H_
