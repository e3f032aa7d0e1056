// The pickle interpreter behind ReadTorchFile (torch_file.h): turns the
// data.pkl record of a PyTorch file into an IValue, for the opcode subset
// that torch.save (pickle protocols 2 to 4) and torch::pickle_save emit.
//
// It knows PyTorch's pickle conventions (tensors rebuilt with
// torch._utils._rebuild_tensor_v2 over storages named by persistent ids,
// collections.OrderedDict, nn.Parameter, torch.device, torch.Size) but not
// where the storages' bytes live: the caller's StorageLoader fetches them
// (from a zip archive's "data/<key>" records, or from memory).
#ifndef STRATA_SERIALIZATION_PICKLE_READER_H_
#define STRATA_SERIALIZATION_PICKLE_READER_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::serialization {

// Returns storage `key` (a persistent id's key, e.g. "0") as a 1-D tensor of
// `numel` elements of `dtype`. Called at most once per key, never
// for an empty storage. Its error is reported with its code, with `where`
// and the pickle position added to its message.
using StorageLoader = std::function<absl::StatusOr<at::Tensor>(
    const std::string& key, at::ScalarType dtype, int64_t numel)>;

// The deepest nesting of containers (dicts, lists, tuples) ReadPickle
// accepts: a container holding only scalars and tensors is 1 deep. Deeper
// pickles, and self-containing (cyclic) ones, are rejected while they are
// read, so no value too deep to destroy without overflowing the stack (IValue
// destruction recurses) is ever returned. torch.save of a state dict nests
// fewer than 10 levels.
inline constexpr int kMaxPickleNesting = 1000;

// Interprets `pickle` (borrowed for the call). Values: dict and
// collections.OrderedDict (as a generic dict; an OrderedDict's attributes,
// such as a state dict's `_metadata`, are dropped), list, tuple, str, int,
// float, bool, None, torch.device, torch.Size (as a tuple), tensors (views
// of their storage; tensors naming the same storage share it) and
// nn.Parameter (as its tensor). Errors (InvalidArgument) start with
// "<where>: " and give the pickle byte position: truncated or malformed
// pickles, an unsupported opcode, protocol or Python object (named),
// nesting deeper than kMaxPickleNesting, or a container that contains
// itself. Any input gives a value or an error: memory used is bounded by a
// small multiple of the pickle's size plus what `load_storage` returns.
absl::StatusOr<c10::IValue> ReadPickle(absl::string_view pickle,
                                       const std::string& where,
                                       const StorageLoader& load_storage);

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_PICKLE_READER_H_
