// A strict reader of the zip container PyTorch files use (stored, i.e.
// uncompressed, entries; zip64 records as LibTorch's writer emits them),
// reading entries on demand from an open file and verifying each entry's
// CRC-32 as it is read.
//
// Open() cross-checks the whole container before any entry is read: the end
// of central directory record (and its zip64 twin and locator) must agree
// with each other and sit right after the central directory; every central
// directory entry must agree with its local header (name, flags, method,
// CRC-32, sizes; with a data descriptor, the descriptor after the data must
// carry them); entries must lie inside the file, before the central
// directory and without overlapping; names must be unique. Bytes that no
// reader uses (timestamps, version-made-by, attributes, extra-field padding,
// comments) are not checked.
#ifndef STRATA_SERIALIZATION_ZIP_READER_H_
#define STRATA_SERIALIZATION_ZIP_READER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::serialization {

// The zip (and gzip, PNG) CRC-32 of `size` bytes at `data`, continuing from
// `crc` (0 to start).
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0);

class ZipReader {
 public:
  struct Entry {
    std::string name;
    int64_t data_offset = 0;  // Of the entry's bytes in the file.
    int64_t size = 0;         // Bytes (stored: compressed == uncompressed).
    uint32_t crc32 = 0;       // As recorded by the central directory.
  };

  // Opens `path` and checks the container (see the file comment). Errors
  // name the file: NotFound, InvalidArgument for a directory, DataLoss for a
  // malformed or inconsistent container (saying which record and field).
  static absl::StatusOr<std::unique_ptr<ZipReader>> Open(
      const std::string& path);
  // As Open, for an archive that is the `size` bytes at `offset` of `path`
  // (e.g. one item of a torch.distributed.checkpoint .distcp file, each a
  // whole torch.save archive). Entry offsets are relative to the archive;
  // path() names the file and the byte range. A range outside the file is
  // DataLoss.
  static absl::StatusOr<std::unique_ptr<ZipReader>> OpenRange(
      const std::string& path, int64_t offset, int64_t size);
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  const std::string& path() const { return path_; }
  // The archive's size (the range's for OpenRange).
  int64_t file_size() const { return file_size_; }
  // In central-directory order.
  const std::vector<Entry>& entries() const { return entries_; }
  // Null when there is no entry named `name`.
  const Entry* Find(absl::string_view name) const;

  // Reads entry `entry` (one of entries()) into `out`, which has room for
  // entry.size bytes, and verifies its CRC-32 (DataLoss naming the file and
  // entry on a mismatch). Thread-safe (pread).
  absl::Status Read(const Entry& entry, void* out) const;
  // Reads bytes [offset, offset + size) of entry `entry` into `out`,
  // without verifying anything: the CRC-32 covers the whole entry only. For
  // readers that need a part of a large entry and check it otherwise (or
  // accept that they cannot). InvalidArgument for a range outside the entry.
  absl::Status ReadPart(const Entry& entry, int64_t offset, int64_t size,
                        void* out) const;
  // The whole entry as a string, verified.
  absl::StatusOr<std::string> ReadString(const Entry& entry) const;
  // Verifies the CRC-32 of every entry, streaming each through a small
  // buffer.
  absl::Status VerifyAll() const;

 private:
  ZipReader(std::string path, std::string file_path, int fd, int64_t base,
            int64_t file_size)
      : path_(std::move(path)),
        file_path_(std::move(file_path)),
        fd_(fd),
        base_(base),
        file_size_(file_size) {}
  static absl::StatusOr<std::unique_ptr<ZipReader>> OpenImpl(
      const std::string& path, int64_t offset, int64_t range_size);
  // Reads `size` bytes at `offset` of the archive.
  absl::Status Pread(void* out, int64_t size, int64_t offset) const;
  absl::Status Parse();
  absl::Status ParseEntry(absl::string_view central, size_t* pos,
                          int64_t central_start);
  absl::Status CheckLocal(Entry& entry, int64_t local_offset,
                          uint16_t central_flags, int64_t* end);
  absl::Status Corrupt(absl::string_view what) const;

  const std::string path_;       // The file, and the range if not whole.
  const std::string file_path_;  // The file.
  const int fd_;
  const int64_t base_;  // Where the archive starts in the file.
  const int64_t file_size_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_ZIP_READER_H_
