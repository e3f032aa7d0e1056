#include "launch/testing/event_file_reader.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "launch/observe/tensorboard.h"

namespace strata::launch::testing {
namespace {

uint64_t LittleEndian(const std::string& bytes, size_t at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i]))
             << (8 * i);
  }
  return value;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) {
      return absl::DataLossError(
          absl::StrFormat("%s: truncated record header at byte %d", path, at));
    }
    const uint64_t length = LittleEndian(bytes, at, 8);
    if (LittleEndian(bytes, at + 8, 4) != MaskedCrc32c(bytes.data() + at, 8)) {
      return absl::DataLossError(
          absl::StrFormat("%s: bad length CRC at byte %d", path, at));
    }
    if (bytes.size() - at - 12 < length + 4) {
      return absl::DataLossError(
          absl::StrFormat("%s: truncated record at byte %d", path, at));
    }
    std::string data = bytes.substr(at + 12, length);
    if (LittleEndian(bytes, at + 12 + length, 4) !=
        MaskedCrc32c(data.data(), data.size())) {
      return absl::DataLossError(
          absl::StrFormat("%s: bad data CRC at byte %d", path, at));
    }
    records.push_back(std::move(data));
    at += 12 + length + 4;
  }
  return records;
}

absl::StatusOr<std::vector<tensorboard::Event>> ReadEvents(
    const std::string& path) {
  auto records = ReadRecords(path);
  if (!records.ok()) return records.status();
  std::vector<tensorboard::Event> events;
  for (size_t i = 0; i < records->size(); ++i) {
    tensorboard::Event event;
    if (!event.ParseFromString((*records)[i])) {
      return absl::DataLossError(
          absl::StrFormat("%s: record %d is not an Event", path, i));
    }
    events.push_back(std::move(event));
  }
  return events;
}

absl::StatusOr<std::string> FindEventFile(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (absl::StartsWith(entry.path().filename().string(),
                         "events.out.tfevents.")) {
      found.push_back(entry.path().string());
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir));
  if (found.size() != 1) {
    return absl::NotFoundError(absl::StrFormat(
        "%s holds %d event files, expected 1", dir, found.size()));
  }
  return found[0];
}

std::vector<Scalar> ScalarsOf(const std::vector<tensorboard::Event>& events) {
  std::vector<Scalar> scalars;
  for (const tensorboard::Event& event : events) {
    if (!event.has_summary()) continue;
    for (const auto& value : event.summary().value()) {
      scalars.push_back({event.step(), value.tag(), value.simple_value()});
    }
  }
  return scalars;
}

}  // namespace strata::launch::testing
