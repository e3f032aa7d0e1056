#include "data/file_sources.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"

namespace strata::data {
namespace {

// Tokens encoded per write() when streaming to a file.
constexpr int64_t kWriteChunkTokens = int64_t{1} << 16;

// A whole file mapped read-only. Never empty.
class MappedFile {
 public:
  // `expected` says what the file should hold, for error messages.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(
      const std::string& path, absl::string_view expected) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
    struct stat info;
    if (fstat(fd, &info) != 0) {
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, absl::StrCat("cannot stat ", path));
    }
    if (S_ISDIR(info.st_mode)) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is a directory, expected a regular file of ", expected));
    }
    if (!S_ISREG(info.st_mode)) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is not a regular file, expected a regular file of ",
          expected));
    }
    if (info.st_size == 0) {
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is empty (0 bytes), expected ", expected));
    }
    const size_t size = static_cast<size_t>(info.st_size);
    void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int error = errno;
    close(fd);  // The mapping keeps the file open.
    if (data == MAP_FAILED) {
      return ErrnoStatus(
          error, absl::StrCat("cannot mmap ", path, " (", size, " bytes)"));
    }
    return std::unique_ptr<MappedFile>(
        new MappedFile(path, static_cast<const uint8_t*>(data), size));
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    PCHECK(munmap(const_cast<uint8_t*>(data_), size_) == 0)
        << "munmap of " << path_;
  }

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  int64_t size() const { return static_cast<int64_t>(size_); }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  const std::string path_;
  const uint8_t* const data_;
  const size_t size_;
};

uint32_t LoadLittleEndian(const uint8_t* p, TokenBinDtype dtype) {
  if (dtype == TokenBinDtype::kUint16) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
  }
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

void StoreLittleEndian(uint32_t value, TokenBinDtype dtype, uint8_t* p) {
  p[0] = static_cast<uint8_t>(value);
  p[1] = static_cast<uint8_t>(value >> 8);
  if (dtype == TokenBinDtype::kUint32) {
    p[2] = static_cast<uint8_t>(value >> 16);
    p[3] = static_cast<uint8_t>(value >> 24);
  }
}

// Largest id + 1 a dtype holds.
int64_t DtypeLimit(TokenBinDtype dtype) {
  return dtype == TokenBinDtype::kUint16 ? int64_t{1} << 16 : int64_t{1} << 32;
}

class ByteTextSource : public TokenSource {
 public:
  explicit ByteTextSource(std::unique_ptr<MappedFile> file)
      : file_(std::move(file)) {}

  int64_t num_tokens() const override { return file_->size(); }
  int64_t vocab_size() const override { return 256; }
  void Read(int64_t start, int64_t count, int64_t* out) const override {
    CheckReadRange(start, count, out);
    const uint8_t* bytes = file_->data() + start;
    for (int64_t i = 0; i < count; ++i) out[i] = bytes[i];
  }
  std::string Describe() const override {
    return absl::StrCat("bytes(", file_->path(), ", ", num_tokens(),
                        " tokens)");
  }

 private:
  const std::unique_ptr<MappedFile> file_;
};

class TokenBinSource : public TokenSource {
 public:
  TokenBinSource(std::unique_ptr<MappedFile> file, TokenBinDtype dtype,
                 int64_t vocab_size)
      : file_(std::move(file)),
        dtype_(dtype),
        width_(TokenBinDtypeWidth(dtype)),
        vocab_size_(vocab_size) {}

  int64_t num_tokens() const override { return file_->size() / width_; }
  int64_t vocab_size() const override { return vocab_size_; }
  void Read(int64_t start, int64_t count, int64_t* out) const override {
    CheckReadRange(start, count, out);
    const uint8_t* p = file_->data() + start * width_;
    for (int64_t i = 0; i < count; ++i, p += width_) {
      out[i] = LoadLittleEndian(p, dtype_);
    }
  }
  std::string Describe() const override {
    return absl::StrCat("token_bin(", file_->path(), ", ",
                        TokenBinDtypeName(dtype_), ", vocab=", vocab_size_,
                        ", ", num_tokens(), " tokens)");
  }

