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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace caffe2::serialize {
class PyTorchStreamWriter;
}  // namespace caffe2::serialize

namespace strata::serialization {

// Reads the object saved in `path`: what ReadPickle (pickle_reader.h)
// supports, tensors on CPU whatever device they were saved from. Errors
// (InvalidArgument unless said otherwise), all naming `path`: no such file
// (NotFound), a directory, unreadable (PermissionDenied), not a PyTorch zip
// file (e.g. the legacy pre-1.6 format or a TorchScript archive), a missing
// or short tensor record, or content outside ReadPickle's subset (naming the
// Python type or the pickle opcode).
absl::StatusOr<c10::IValue> ReadTorchFile(const std::string& path);

// Writes `value` to `path` as torch.save would (Python's torch.load reads
// it), atomically (base/file_io.h's AtomicFileWriter): `path` is replaced
// whole or left as it was.
absl::Status WriteTorchFile(const std::string& path, const c10::IValue& value);

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
  // Destroyed unfinished (after an error), the archive is abandoned: LibTorch's
  // writer would finish it in its destructor and may throw there, so it is
  // deliberately leaked (a few KiB) and the sink gets no more bytes.
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
};

}  // namespace strata::serialization

#endif  // STRATA_SERIALIZATION_TORCH_FILE_H_
