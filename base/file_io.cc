#include "base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata {

absl::Status ErrnoStatus(int error_number, absl::string_view message) {
  const std::string text =
      absl::StrCat(message, ": ", std::strerror(error_number));
  switch (error_number) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(text);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(text);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(text);
    default:
      return absl::InternalError(text);
  }
}

namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int e = errno;
  return ErrnoStatus(e, absl::StrCat(what, " '", path, "'"));
}

}  // namespace

std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::StatusOr<FileWriter> FileWriter::Create(const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path);
  return FileWriter(path, fd);
}

FileWriter::FileWriter(FileWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<int64_t> FileWriter::Append(const void* data, size_t size) {
  const int64_t at = size_;
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::pwrite(fd_, p, left, size_);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno(
          absl::StrFormat("cannot write %d bytes at byte %d of", left, size_),
          path_);
    }
    p += n;
    left -= n;
    size_ += n;
  }
  return at;
}

absl::Status FileWriter::SyncAndClose() {
  if (::fsync(fd_) != 0) return Errno("cannot fsync", path_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return Errno("cannot close", path_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(
    const std::string& path) {
  static std::atomic<int> counter{0};
  std::string temp_path =
      absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  absl::StatusOr<FileWriter> writer = FileWriter::Create(temp_path);
  if (!writer.ok()) return writer.status();
  return std::unique_ptr<AtomicFileWriter>(
      new AtomicFileWriter(path, std::move(temp_path), *std::move(writer)));
}

AtomicFileWriter::AtomicFileWriter(std::string path, std::string temp_path,
                                   FileWriter writer)
    : path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      writer_(std::move(writer)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) ::unlink(temp_path_.c_str());
}

absl::Status AtomicFileWriter::Append(const void* data, size_t size) {
  absl::StatusOr<int64_t> at = writer_.Append(data, size);
  return at.ok() ? absl::OkStatus() : at.status();
}

absl::Status AtomicFileWriter::Commit() {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("AtomicFileWriter for '", path_, "' committed twice"));
  }
  closed_ = true;
  if (absl::Status s = writer_.SyncAndClose(); !s.ok()) return s;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Errno(absl::StrCat("cannot rename '", temp_path_, "' to"), path_);
  }
  committed_ = true;
  return FsyncPath(ParentDir(path_));
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view bytes) {
  absl::StatusOr<std::unique_ptr<AtomicFileWriter>> writer =
      AtomicFileWriter::Create(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status s = (*writer)->Append(bytes.data(), bytes.size()); !s.ok()) {
    return s;
  }
  return (*writer)->Commit();
}

absl::Status PreadAll(int fd, const std::string& path, void* data, size_t size,
                      int64_t offset) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, p + done, size - done, offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot read", path);
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrFormat(
          "file '%s' is truncated: it ends at byte %d but bytes [%d, %d) "
          "were expected",
          path, offset + done, offset, offset + size));
    }
    done += n;
  }
  return absl::OkStatus();
}

absl::Status FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open for fsync", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("cannot fsync", path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = Errno("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is a directory, not a file"));
  }
  std::string bytes(st.st_size, '\0');
  absl::Status s = PreadAll(fd, path, bytes.data(), bytes.size(), 0);
  ::close(fd);
  if (!s.ok()) return s;
  return bytes;
}

}  // namespace strata
