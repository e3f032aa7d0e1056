// TensorBoard event files: scalars that `tensorboard --logdir <dir>` plots.
//
// A file is a sequence of TFRecords, each
//   uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes,
//   `length` bytes of data, uint32 masked CRC-32C of the data,
// where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8, and each
// record's data is a serialized Event (launch/observe/tensorboard_event.proto,
// wire- compatible with TensorFlow's). The first record carries file_version
// "brain.Event:2"; every scalar is an Event with one Summary value.
#ifndef STRATA_LAUNCH_OBSERVE_TENSORBOARD_H_
#define STRATA_LAUNCH_OBSERVE_TENSORBOARD_H_

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::launch {

// TFRecord's masked CRC-32C of `size` bytes at `data`.
uint32_t MaskedCrc32c(const void* data, size_t size);

// `data` framed as one TFRecord (header, data, footer; see above).
std::string FrameRecord(std::string_view data);

// Writes one event file. Used from one thread (rank 0's training loop).
class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) and in it the file
  // events.out.tfevents.<unix seconds>.<hostname> (".1", ".2", ... appended
  // if that name exists), whose first record is the file version, flushed.
  // Error: "cannot create TensorBoard directory '<dir>': ..." or "cannot
  // write TensorBoard event file '<path>'".
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> Open(
      const std::string& dir);

  // Appends a scalar event (tag, value as float, step, the wall time now).
  // Buffered: visible to readers after Flush() or destruction. Error names
  // the file.
  absl::Status AddScalar(std::string_view tag, double value, int64_t step);

  // Writes what is buffered to the file. Error names the file.
  absl::Status Flush();

  // Flushes and closes the file (errors are logged, not returned).
  ~TensorBoardWriter();

  const std::string& path() const { return path_; }

 private:
  explicit TensorBoardWriter(std::string path);
  absl::Status WriteEvent(const std::string& serialized_event);

  std::string path_;
  std::ofstream out_;
};

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_OBSERVE_TENSORBOARD_H_
