// The metadata file of directory checkpoints (sharded and local formats):
// `<dir>/metadata.pb`, a proto::Metadata (metadata.proto) behind a header
// with a magic string, a format version and the CRC-32C of the payload, and
// conversions between proto and Contents.
#ifndef STRATA_CHECKPOINT_METADATA_H_
#define STRATA_CHECKPOINT_METADATA_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "checkpoint/metadata.pb.h"

namespace strata::checkpoint {

inline constexpr char kMetadataFile[] = "metadata.pb";
inline constexpr char kShardedFormat[] = "strata.sharded";
inline constexpr char kLocalFormat[] = "strata.local";

// Writes `<dir>/metadata.pb` and fsyncs it.
absl::Status WriteMetadataFile(const std::string& dir,
                               const proto::Metadata& metadata);

// Reads and checks `<dir>/metadata.pb`. Errors name the path:
// NotFound "... is not a Strata checkpoint" (no such directory, or no
// metadata file in it), InvalidArgument for a file without the header,
// DataLoss for a checksum mismatch or a truncated payload.
absl::StatusOr<proto::Metadata> ReadMetadataFile(const std::string& dir);

void ContentsToProto(const Contents& contents, proto::Metadata& metadata);
Contents ContentsFromProto(const proto::Metadata& metadata);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_METADATA_H_
