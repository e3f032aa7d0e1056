// Reads tensors, or any element range of one, from a
// torch.distributed.checkpoint (DCP) directory (metadata.h has the layout),
// touching only the items (and, within an item, the bytes) the range
// needs: a rank loading its shard reads its shard's bytes, never the whole
// checkpoint.
#ifndef STRATA_CHECKPOINT_DCP_READER_H_
#define STRATA_CHECKPOINT_DCP_READER_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/dcp/metadata.h"

namespace strata::checkpoint::dcp {

class Reader {
 public:
  // Reads and checks `<dir>/.metadata` (ParseMetadata); data files are
  // opened as they are needed.
  static absl::StatusOr<std::unique_ptr<Reader>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const Metadata& metadata() const { return metadata_; }

  // Elements [begin, begin + out.numel()) of tensor `name` flattened
  // (row-major over its global shape) into `out`: a contiguous CPU tensor
  // of the checkpoint's dtype. Reads, of each chunk overlapping the range,
  // its item's zip directory and pickle and then: a chunk needed whole, its
  // data record whole with its zip CRC-32 verified; a chunk needed in part,
  // only the bytes from the first to the last element needed (DCP has no
  // checksum of a part of a record: those bytes are not verified). Errors
  // name the data file, the byte range and the key: NotFound for an
  // unknown key; InvalidArgument for a range outside the tensor or an
  // `out` of another dtype; DataLoss for an item that is not the chunk the
  // metadata describes (dtype, shape, layout), a corrupted or truncated
  // item, or elements no chunk holds. Thread-compatible; const.
  absl::Status ReadRange(const std::string& name, int64_t begin,
                         const at::Tensor& out) const;
  // The whole tensor, in its global shape (every chunk read whole and
  // verified).
  absl::StatusOr<at::Tensor> ReadTensor(const std::string& name) const;
  // A non-tensor value (a BytesStorageMetadata item: an int, float, str,
  // list or dict the state dict held, torch.save'd, or a tensor such as
  // Strata's bytes), read whole and verified, tensors in it read; what
  // serialization/pickle_reader.h reads.
  absl::StatusOr<c10::IValue> ReadValue(const std::string& name) const;

 private:
  Reader(std::string dir, Metadata metadata)
      : dir_(std::move(dir)), metadata_(std::move(metadata)) {}
  // NotFound for a key that is no tensor.
  absl::Status NoTensor(const std::string& name) const;

  const std::string dir_;
  const Metadata metadata_;
};

}  // namespace strata::checkpoint::dcp

#endif  // STRATA_CHECKPOINT_DCP_READER_H_
