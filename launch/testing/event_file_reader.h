// Test helper: reads a TensorBoard event file back, checking the TFRecord
// framing (lengths and both masked CRC-32Cs) and decoding every Event.
#ifndef STRATA_LAUNCH_TESTING_EVENT_FILE_READER_H_
#define STRATA_LAUNCH_TESTING_EVENT_FILE_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/observe/tensorboard_event.pb.h"

namespace strata::launch::testing {

// The data of every record of the event file at `path`, in order. Error
// (naming the file and the record's byte offset) on a truncated record or a
// CRC that does not match.
absl::StatusOr<std::vector<std::string>> ReadRecords(const std::string& path);

// Every record of `path` parsed as an Event.
absl::StatusOr<std::vector<tensorboard::Event>> ReadEvents(
    const std::string& path);

// The one file in `dir` whose name starts with "events.out.tfevents."; an
// error if there is none or more than one.
absl::StatusOr<std::string> FindEventFile(const std::string& dir);

// One scalar of an event file.
struct Scalar {
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

// The scalars of `events` in file order.
std::vector<Scalar> ScalarsOf(const std::vector<tensorboard::Event>& events);

}  // namespace strata::launch::testing

#endif  // STRATA_LAUNCH_TESTING_EVENT_FILE_READER_H_
