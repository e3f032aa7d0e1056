#include "serialization/torch_file.h"

#include <ATen/ops/empty.h>
#include <caffe2/serialize/inline_container.h>
#include <glog/logging.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/escape.h"
#include "base/file_io.h"
#include "base/status.h"
#include "serialization/pickle_reader.h"
#include "serialization/pickle_writer.h"

namespace strata::serialization {
namespace {

// The archive's records live under one directory ("archive/", or the file's
// stem for Python's torch.save): its name, with the slash.
absl::StatusOr<std::string> RecordPrefix(const ZipReader& zip) {
  if (zip.entries().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(zip.path(), ": not a PyTorch file (an empty zip file)"));
  }
  const std::string& first = zip.entries().front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        zip.path(), ": not a PyTorch file (record '", EscapeBytes(first),
        "' is not in the archive's directory)"));
  }
  return first.substr(0, slash + 1);
}

// Storage `key`'s record, "data/<key>", checked to hold `numel` elements of
// `dtype` (so that no allocation exceeds the file's size).
absl::StatusOr<const ZipReader::Entry*> StorageRecord(const ZipReader& zip,
                                                      const std::string& prefix,
                                                      const std::string& key,
                                                      at::ScalarType dtype,
                                                      int64_t numel) {
  const std::string record = "data/" + key;
  const ZipReader::Entry* entry = zip.Find(prefix + record);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing tensor data record '", EscapeBytes(record),
                     "' in the archive"));
  }
  const int64_t element_bytes = static_cast<int64_t>(c10::elementSize(dtype));
  if (numel > entry->size / element_bytes ||
      numel * element_bytes != entry->size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor data record '", EscapeBytes(record), "' has ", entry->size,
        " bytes, expected ", numel, " elements of ", element_bytes, " bytes"));
  }
  return entry;
}

// The record read whole (CRC-32 verified) as a 1-D tensor of `numel`.
absl::StatusOr<at::Tensor> ReadStorage(const ZipReader& zip,
                                       const ZipReader::Entry& entry,
                                       at::ScalarType dtype, int64_t numel) {
  at::Tensor tensor = at::empty({numel}, at::TensorOptions().dtype(dtype));
  STRATA_RETURN_IF_ERROR(zip.Read(entry, tensor.data_ptr()));
  return tensor;
}

// Opens the archive and interprets its pickle; `load` makes each storage.
absl::StatusOr<c10::IValue> ParseArchive(
    const ZipReader& zip, int64_t* pickle_bytes,
    const std::function<absl::StatusOr<at::Tensor>(
        const ZipReader::Entry&, at::ScalarType, int64_t)>& load) {
  const std::string& path = zip.path();
  STRATA_ASSIGN_OR_RETURN(const std::string prefix, RecordPrefix(zip));
  if (const ZipReader::Entry* order = zip.Find(prefix + "byteorder")) {
    STRATA_ASSIGN_OR_RETURN(const std::string value, zip.ReadString(*order));
    if (value != "little") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": saved with byte order '", EscapeBytes(value),
                       "', expected 'little'"));
    }
  }
  const ZipReader::Entry* pickle_record = zip.Find(prefix + "data.pkl");
  if (pickle_record == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a PyTorch file saved by torch.save (no data.pkl)"));
  }
  STRATA_ASSIGN_OR_RETURN(const std::string pickle,
                          zip.ReadString(*pickle_record));
  *pickle_bytes = pickle_record->size;
  c10::IValue result;
  absl::Status parsed = absl::OkStatus();
  STRATA_RETURN_IF_ERROR(StatusFromCall(absl::StrCat("reading ", path), [&] {
    absl::StatusOr<c10::IValue> value =
        ReadPickle(pickle, path,
                   [&](const std::string& key, at::ScalarType dtype,
                       int64_t numel) -> absl::StatusOr<at::Tensor> {
                     STRATA_ASSIGN_OR_RETURN(
                         const ZipReader::Entry* entry,
                         StorageRecord(zip, prefix, key, dtype, numel));
                     return load(*entry, dtype, numel);
                   });
    if (value.ok()) result = *std::move(value);
    parsed = value.status();
  }));
  STRATA_RETURN_IF_ERROR(parsed);
  return result;
}

}  // namespace

absl::StatusOr<c10::IValue> ReadTorchFile(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(const std::unique_ptr<ZipReader> zip,
                          ZipReader::Open(path));
  int64_t pickle_bytes = 0;
  return ParseArchive(
      *zip, &pickle_bytes,
      [&](const ZipReader::Entry& entry, at::ScalarType dtype, int64_t numel) {
        return ReadStorage(*zip, entry, dtype, numel);
      });
}

absl::StatusOr<std::unique_ptr<TorchFileReader>> TorchFileReader::Open(
    const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZipReader> zip,
                          ZipReader::Open(path));
  return Parse(std::move(zip));
}

absl::StatusOr<std::unique_ptr<TorchFileReader>> TorchFileReader::OpenRange(
    const std::string& path, int64_t offset, int64_t size) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZipReader> zip,
                          ZipReader::OpenRange(path, offset, size));
  return Parse(std::move(zip));
}

