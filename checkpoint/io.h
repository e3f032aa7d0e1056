// File I/O for checkpoints: whole-buffer pwrite/pread with errors that name
// the file and byte range, fsync of files and directories, atomic
// replacement of a file, and the staged-directory protocol that makes a
// directory checkpoint appear all at once.
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

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::checkpoint {

// A file open for writing (created or truncated), written at increasing
// offsets. Owns its descriptor (closed by the destructor).
class FileWriter {
 public:
  static absl::StatusOr<FileWriter> Create(const std::string& path);
  FileWriter(FileWriter&& other) noexcept;
  FileWriter& operator=(FileWriter&& other) = delete;
  ~FileWriter();

  // Appends `size` bytes; returns the offset they were written at.
  absl::StatusOr<int64_t> Append(const void* data, size_t size);
  // fsync, then close; errors name the file.
  absl::Status SyncAndClose();
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  FileWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Reads exactly `size` bytes at `offset` of the open file `fd` (named `path`
// in errors). DataLoss "truncated" naming the file, its size and the range
// when the file ends early.
absl::Status PreadAll(int fd, const std::string& path, void* data, size_t size,
                      int64_t offset);

// fsync of a file or directory.
absl::Status FsyncPath(const std::string& path);

// Writes `bytes` to `path` atomically: a temporary file beside it, fsync,
// rename over `path`, fsync of the directory.
absl::Status WriteFileAtomic(const std::string& path, const std::string& bytes);

// The whole file. NotFound / InvalidArgument (a directory) naming it.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

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
