#include "serialization/zip_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/escape.h"
#include "base/file_io.h"
#include "base/status.h"

namespace strata::serialization {
namespace {

constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kEnd64Signature = 0x06064b50;
constexpr uint32_t kLocator64Signature = 0x07064b50;
constexpr uint32_t kDescriptorSignature = 0x08074b50;
constexpr size_t kLocalSize = 30;
constexpr size_t kCentralSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kEnd64Size = 56;
constexpr size_t kLocator64Size = 20;
constexpr uint16_t kFlagEncrypted = 1;
constexpr uint16_t kFlagDescriptor = 8;
constexpr uint32_t kMax32 = 0xFFFFFFFF;

uint16_t U16(absl::string_view s, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(s[at]) |
                               static_cast<uint8_t>(s[at + 1]) << 8);
}
uint32_t U32(absl::string_view s, size_t at) {
  return static_cast<uint32_t>(U16(s, at)) |
         static_cast<uint32_t>(U16(s, at + 2)) << 16;
}
uint64_t U64(absl::string_view s, size_t at) {
  return static_cast<uint64_t>(U32(s, at)) |
         static_cast<uint64_t>(U32(s, at + 4)) << 32;
}

// The zip64 extended-information field of `extra`: replaces each of
// `fields` that is 0xFFFFFFFF by the next 8-byte value, in order. False when
// such a value is missing.
bool ApplyZip64(absl::string_view extra, std::vector<uint64_t*> fields) {
  size_t pos = 0;
  while (pos + 4 <= extra.size()) {
    const uint16_t id = U16(extra, pos);
    const uint16_t size = U16(extra, pos + 2);
    if (pos + 4 + size > extra.size()) break;
    if (id == 1) {
      size_t at = pos + 4;
      for (uint64_t* field : fields) {
        if (*field != kMax32) continue;
        if (at + 8 > pos + 4 + size) return false;
        *field = U64(extra, at);
        at += 8;
      }
      return true;
    }
    pos += 4 + size;
  }
  for (uint64_t* field : fields) {
    if (*field == kMax32) return false;
  }
  return true;
}

}  // namespace

uint32_t Crc32(const void* data, size_t size, uint32_t crc) {
  return static_cast<uint32_t>(
      crc32_z(crc, static_cast<const Bytef*>(data), size));
}

ZipReader::~ZipReader() { close(fd_); }

absl::Status ZipReader::Pread(void* out, int64_t size, int64_t offset) const {
  return PreadAll(fd_, file_path_, out, size, base_ + offset);
}

absl::Status ZipReader::Corrupt(absl::string_view what) const {
  return absl::DataLossError(absl::StrCat(
      path_, ": not a valid PyTorch zip file (corrupted?): ", what));
}

absl::StatusOr<std::unique_ptr<ZipReader>> ZipReader::OpenImpl(
    const std::string& path, int64_t offset, int64_t range_size) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return ErrnoStatus(error, absl::StrCat(path, ": cannot open"));
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, S_ISDIR(info.st_mode) ? ": is a directory, not a PyTorch file"
                                    : ": is not a regular file"));
  }
  if (range_size >= 0 && (offset < 0 || offset > info.st_size ||
                          range_size > info.st_size - offset)) {
    close(fd);
    return absl::DataLossError(absl::StrCat(
        path, ": bytes [", offset, ", ", offset, " + ", range_size,
        ") lie outside the file of ", info.st_size,
        " bytes (truncated, or the index pointing here is corrupted?)"));
  }
  std::unique_ptr<ZipReader> reader(
      range_size < 0
          ? new ZipReader(path, path, fd, 0, info.st_size)
          : new ZipReader(absl::StrCat(path, " (bytes ", offset, "..",
                                       offset + range_size, ")"),
                          path, fd, offset, range_size));
  STRATA_RETURN_IF_ERROR(reader->Parse());
  return reader;
}

absl::StatusOr<std::unique_ptr<ZipReader>> ZipReader::Open(
    const std::string& path) {
  return OpenImpl(path, 0, -1);
}

absl::StatusOr<std::unique_ptr<ZipReader>> ZipReader::OpenRange(
    const std::string& path, int64_t offset, int64_t size) {
  if (size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": negative archive size ", size));
  }
  return OpenImpl(path, offset, size);
}

