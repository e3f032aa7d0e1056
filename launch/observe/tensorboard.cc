#include "launch/observe/tensorboard.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/crc32c.h"
#include "launch/observe/tensorboard_event.pb.h"

namespace strata::launch {
namespace {

constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

double WallTimeSeconds() {
  return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
}

}  // namespace

uint32_t MaskedCrc32c(const void* data, size_t size) {
  const uint32_t crc = checkpoint::Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta;
}

std::string FrameRecord(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  AppendLittleEndian(data.size(), 8, &record);
  AppendLittleEndian(MaskedCrc32c(record.data(), 8), 4, &record);
  record.append(data);
  AppendLittleEndian(MaskedCrc32c(data.data(), data.size()), 4, &record);
  return record;
}

TensorBoardWriter::TensorBoardWriter(std::string path)
    : path_(std::move(path)) {}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Open(
    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create TensorBoard directory '", dir, "': ", ec.message()));
  }
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  const std::string base =
      absl::StrCat(dir, "/events.out.tfevents.", now_s, ".", HostName());
  std::string path = base;
  for (int i = 1; std::filesystem::exists(path); ++i) {
    path = absl::StrCat(base, ".", i);
  }
  std::unique_ptr<TensorBoardWriter> writer(new TensorBoardWriter(path));
  writer->out_.open(path, std::ios::binary | std::ios::trunc);
  if (!writer->out_.is_open()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write TensorBoard event file '", path,
                     "': ", std::strerror(errno)));
  }
  tensorboard::Event event;
  event.set_wall_time(WallTimeSeconds());
  event.set_file_version("brain.Event:2");
  if (absl::Status s = writer->WriteEvent(event.SerializeAsString()); !s.ok()) {
    return s;
  }
  if (absl::Status s = writer->Flush(); !s.ok()) return s;
  return writer;
}

absl::Status TensorBoardWriter::WriteEvent(const std::string& serialized) {
  const std::string record = FrameRecord(serialized);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  if (!out_.good()) {
    return absl::DataLossError(
        absl::StrCat("cannot write TensorBoard event file '", path_, "'"));
  }
  return absl::OkStatus();
}

absl::Status TensorBoardWriter::AddScalar(std::string_view tag, double value,
                                          int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(WallTimeSeconds());
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  return WriteEvent(event.SerializeAsString());
}

absl::Status TensorBoardWriter::Flush() {
  out_.flush();
  if (!out_.good()) {
    return absl::DataLossError(
        absl::StrCat("cannot write TensorBoard event file '", path_, "'"));
  }
  return absl::OkStatus();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (absl::Status s = Flush(); !s.ok()) LOG(WARNING) << s.message();
}

}  // namespace strata::launch
