// The staged-directory protocol that makes a directory checkpoint appear all
// at once. (Plain file I/O — FileWriter, PreadAll, FsyncPath, WriteFileAtomic,
// ReadWholeFile — is base/file_io.h.)
//
// Staged directories. A checkpoint directory `dir` is written as
// `dir + ".tmp"` (StagingDir): rank 0 prepares it (PrepareStagingDir), every
// rank writes and fsyncs its files there, then rank 0 fsyncs the directory
// and renames it to `dir` (CommitStagingDir; an existing `dir` is swapped out
// atomically with renameat2(RENAME_EXCHANGE) and then removed), and fsyncs
// the parent. A crash at any point leaves either the previous `dir` or the
// new one, never a partial one; a stale ".tmp" is removed by the next save.
#ifndef STRATA_CHECKPOINT_IO_H_
#define STRATA_CHECKPOINT_IO_H_

#include <string>

#include "absl/status/status.h"

namespace strata::checkpoint {

std::string StagingDir(const std::string& dir);
// Rank 0 only: creates the parent of `dir` if needed, removes a stale
// staging directory and creates an empty one.
absl::Status PrepareStagingDir(const std::string& dir);
// Rank 0 only, after every rank's files there are synced: fsyncs the staging
// directory, moves it to `dir` (replacing an existing `dir`), fsyncs the
// parent.
absl::Status CommitStagingDir(const std::string& dir);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_IO_H_