absl::StatusOr<std::unique_ptr<TorchFileReader>> TorchFileReader::Parse(
    std::unique_ptr<ZipReader> zip_reader) {
  std::unique_ptr<TorchFileReader> reader(new TorchFileReader());
  reader->zip_ = std::move(zip_reader);
  const ZipReader& zip = *reader->zip_;
  auto& lazy = reader->lazy_;
  STRATA_ASSIGN_OR_RETURN(
      reader->value_,
      ParseArchive(zip, &reader->pickle_bytes_,
                   [&](const ZipReader::Entry& entry, at::ScalarType dtype,
                       int64_t numel) -> absl::StatusOr<at::Tensor> {
                     if (entry.size <= kEagerBytes) {
                       return ReadStorage(zip, entry, dtype, numel);
                     }
                     at::Tensor meta = at::empty(
                         {numel},
                         at::TensorOptions().dtype(dtype).device(at::kMeta));
                     lazy[meta.storage().unsafeGetStorageImpl()] = {
                         &entry, dtype, numel};
                     return meta;
                   }));
  return reader;
}

absl::StatusOr<at::Tensor> TorchFileReader::Materialize(
    const at::Tensor& tensor) const {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(zip_->path(), ": materializing an undefined tensor"));
  }
  if (!tensor.is_meta()) return tensor;
  auto it = lazy_.find(tensor.storage().unsafeGetStorageImpl());
  if (it == lazy_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        zip_->path(), ": a meta tensor that is not one of the file's"));
  }
  const LazyStorage& s = it->second;
  STRATA_ASSIGN_OR_RETURN(at::Tensor storage,
                          ReadStorage(*zip_, *s.record, s.dtype, s.numel));
  return storage.as_strided(tensor.sizes(), tensor.strides(),
                            tensor.storage_offset());
}

absl::Status TorchFileReader::ReadStoragePart(const at::Tensor& tensor,
                                              int64_t byte_offset, int64_t size,
                                              void* out) const {
  if (!tensor.defined() || !tensor.is_meta()) {
    return absl::InvalidArgumentError(absl::StrCat(
        zip_->path(), ": reading part of a tensor that is not lazy"));
  }
  auto it = lazy_.find(tensor.storage().unsafeGetStorageImpl());
  if (it == lazy_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        zip_->path(), ": a meta tensor that is not one of the file's"));
  }
  return zip_->ReadPart(*it->second.record, byte_offset, size, out);
}

absl::Status TorchFileReader::VerifyAllRecords() const {
  return zip_->VerifyAll();
}

TorchArchiveWriter::TorchArchiveWriter(std::string name, Sink sink)
    : name_(std::move(name)), sink_(std::move(sink)) {}

TorchArchiveWriter::~TorchArchiveWriter() {
  if (writer_ == nullptr) return;  // Finished, or never created.
  // Abandoned: the sink gets no more bytes, and LibTorch's writer is closed
  // here, where its error can be caught, rather than in its destructor.
  discard_ = true;
  if (!writer_->finalized()) {
    try {
      writer_->writeEndOfFile();
    } catch (const std::exception& e) {
      VLOG(1) << "abandoning '" << name_ << "': " << e.what();
    }
  }
  // LibTorch 1.13's writer stays unfinalised when closing it threw before
  // its last step, and its destructor would close it again and throw
  // (std::terminate); only then is it left allocated. The sink never fails
  // a write (see Create), so this takes a fault inside LibTorch's writer.
  if (!writer_->finalized()) {
    LOG(ERROR) << "abandoning '" << name_
               << "': LibTorch's archive writer could not be closed; "
                  "leaking it";
    (void)writer_.release();
    return;
  }
  writer_.reset();
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
          // LibTorch's writer never sees a short write: one poisons it (every
          // later call throws, closing it included). After the sink's first
          // error, and once the archive is abandoned, bytes are dropped;
          // Write returns the sink's error.
          if (self->discard_ || !self->sink_status_.ok()) return n;
          self->sink_status_ = self->sink_(data, n);
          return n;
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

absl::Status WriteTorchArchive(
    const c10::IValue& value, const std::string& name,
    std::function<absl::Status(const void* data, size_t size)> sink) {
  STRATA_ASSIGN_OR_RETURN(Pickled pickled, Pickle(value));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<TorchArchiveWriter> archive,
                          TorchArchiveWriter::Create(name, std::move(sink)));
  for (size_t i = 0; i < pickled.tensors.size(); ++i) {
    STRATA_RETURN_IF_ERROR(
        archive->WriteStorage(i, StorageBytes(pickled.tensors[i])));
  }
  return archive->Finish(pickled.data);
}

absl::Status WriteTorchFile(const std::string& path, const c10::IValue& value) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file,
                          AtomicFileWriter::Create(path));
  STRATA_RETURN_IF_ERROR(WriteTorchArchive(
      value, path,
      [&](const void* data, size_t n) { return file->Append(data, n); }));
  return file->Commit();
}

}  // namespace strata::serialization
