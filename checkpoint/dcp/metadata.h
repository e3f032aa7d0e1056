// The `.metadata` file of a torch.distributed.checkpoint (DCP) directory,
// as PyTorch's FileSystemWriter writes it (tested: PyTorch 2.6): a pickled
// torch.distributed.checkpoint.metadata.Metadata whose
//
//   state_dict_metadata maps each flattened key ("model.layers.0.attention.
//     wq.weight"; nested dicts joined with ".") to a TensorStorageMetadata
//     (TensorProperties: dtype, strided layout; the global torch.Size; the
//     chunks, each ChunkStorageMetadata(offsets, sizes): a box of the
//     global tensor) or a BytesStorageMetadata (any other value, itself
//     torch.save'd);
//   storage_data maps MetadataIndex(fqn, offset = the chunk's offsets, or
//     none for bytes) to _StorageInfo(relative_path, offset, length): the
//     bytes of one item in one `__<rank>_<n>.distcp` file. Each item is a
//     whole torch.save archive (a zip) of the chunk as a contiguous tensor,
//     or of the value.
//
// planner_data and storage_meta are not used. The metadata has no version
// number up to PyTorch 2.6; later releases write a `version` field (and
// may transform items): those are refused by name rather than guessed at.
#ifndef STRATA_CHECKPOINT_DCP_METADATA_H_
#define STRATA_CHECKPOINT_DCP_METADATA_H_

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::checkpoint::dcp {

// The name of the metadata file in a DCP directory.
inline constexpr char kMetadataFile[] = ".metadata";

// The prefixes of the optimizer's keys in get_state_dict's layout
// ({"model": ..., "optim": {"state": ..., "param_groups": ...}}, flattened)
// and of Strata's own keys (writer.h has the whole layout).
inline constexpr char kOptimizerStatePrefix[] = "optim.state.";
inline constexpr char kParamGroupsPrefix[] = "optim.param_groups.";
inline constexpr char kStrataPrefix[] = "strata.";

// What the reader says it reads, in errors and `inspect`.
inline constexpr char kSupportedLayout[] =
    "the unversioned DCP layout of PyTorch 2.4 to 2.6 (tested: 2.6) with "
    "torch.save items";

// The dtypes a DCP checkpoint may hold here, as torch spells them without
// the "torch." prefix ("float32"): float64/32/16, bfloat16, int64/32/16/8,
// uint8 and bool. The one table the reader and the writer share.
// DcpDtypeName: null for any other dtype. DcpDtype: nullopt for any other
// name.
const char* DcpDtypeName(at::ScalarType dtype);
std::optional<at::ScalarType> DcpDtype(absl::string_view name);

// One item's bytes: `length` bytes at `offset` of `file` (a plain file name
// in the checkpoint directory).
struct StorageRange {
  std::string file;
  int64_t offset = 0;
  int64_t length = 0;
};

// A box of a tensor held by one item: `offsets` and `sizes` per dimension.
struct Chunk {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  StorageRange storage;
};

struct SavedTensor {
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;  // The global shape.
  std::vector<Chunk> chunks;   // Together they cover the tensor once.
};

struct Metadata {
  std::map<std::string, SavedTensor> tensors;
  std::map<std::string, StorageRange> values;  // BytesStorageMetadata items
};

// Decodes the pickled Metadata (`pickle`, the bytes of `where`, a
// `.metadata` file). Checks everything a reader relies on: the classes and
// their fields, dtypes (float64/32/16, bfloat16, int64/32/16/8, uint8,
// bool), strided layout, chunk boxes inside the tensor and their element
// counts adding up to the tensor's, one storage entry per chunk and value
// (plain file names, non-negative ranges). Errors (InvalidArgument) name
// `where`, the key and what is wrong; a `version` field or a transformed
// item (PyTorch > 2.6) is refused as such.
absl::StatusOr<Metadata> ParseMetadata(absl::string_view pickle,
                                       const std::string& where);

// Reads and decodes `<dir>/.metadata`. NotFound when there is none.
absl::StatusOr<Metadata> ReadMetadata(const std::string& dir);

// Whether `path` is a directory holding a `.metadata` file.
bool IsDcpCheckpoint(const std::string& path);

}  // namespace strata::checkpoint::dcp

#endif  // STRATA_CHECKPOINT_DCP_METADATA_H_
