#include "checkpoint/metadata.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/file_io.h"
#include "base/status.h"
#include "checkpoint/io.h"

namespace strata::checkpoint {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'C', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;

proto::Value ToProto(const Value& v) {
  proto::Value out;
  if (const auto* i = std::get_if<int64_t>(&v)) out.set_int_value(*i);
  if (const auto* d = std::get_if<double>(&v)) out.set_double_value(*d);
  if (const auto* s = std::get_if<std::string>(&v)) out.set_string_value(*s);
  if (const auto* b = std::get_if<Bytes>(&v)) out.set_bytes_value(b->data);
  return out;
}

Value FromProto(const proto::Value& v) {
  switch (v.kind_case()) {
    case proto::Value::kIntValue:
      return v.int_value();
    case proto::Value::kDoubleValue:
      return v.double_value();
    case proto::Value::kStringValue:
      return v.string_value();
    case proto::Value::kBytesValue:
      return Bytes{v.bytes_value()};
    default:
      return int64_t{0};
  }
}

}  // namespace

absl::Status WriteMetadataFile(const std::string& dir,
                               const proto::Metadata& metadata) {
  const std::string payload = metadata.SerializeAsString();
  std::string bytes(kHeaderBytes, '\0');
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  const uint64_t size = payload.size();
  std::memcpy(bytes.data(), kMagic, 8);
  std::memcpy(bytes.data() + 8, &kVersion, 4);
  std::memcpy(bytes.data() + 12, &crc, 4);
  std::memcpy(bytes.data() + 16, &size, 8);
  bytes += payload;
  STRATA_ASSIGN_OR_RETURN(FileWriter writer,
                          FileWriter::Create(dir + "/" + kMetadataFile));
  STRATA_ASSIGN_OR_RETURN(int64_t at,
                          writer.Append(bytes.data(), bytes.size()));
  (void)at;
  return writer.SyncAndClose();
}

absl::StatusOr<proto::Metadata> ReadMetadataFile(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("'", dir, "' is not a Strata checkpoint: ",
                     std::filesystem::exists(dir, ec)
                         ? "not a directory (sharded and local checkpoints are "
                           "directories; a full checkpoint is a PyTorch file)"
                         : "no such file or directory"));
  }
  const std::string path = dir + "/" + kMetadataFile;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("'", dir,
                                            "' is not a Strata checkpoint: it "
                                            "has no ",
                                            kMetadataFile));
  }
  STRATA_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  if (bytes.size() < kHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is not a Strata checkpoint metadata file (bad header)"));
  }
  uint32_t version, crc;
  uint64_t size;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&crc, bytes.data() + 12, 4);
  std::memcpy(&size, bytes.data() + 16, 8);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' has metadata version ", version,
                     "; this build reads version ", kVersion));
  }
  if (bytes.size() - kHeaderBytes != size) {
    return absl::DataLossError(
        absl::StrCat("'", path, "' is truncated: its payload has ",
                     bytes.size() - kHeaderBytes, " bytes, expected ", size));
  }
  if (Crc32c(bytes.data() + kHeaderBytes, size) != crc) {
    return absl::DataLossError(
        absl::StrCat("'", path, "' is corrupted: checksum mismatch"));
  }
  proto::Metadata metadata;
  if (!metadata.ParseFromArray(bytes.data() + kHeaderBytes,
                               static_cast<int>(size))) {
    return absl::DataLossError(
        absl::StrCat("'", path, "' is corrupted: cannot parse the metadata"));
  }
  return metadata;
}

void ContentsToProto(const Contents& contents, proto::Metadata& metadata) {
  proto::Meta* m = metadata.mutable_meta();
  m->set_step(contents.meta.step);
  m->set_seed(contents.meta.seed);
  m->set_time(contents.meta.time);
  m->set_strata_version(contents.meta.strata_version);
  m->set_git_hash(contents.meta.git_hash);
  m->set_world_size(contents.meta.world_size);
  m->set_strategy(contents.meta.strategy);
  m->set_model_config(contents.meta.model_config);
  m->set_optimizer(contents.meta.optimizer);
  for (const auto& [key, value] : contents.param_scheduler) {
    proto::NamedValue* nv = metadata.add_param_scheduler();
    nv->set_key(key);
    *nv->mutable_value() = ToProto(value);
  }
  for (const auto& [key, value] : contents.extra) {
    proto::NamedValue* nv = metadata.add_extra();
    nv->set_key(key);
    *nv->mutable_value() = ToProto(value);
  }
}

Contents ContentsFromProto(const proto::Metadata& metadata) {
  Contents c;
  const proto::Meta& m = metadata.meta();
  c.meta.step = m.step();
  c.meta.seed = m.seed();
  c.meta.time = m.time();
  c.meta.strata_version = m.strata_version();
  c.meta.git_hash = m.git_hash();
  c.meta.world_size = m.world_size();
  c.meta.strategy = m.strategy();
  c.meta.model_config = m.model_config();
  c.meta.optimizer = m.optimizer();
  for (const proto::NamedValue& nv : metadata.param_scheduler()) {
    c.param_scheduler.emplace_back(nv.key(), FromProto(nv.value()));
  }
  for (const proto::NamedValue& nv : metadata.extra()) {
    c.extra.emplace_back(nv.key(), FromProto(nv.value()));
  }
  return c;
}

}  // namespace strata::checkpoint