absl::Status ZipReader::ReadPart(const Entry& entry, int64_t offset,
                                 int64_t size, void* out) const {
  if (offset < 0 || size < 0 || offset > entry.size ||
      size > entry.size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": bytes [", offset, ", +", size, ") are outside entry '",
        EscapeBytes(entry.name), "' of ", entry.size, " bytes"));
  }
  return Pread(out, size, entry.data_offset + offset);
}

absl::Status ZipReader::Parse() {
  // The end of central directory record: the last one whose comment runs
  // exactly to the end of the file.
  const int64_t tail_size =
      std::min<int64_t>(file_size_, kEndSize + 0xFFFF + kLocator64Size);
  std::string tail(tail_size, '\0');
  STRATA_RETURN_IF_ERROR(
      Pread(tail.data(), tail.size(), file_size_ - tail_size));
  int64_t end_at = -1;  // In `tail`.
  for (int64_t i = tail_size - static_cast<int64_t>(kEndSize); i >= 0; --i) {
    if (U32(tail, i) == kEndSignature &&
        i + static_cast<int64_t>(kEndSize) + U16(tail, i + 20) == tail_size) {
      end_at = i;
      break;
    }
  }
  if (end_at < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_,
        ": not a PyTorch file (no zip end of central directory record; "
        "expected the zip format written by torch.save or "
        "torch::pickle_save; the legacy pre-1.6 format is not supported)"));
  }
  uint64_t count = U16(tail, end_at + 10);
  uint64_t central_size = U32(tail, end_at + 12);
  uint64_t central_offset = U32(tail, end_at + 16);
  if (U16(tail, end_at + 4) != 0 || U16(tail, end_at + 6) != 0 ||
      U16(tail, end_at + 8) != count) {
    return Corrupt("multi-disk archives are not supported");
  }
  int64_t central_end = file_size_ - tail_size + end_at;  // In the file.
  if (end_at >= static_cast<int64_t>(kLocator64Size) &&
      U32(tail, end_at - kLocator64Size) == kLocator64Signature) {
    const size_t locator = end_at - kLocator64Size;
    const uint64_t end64_offset = U64(tail, locator + 8);
    if (end64_offset + kEnd64Size !=
        static_cast<uint64_t>(file_size_ - tail_size + locator)) {
      return Corrupt("the zip64 locator does not point right before itself");
    }
    std::string end64(kEnd64Size, '\0');
    STRATA_RETURN_IF_ERROR(Pread(end64.data(), end64.size(), end64_offset));
    if (U32(end64, 0) != kEnd64Signature || U64(end64, 4) != kEnd64Size - 12) {
      return Corrupt("bad zip64 end of central directory record");
    }
    const uint64_t count64 = U64(end64, 32);
    const uint64_t size64 = U64(end64, 40);
    const uint64_t offset64 = U64(end64, 48);
    if (U64(end64, 24) != count64 || U32(end64, 16) != 0 ||
        U32(end64, 20) != 0 || (count != 0xFFFF && count != count64) ||
        (central_size != kMax32 && central_size != size64) ||
        (central_offset != kMax32 && central_offset != offset64)) {
      return Corrupt(
          "the zip64 end of central directory record disagrees with the end "
          "of central directory record");
    }
    count = count64;
    central_size = size64;
    central_offset = offset64;
    central_end = static_cast<int64_t>(end64_offset);
  }
  if (central_offset > static_cast<uint64_t>(central_end) ||
      central_offset + central_size != static_cast<uint64_t>(central_end)) {
    return Corrupt(absl::StrCat("the central directory (", central_size,
                                " bytes at offset ", central_offset,
                                ") does not end where its end record starts (",
                                central_end, ")"));
  }
  // Each entry takes at least kCentralSize bytes: caps the count.
  if (count > central_size / kCentralSize) {
    return Corrupt(absl::StrCat("the central directory of ", central_size,
                                " bytes cannot hold ", count, " entries"));
  }
  std::string central(central_size, '\0');
  STRATA_RETURN_IF_ERROR(Pread(central.data(), central.size(),
                               static_cast<int64_t>(central_offset)));
  size_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    STRATA_RETURN_IF_ERROR(
        ParseEntry(central, &pos, static_cast<int64_t>(central_offset)));
  }
  if (pos != central.size()) {
    return Corrupt(absl::StrCat("the central directory has ",
                                central.size() - pos,
                                " bytes after its last entry"));
  }
  return absl::OkStatus();
}