  // The first token id >= vocab_size, as an error.
  absl::Status Validate() const {
    if (vocab_size_ >= DtypeLimit(dtype_)) return absl::OkStatus();
    const int64_t n = num_tokens();
    const uint8_t* p = file_->data();
    for (int64_t i = 0; i < n; ++i, p += width_) {
      const uint32_t id = LoadLittleEndian(p, dtype_);
      if (id >= vocab_size_) {
        return absl::InvalidArgumentError(absl::StrCat(
            file_->path(), ": token at offset ", i, " (byte ", i * width_,
            ") is ", id, ", expected an id in [0, vocab_size = ", vocab_size_,
            ")"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::unique_ptr<MappedFile> file_;
  const TokenBinDtype dtype_;
  const int64_t width_;
  const int64_t vocab_size_;
};

// Streams `count` token ids, produced by `token(i)` (already checked to fit
// `dtype`), to `path` atomically.
template <typename TokenAt>
absl::Status WriteTokens(int64_t count, TokenAt token, const std::string& path,
                         TokenBinDtype dtype) {
  auto writer = AtomicFileWriter::Create(path);
  if (!writer.ok()) return writer.status();
  const int width = TokenBinDtypeWidth(dtype);
  std::vector<uint8_t> buffer(kWriteChunkTokens * width);
  for (int64_t begin = 0; begin < count; begin += kWriteChunkTokens) {
    const int64_t end = std::min(count, begin + kWriteChunkTokens);
    uint8_t* p = buffer.data();
    for (int64_t i = begin; i < end; ++i, p += width) {
      StoreLittleEndian(static_cast<uint32_t>(token(i)), dtype, p);
    }
    absl::Status status = (*writer)->Append(
        buffer.data(), static_cast<size_t>(p - buffer.data()));
    if (!status.ok()) return status;
  }
  return (*writer)->Commit();
}

}  // namespace

absl::string_view TokenBinDtypeName(TokenBinDtype dtype) {
  switch (dtype) {
    case TokenBinDtype::kUint16:
      return "uint16";
    case TokenBinDtype::kUint32:
      return "uint32";
  }
  return "unknown";
}

int TokenBinDtypeWidth(TokenBinDtype dtype) {
  return dtype == TokenBinDtype::kUint16 ? 2 : 4;
}

absl::StatusOr<TokenBinDtype> ParseTokenBinDtype(absl::string_view name) {
  if (name == "uint16") return TokenBinDtype::kUint16;
  if (name == "uint32") return TokenBinDtype::kUint32;
  return absl::InvalidArgumentError(absl::StrCat(
      "token dtype is '", name, "', expected 'uint16' or 'uint32'"));
}

absl::StatusOr<std::unique_ptr<TokenSource>> OpenByteText(
    const std::string& path) {
  auto file = MappedFile::Open(path, "text (at least one byte)");
  if (!file.ok()) return file.status();
  return std::unique_ptr<TokenSource>(new ByteTextSource(*std::move(file)));
}

absl::StatusOr<std::unique_ptr<TokenSource>> OpenTokenBin(
    const std::string& path, TokenBinDtype dtype, int64_t vocab_size) {
  const int64_t limit = DtypeLimit(dtype);
  if (vocab_size < 1 || vocab_size > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, ": vocab_size is ", vocab_size,
                     ", expected a value in [1, ", limit, "] for ",
                     TokenBinDtypeName(dtype), " tokens"));
  }
  const int width = TokenBinDtypeWidth(dtype);
  auto file = MappedFile::Open(
      path, absl::StrCat(TokenBinDtypeName(dtype), " token ids"));
  if (!file.ok()) return file.status();
  if ((*file)->size() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ", (*file)->size(), " bytes, expected a multiple of ",
        width, " (", TokenBinDtypeName(dtype), " token ids)"));
  }
  auto source =
      std::make_unique<TokenBinSource>(*std::move(file), dtype, vocab_size);
  absl::Status valid = source->Validate();
  if (!valid.ok()) return valid;
  return std::unique_ptr<TokenSource>(std::move(source));
}

absl::Status WriteTokenBin(absl::Span<const int64_t> tokens,
                           const std::string& path, TokenBinDtype dtype) {
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "writing token file ", path, ": no tokens, expected at least one"));
  }
  const int64_t limit = DtypeLimit(dtype);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("writing token file ", path, ": token at offset ", i,
                       " is ", tokens[i], ", expected an id in [0, ", limit,
                       ") for ", TokenBinDtypeName(dtype)));
    }
  }
  return WriteTokens(
      static_cast<int64_t>(tokens.size()),
      [&tokens](int64_t i) { return tokens[i]; }, path, dtype);
}

absl::Status TextFileToTokenBin(const std::string& text_path,
                                const std::string& bin_path,
                                TokenBinDtype dtype) {
  auto text = MappedFile::Open(text_path, "text (at least one byte)");
  if (!text.ok()) return text.status();
  const uint8_t* bytes = (*text)->data();
  return WriteTokens((*text)->size(), [bytes](int64_t i) { return bytes[i]; },
                     bin_path, dtype);
}

}  // namespace strata::data
