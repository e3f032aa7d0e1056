// The checkpoint formats (full.h, local.h, sharded.h, dcp/writer.h) as one
// enum, with the spelling of --ckpt_format and strata_ckpt's target format.
// Pure functions over no state, callable from any thread; no LibTorch, so the
// configuration layers (launch/config) name a format without depending on
// the formats themselves.
#ifndef STRATA_CHECKPOINT_FORMAT_H_
#define STRATA_CHECKPOINT_FORMAT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::checkpoint {

enum class Format {
  kFull,     // One PyTorch file written by rank 0.
  kLocal,    // One file per rank; the same world size and strategy to load.
  kSharded,  // A data file per rank plus metadata; loads under any world.
  kDcp,      // PyTorch's torch.distributed.checkpoint layout (dcp/writer.h).
};

// "full", "local", "sharded" or "dcp". Anything else is InvalidArgument naming
// `what` (a flag, "--ckpt_format", or a field) and the accepted spellings.
absl::StatusOr<Format> ParseFormat(absl::string_view name,
                                   absl::string_view what = "--ckpt_format");
// The spelling ParseFormat takes: ParseFormat(FormatName(f)) == f.
absl::string_view FormatName(Format format);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_FORMAT_H_