absl::Status ZipReader::ParseEntry(absl::string_view central, size_t* pos,
                                   int64_t central_start) {
  const size_t at = *pos;
  if (central.size() - at < kCentralSize ||
      U32(central, at) != kCentralSignature) {
    return Corrupt(absl::StrCat("bad central directory entry at offset ",
                                central_start + at));
  }
  const uint16_t flags = U16(central, at + 8);
  const uint16_t method = U16(central, at + 10);
  const uint32_t crc = U32(central, at + 16);
  uint64_t compressed = U32(central, at + 20);
  uint64_t size = U32(central, at + 24);
  const size_t name_size = U16(central, at + 28);
  const size_t extra_size = U16(central, at + 30);
  const size_t comment_size = U16(central, at + 32);
  uint64_t local_offset = U32(central, at + 42);
  if (central.size() - at - kCentralSize <
      name_size + extra_size + comment_size) {
    return Corrupt(absl::StrCat("central directory entry at offset ",
                                central_start + at, " overruns it"));
  }
  Entry entry;
  entry.name = std::string(central.substr(at + kCentralSize, name_size));
  const std::string quoted = absl::StrCat("'", EscapeBytes(entry.name), "'");
  if (!ApplyZip64(central.substr(at + kCentralSize + name_size, extra_size),
                  {&size, &compressed, &local_offset})) {
    return Corrupt(
        absl::StrCat("entry ", quoted, " lacks its zip64 sizes or offset"));
  }
  if ((flags & kFlagEncrypted) != 0 || method != 0 || compressed != size) {
    return Corrupt(absl::StrCat(
        "entry ", quoted,
        " is compressed or encrypted (PyTorch files store entries as is)"));
  }
  if (size > static_cast<uint64_t>(file_size_)) {
    return Corrupt(absl::StrCat("entry ", quoted, " claims ", size,
                                " bytes, more than the file"));
  }
  *pos = at + kCentralSize + name_size + extra_size + comment_size;
  entry.size = static_cast<int64_t>(size);
  entry.crc32 = crc;
  if (local_offset >= static_cast<uint64_t>(central_start)) {
    return Corrupt(
        absl::StrCat("entry ", quoted, " starts inside the central directory"));
  }
  int64_t end = 0;
  STRATA_RETURN_IF_ERROR(
      CheckLocal(entry, static_cast<int64_t>(local_offset), flags, &end));
  if (end > central_start) {
    return Corrupt(
        absl::StrCat("entry ", quoted, " runs into the central directory"));
  }
  // PyTorch writes entries in file order: each must start after the
  // previous one ends.
  if (index_.count(entry.name) > 0) {
    return Corrupt(absl::StrCat("entry ", quoted, " appears twice"));
  }
  if (!entries_.empty() && entries_.back().data_offset >= entry.data_offset) {
    return Corrupt(
        absl::StrCat("entry ", quoted, " is not after the previous entry"));
  }
  if (!entries_.empty() &&
      static_cast<uint64_t>(entries_.back().data_offset +
                            entries_.back().size) > local_offset) {
    return Corrupt(
        absl::StrCat("entry ", quoted, " overlaps the previous entry"));
  }
  index_.emplace(entry.name, entries_.size());
  entries_.push_back(std::move(entry));
  return absl::OkStatus();
}

