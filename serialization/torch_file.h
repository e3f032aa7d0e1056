// PyTorch files: the zip container that Python's torch.save / torch.load and
// LibTorch's torch::pickle_save use, read into IValues and written from
// them. The pickle inside is pickle_reader.h's and pickle_writer.h's.
//
// LibTorch 1.13's torch::pickle_load cannot read the most common such file,
// `torch.save(model.state_dict(), path)`: a state dict is a
// collections.OrderedDict, which its unpickler turns into None. ReadTorchFile
// interprets the pickle itself (ReadPickle) and loads the tensors from the
// archive's records.
#ifndef STRATA_SERIALIZATION_TORCH_FILE_H_
#define STRATA_SERIALIZATION_TORCH_FILE_H_

#include <ATen/core/ivalue.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "serialization/zip_reader.h"

namespace caffe2::serialize {
class PyTorchStreamWriter;
}  // namespace caffe2::serialize

namespace strata::serialization {

// Reads the object saved in `path`: what ReadPickle (pickle_reader.h)
// supports, tensors on CPU whatever device they were saved from. Every
// record read (data.pkl, byteorder, data/<key>) has its zip CRC-32 verified
// and the container is cross-checked (zip_reader.h). Errors (InvalidArgument
// unless said otherwise), all naming `path`: no such file (NotFound), a
// directory, unreadable, not a PyTorch zip file (e.g. the legacy pre-1.6
// format or a TorchScript archive), a corrupted container or a record that
// fails its CRC-32 (DataLoss), a missing or short tensor record, or content
// outside ReadPickle's subset (naming the Python type or the pickle opcode).
absl::StatusOr<c10::IValue> ReadTorchFile(const std::string& path);

// A PyTorch file opened for reading its tensors one at a time: the object
// is parsed at Open() (the pickle and the container checked, as
// ReadTorchFile), but a tensor's data is read only by Materialize(), so a
// reader holds one storage at a time rather than the file. Owns the open
// file. Thread-compatible; Materialize may be called from several threads.
class TorchFileReader {
 public:
  // As ReadTorchFile, without reading tensor data beyond storages of at most
  // kEagerBytes (scalars such as an optimizer's "step", read at Open).
  static absl::StatusOr<std::unique_ptr<TorchFileReader>> Open(
      const std::string& path);
  static constexpr int64_t kEagerBytes = 16;
  // As Open, for an archive that is the `size` bytes at `offset` of `path`
  // (ZipReader::OpenRange): one item of a torch.distributed.checkpoint
  // .distcp file.
  static absl::StatusOr<std::unique_ptr<TorchFileReader>> OpenRange(
      const std::string& path, int64_t offset, int64_t size);

  // The object. Its tensors have their dtype, shape, strides and storage
  // offset; those whose storage was not read at Open are on the meta device
  // (no data) until materialized.
  const c10::IValue& value() const { return value_; }
  // `tensor` (one of value()'s tensors, or a view of one sharing its
  // storage) as a CPU tensor: its storage's record read whole, CRC-32
  // verified, and viewed with `tensor`'s offset, sizes and strides. Errors:
  // a tensor not from this file (InvalidArgument), a record that fails its
  // CRC-32 (DataLoss), I/O.
  absl::StatusOr<at::Tensor> Materialize(const at::Tensor& tensor) const;
  // Reads bytes [byte_offset, byte_offset + size) of the storage record of
  // `tensor` (a lazy one: on the meta device) into `out`, unverified: the
  // record's CRC-32 covers it whole (ZipReader::ReadPart). For a reader that
  // needs a small part of a large tensor.
  absl::Status ReadStoragePart(const at::Tensor& tensor, int64_t byte_offset,
                               int64_t size, void* out) const;
  // Verifies the CRC-32 of every record of the archive (streaming).
  absl::Status VerifyAllRecords() const;
  // The size of the data.pkl record (the pickle).
  int64_t pickle_bytes() const { return pickle_bytes_; }

 private:
  // A storage not read at Open: its record and element type.
  struct LazyStorage {
    const ZipReader::Entry* record = nullptr;
    at::ScalarType dtype = at::kFloat;
    int64_t numel = 0;
  };
  TorchFileReader() = default;
  static absl::StatusOr<std::unique_ptr<TorchFileReader>> Parse(
      std::unique_ptr<ZipReader> zip);

  std::unique_ptr<ZipReader> zip_;
  c10::IValue value_;
  int64_t pickle_bytes_ = 0;
  // Keyed by the meta storage's StorageImpl (kept alive by value_).
  std::unordered_map<const void*, LazyStorage> lazy_;
};

// Writes `value` to `path` as torch.save would (Python's torch.load reads
// it), atomically (base/file_io.h's AtomicFileWriter): `path` is replaced
// whole or left as it was.
absl::Status WriteTorchFile(const std::string& path, const c10::IValue& value);

// Writes `value` as a whole PyTorch zip archive (what WriteTorchFile puts in
// its file) into `sink`, one record at a time; `name` names the archive in
// errors. For a caller that owns the file (e.g. a checkpoint's staging file).
absl::Status WriteTorchArchive(
    const c10::IValue& value, const std::string& name,
    std::function<absl::Status(const void* data, size_t size)> sink);

// Streams a PyTorch zip archive into a byte sink, one record at a time: the
// tensor storages' records as their data becomes available (so a writer
// holds one tensor at a time, not the whole state), then the pickle. Owns
// the archive writer; the sink is called only from its methods. Use from
// one thread.
class TorchArchiveWriter {
 public:
  // Receives the archive's bytes in order. An error stops the archive: every
  // later call fails with it.
  using Sink = std::function<absl::Status(const void* data, size_t size)>;

  // `name` names the archive in errors.
  static absl::StatusOr<std::unique_ptr<TorchArchiveWriter>> Create(
      const std::string& name, Sink sink);
  TorchArchiveWriter(const TorchArchiveWriter&) = delete;
  TorchArchiveWriter& operator=(const TorchArchiveWriter&) = delete;
  // Destroyed unfinished (after an error, or before Finish), the archive is
  // abandoned: the sink gets no more bytes, so what it received is an
  // incomplete archive (AtomicFileWriter-backed sinks never commit it).
  ~TorchArchiveWriter();

  // Writes storage `key`'s record ("data/<key>", see Pickled::tensors).
  absl::Status WriteStorage(size_t key, absl::string_view bytes);
  // Writes the pickle (data.pkl) and the archive's end. Call once, last.
  absl::Status Finish(absl::string_view pickle);

 private:
  TorchArchiveWriter(std::string name, Sink sink);
  // Runs one write of the archive writer, converting what it throws.
  template <typename Fn>
  absl::Status Write(Fn&& fn);

  const std::string name_;
  const Sink sink_;
  absl::Status sink_status_;  // The sink's first error.
  absl::Status status_;       // The archive's first error.
  std::unique_ptr<caffe2::serialize::PyTorchStreamWriter> writer_;
  bool finished_ = false;
  bool discard_ = false;  // Abandoned: the sink gets no more bytes.
};

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_TORCH_FILE_H_
