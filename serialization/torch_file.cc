#include "serialization/torch_file.h"

#include <ATen/ops/empty.h>
#include <caffe2/serialize/inline_container.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/status.h"
#include "serialization/pickle_reader.h"
#include "serialization/pickle_writer.h"

namespace strata::serialization {
namespace {

// Storage `key` of the archive: record "data/<key>" as a 1-D tensor of
// `numel` elements (owning the record's memory).
absl::StatusOr<at::Tensor> LoadStorage(
    caffe2::serialize::PyTorchStreamReader& archive, const std::string& key,
    at::ScalarType dtype, int64_t numel) {
  const std::string record = "data/" + key;
  if (!archive.hasRecord(record)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "missing tensor data record '", record, "' in the archive"));
  }
  const int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  at::DataPtr data;
  size_t size = 0;
  std::tie(data, size) = archive.getRecord(record);
  if (static_cast<int64_t>(size) < nbytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor data record '", record, "' has ", size,
                     " bytes, expected ", nbytes));
  }
  at::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data),
                      /*allocator=*/nullptr, /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(dtype))
      .set_(storage, 0, {numel}, {1});
}

absl::Status CheckReadableFile(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot stat: ", std::strerror(error)));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory, not a PyTorch file"));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is not a regular file"));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const int error = errno;
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot open: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<c10::IValue> ReadTorchFile(const std::string& path) {
  STRATA_RETURN_IF_ERROR(CheckReadableFile(path));
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> archive;
  absl::Status opened = StatusFromCall("", [&] {
    archive = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  });
  if (!opened.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": not a PyTorch file (expected the zip format written by torch.save "
        "or torch::pickle_save; the legacy pre-1.6 format is not supported): ",
        opened.message()));
  }
  c10::IValue result;
  absl::Status parsed = absl::OkStatus();
  STRATA_RETURN_IF_ERROR(StatusFromCall(absl::StrCat("reading ", path), [&] {
    if (archive->hasRecord("byteorder")) {
      at::DataPtr order;
      size_t size = 0;
      std::tie(order, size) = archive->getRecord("byteorder");
      const std::string value(static_cast<const char*>(order.get()), size);
      if (value != "little") {
        parsed = absl::InvalidArgumentError(absl::StrCat(
            path, ": saved with byte order '", value, "', expected 'little'"));
        return;
      }
    }
    if (!archive->hasRecord("data.pkl")) {
      parsed = absl::InvalidArgumentError(absl::StrCat(
          path, ": not a PyTorch file saved by torch.save (no data.pkl)"));
      return;
    }
    at::DataPtr pickle;
    size_t size = 0;
    std::tie(pickle, size) = archive->getRecord("data.pkl");
    absl::StatusOr<c10::IValue> value = ReadPickle(
        absl::string_view(static_cast<const char*>(pickle.get()), size), path,
        [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
          return LoadStorage(*archive, key, dtype, numel);
        });
    if (value.ok()) result = *std::move(value);
    parsed = value.status();
  }));
  STRATA_RETURN_IF_ERROR(parsed);
  return result;
}

TorchArchiveWriter::TorchArchiveWriter(std::string name, Sink sink)
    : name_(std::move(name)), sink_(std::move(sink)) {}

TorchArchiveWriter::~TorchArchiveWriter() {
  // See the header: an unfinished LibTorch writer may throw in its
  // destructor.
  if (!finished_) (void)writer_.release();
}

template <typename Fn>
absl::Status TorchArchiveWriter::Write(Fn&& fn) {
  if (!status_.ok()) return status_;
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("writing '", name_, "': the archive is finished"));
  }
  absl::Status s = StatusFromCall(absl::StrCat("writing '", name_, "'"),
                                  std::forward<Fn>(fn));
  // The sink's own error says more than the archive writer's.
  if (!sink_status_.ok()) s = sink_status_;
  status_ = s;
  return s;
}

absl::StatusOr<std::unique_ptr<TorchArchiveWriter>> TorchArchiveWriter::Create(
    const std::string& name, Sink sink) {
  std::unique_ptr<TorchArchiveWriter> out(
      new TorchArchiveWriter(name, std::move(sink)));
  TorchArchiveWriter* self = out.get();
  STRATA_RETURN_IF_ERROR(self->Write([self] {
    self->writer_ = std::make_unique<caffe2::serialize::PyTorchStreamWriter>(
        [self](const void* data, size_t n) -> size_t {
          if (!self->sink_status_.ok()) return 0;
          self->sink_status_ = self->sink_(data, n);
          return self->sink_status_.ok() ? n : 0;
        });
  }));
  return out;
}

absl::Status TorchArchiveWriter::WriteStorage(size_t key,
                                              absl::string_view bytes) {
  return Write([&] {
    writer_->writeRecord(absl::StrCat("data/", key), bytes.data(),
                         bytes.size());
  });
}

absl::Status TorchArchiveWriter::Finish(absl::string_view pickle) {
  STRATA_RETURN_IF_ERROR(Write([&] {
    writer_->writeRecord("data.pkl", pickle.data(), pickle.size());
    writer_->writeEndOfFile();
  }));
  writer_.reset();
  finished_ = true;
  return absl::OkStatus();
}

absl::Status WriteTorchFile(const std::string& path, const c10::IValue& value) {
  STRATA_ASSIGN_OR_RETURN(Pickled pickled, Pickle(value));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file,
                          AtomicFileWriter::Create(path));
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<TorchArchiveWriter> archive,
      TorchArchiveWriter::Create(path, [&](const void* data, size_t n) {
        return file->Append(data, n);
      }));
  for (size_t i = 0; i < pickled.tensors.size(); ++i) {
    STRATA_RETURN_IF_ERROR(
        archive->WriteStorage(i, StorageBytes(pickled.tensors[i])));
  }
  STRATA_RETURN_IF_ERROR(archive->Finish(pickled.data));
  return file->Commit();
}

}  // namespace strata::serialization