absl::Status ZipReader::CheckLocal(Entry& entry, int64_t local_offset,
                                   uint16_t central_flags, int64_t* end) {
  const std::string quoted = absl::StrCat("'", EscapeBytes(entry.name), "'");
  if (local_offset + static_cast<int64_t>(kLocalSize) > file_size_) {
    return Corrupt(
        absl::StrCat("entry ", quoted, "'s local header lies past the end"));
  }
  std::string header(kLocalSize, '\0');
  STRATA_RETURN_IF_ERROR(Pread(header.data(), header.size(), local_offset));
  const size_t name_size = U16(header, 26);
  const size_t extra_size = U16(header, 28);
  if (U32(header, 0) != kLocalSignature || U16(header, 6) != central_flags ||
      U16(header, 8) != 0 || name_size != entry.name.size() ||
      local_offset + kLocalSize + name_size + extra_size >
          static_cast<uint64_t>(file_size_)) {
    return Corrupt(
        absl::StrCat("entry ", quoted,
                     "'s local header disagrees with the central directory"));
  }
  std::string names(name_size + extra_size, '\0');
  STRATA_RETURN_IF_ERROR(
      Pread(names.data(), names.size(), local_offset + kLocalSize));
  if (names.compare(0, name_size, entry.name) != 0) {
    return Corrupt(
        absl::StrCat("entry ", quoted, "'s local header names another entry"));
  }
  entry.data_offset = local_offset + kLocalSize + name_size + extra_size;
  *end = entry.data_offset + entry.size;
  if (*end > file_size_) {
    return Corrupt(absl::StrCat("entry ", quoted, " runs past the end"));
  }
  uint64_t local_crc = U32(header, 14);
  uint64_t compressed = U32(header, 18);
  uint64_t size = U32(header, 22);
  const uint64_t want = static_cast<uint64_t>(entry.size);
  if ((central_flags & kFlagDescriptor) == 0) {
    if (!ApplyZip64(absl::string_view(names).substr(name_size),
                    {&size, &compressed}) ||
        local_crc != entry.crc32 || size != want || compressed != want) {
      return Corrupt(absl::StrCat(
          "entry ", quoted,
          "'s local header disagrees with the central directory (CRC or "
          "size)"));
    }
    return absl::OkStatus();
  }
  // A data descriptor follows the data: signature, CRC-32, then 4-byte (or
  // zip64: 8-byte) compressed and uncompressed sizes. The local header's
  // fields are zero (or, zip64, 0xFFFFFFFF).
  if (local_crc != 0 || (size != 0 && size != kMax32) ||
      (compressed != 0 && compressed != kMax32)) {
    return Corrupt(absl::StrCat("entry ", quoted,
                                " has a data descriptor and sizes in its "
                                "local header"));
  }
  const bool zip64 = size == kMax32;
  const size_t descriptor_size = zip64 ? 24 : 16;
  if (*end + static_cast<int64_t>(descriptor_size) > file_size_) {
    return Corrupt(
        absl::StrCat("entry ", quoted, "'s data descriptor lies past the end"));
  }
  std::string d(descriptor_size, '\0');
  STRATA_RETURN_IF_ERROR(Pread(d.data(), d.size(), *end));
  const bool matches = U32(d, 0) == kDescriptorSignature &&
                       U32(d, 4) == entry.crc32 &&
                       (zip64 ? U64(d, 8) == want && U64(d, 16) == want
                              : U32(d, 8) == want && U32(d, 12) == want);
  if (!matches) {
    return Corrupt(absl::StrCat(
        "entry ", quoted,
        "'s data descriptor disagrees with the central directory"));
  }
  *end += descriptor_size;
  return absl::OkStatus();
}

const ZipReader::Entry* ZipReader::Find(absl::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

absl::Status ZipReader::Read(const Entry& entry, void* out) const {
  STRATA_RETURN_IF_ERROR(Pread(out, entry.size, entry.data_offset));
  const uint32_t crc = Crc32(out, entry.size);
  if (crc != entry.crc32) {
    return absl::DataLossError(absl::StrFormat(
        "%s is corrupted: entry '%s' fails its CRC-32 (stored %08x, "
        "computed %08x)",
        path_, EscapeBytes(entry.name), entry.crc32, crc));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ZipReader::ReadString(const Entry& entry) const {
  std::string out(entry.size, '\0');
  STRATA_RETURN_IF_ERROR(Read(entry, out.data()));
  return out;
}

absl::Status ZipReader::VerifyAll() const {
  std::string buffer(std::min<int64_t>(file_size_, 1 << 20), '\0');
  for (const Entry& entry : entries_) {
    uint32_t crc = 0;
    for (int64_t done = 0; done < entry.size;) {
      const int64_t n = std::min<int64_t>(entry.size - done, buffer.size());
      STRATA_RETURN_IF_ERROR(Pread(buffer.data(), n, entry.data_offset + done));
      crc = Crc32(buffer.data(), n, crc);
      done += n;
    }
    if (crc != entry.crc32) {
      return absl::DataLossError(absl::StrFormat(
          "%s is corrupted: entry '%s' fails its CRC-32 (stored %08x, "
          "computed %08x)",
          path_, EscapeBytes(entry.name), entry.crc32, crc));
    }
  }
  return absl::OkStatus();
}

}  // namespace strata::serialization
