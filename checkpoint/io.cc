#include "checkpoint/io.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata::checkpoint {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int e = errno;
  const std::string message =
      absl::StrCat(what, " '", path, "': ", std::strerror(e));
  if (e == ENOENT) return absl::NotFoundError(message);
  if (e == EACCES || e == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

std::string Parent(const std::string& path) {
  std::filesystem::path p(path);
  std::filesystem::path parent = p.parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

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

absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    absl::StatusOr<FileWriter> writer = FileWriter::Create(tmp);
    if (!writer.ok()) return writer.status();
    absl::StatusOr<int64_t> at = writer->Append(bytes.data(), bytes.size());
    if (!at.ok()) return at.status();
    if (absl::Status s = writer->SyncAndClose(); !s.ok()) return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno(absl::StrCat("cannot rename '", tmp, "' to"), path);
    ::unlink(tmp.c_str());
    return s;
  }
  return FsyncPath(Parent(path));
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

std::string StagingDir(const std::string& dir) {
  return absl::StrCat(dir, ".tmp");
}

absl::Status PrepareStagingDir(const std::string& dir) {
  std::error_code ec;
  const std::string staging = StagingDir(dir);
  std::filesystem::create_directories(Parent(dir), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create directory '",
                                            Parent(dir), "': ", ec.message()));
  }
  std::filesystem::remove_all(staging, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot remove stale '", staging, "': ", ec.message()));
  }
  std::filesystem::create_directory(staging, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create '", staging, "': ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status CommitStagingDir(const std::string& dir) {
  const std::string staging = StagingDir(dir);
  if (absl::Status s = FsyncPath(staging); !s.ok()) return s;
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, dir.c_str(),
                    RENAME_EXCHANGE) != 0) {
      return Errno(absl::StrCat("cannot swap '", staging, "' with"), dir);
    }
    if (absl::Status s = FsyncPath(Parent(dir)); !s.ok()) return s;
    std::filesystem::remove_all(staging, ec);  // Now the old checkpoint.
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot remove the replaced '",
                                              staging, "': ", ec.message()));
    }
    return absl::OkStatus();
  }
  if (::rename(staging.c_str(), dir.c_str()) != 0) {
    return Errno(absl::StrCat("cannot rename '", staging, "' to"), dir);
  }
  return FsyncPath(Parent(dir));
}

}  // namespace strata::checkpoint
