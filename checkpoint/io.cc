#include "checkpoint/io.h"

#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"

namespace strata::checkpoint {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int e = errno;
  return ErrnoStatus(e, absl::StrCat(what, " '", path, "'"));
}

}  // namespace

std::string StagingDir(const std::string& dir) {
  return absl::StrCat(dir, ".tmp");
}

absl::Status PrepareStagingDir(const std::string& dir) {
  std::error_code ec;
  const std::string staging = StagingDir(dir);
  std::filesystem::create_directories(ParentDir(dir), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(
        "cannot create directory '", ParentDir(dir), "': ", ec.message()));
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
    if (absl::Status s = FsyncPath(ParentDir(dir)); !s.ok()) return s;
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
  return FsyncPath(ParentDir(dir));
}

}  // namespace strata::checkpoint
