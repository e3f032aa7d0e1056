// POSIX file I/O with errors that name the file: errno converted to a status
// in one place, whole-buffer pwrite/pread, fsync of files and directories,
// and atomic replacement of a file (a temporary file beside it, fsync, rename,
// fsync of the directory), streamed or from one buffer. Every package that
// writes a file it must not leave half-written (model.pt, token files,
// checkpoint metadata) uses AtomicFileWriter or WriteFileAtomic.
#ifndef STRATA_BASE_FILE_IO_H_
#define STRATA_BASE_FILE_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

// "<message>: <strerror(error_number)>" with a code from the errno value:
// NotFound (ENOENT, ENOTDIR), PermissionDenied (EACCES, EPERM),
// ResourceExhausted (ENOSPC, EDQUOT), Internal otherwise.
absl::Status ErrnoStatus(int error_number, absl::string_view message);

// "<dir>" of "<dir>/<name>"; "." for a bare name.
std::string ParentDir(const std::string& path);

// A file open for writing (created or truncated), written at increasing
// offsets. Owns its descriptor (closed by the destructor). Movable, not
// copyable.
class FileWriter {
 public:
  static absl::StatusOr<FileWriter> Create(const std::string& path);
  FileWriter(FileWriter&& other) noexcept;
  FileWriter& operator=(FileWriter&& other) = delete;
  FileWriter(const FileWriter&) = delete;
  ~FileWriter();

  // Appends `size` bytes; returns the offset they were written at.
  absl::StatusOr<int64_t> Append(const void* data, size_t size);
  // fsync, then close; errors name the file. Call once.
  absl::Status SyncAndClose();
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  FileWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Streams a file that appears at `path` all at once: bytes go to a temporary
// file beside it (unique per process and writer); Commit() fsyncs it, renames
// it over `path` and fsyncs the directory. Destroyed without a successful
// Commit(), it removes the temporary file and leaves `path` as it was.
class AtomicFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>> Create(
      const std::string& path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  absl::Status Append(const void* data, size_t size);
  // Call once, after the last Append.
  absl::Status Commit();
  const std::string& path() const { return path_; }

 private:
  AtomicFileWriter(std::string path, std::string temp_path, FileWriter writer);
  std::string path_;
  std::string temp_path_;
  FileWriter writer_;
  bool closed_ = false;
  bool committed_ = false;
};

// Writes `bytes` to `path` atomically (AtomicFileWriter).
absl::Status WriteFileAtomic(const std::string& path, absl::string_view bytes);

// Reads exactly `size` bytes at `offset` of the open file `fd` (named `path`
// in errors). DataLoss "truncated" naming the file, its size and the range
// when the file ends early.
absl::Status PreadAll(int fd, const std::string& path, void* data, size_t size,
                      int64_t offset);

// fsync of a file or directory.
absl::Status FsyncPath(const std::string& path);

// The whole file. NotFound / InvalidArgument (a directory) naming it.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace strata

#endif  // STRATA_BASE_FILE_IO_H_
