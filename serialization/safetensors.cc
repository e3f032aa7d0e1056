#include "serialization/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_io.h"
#include "base/json.h"
#include "base/status.h"
#include "glog/logging.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this reader maps it as is");

namespace strata::serialization {
namespace {

using Json = nlohmann::json;

struct DtypeName {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble},    {"F32", at::kFloat}, {"F16", at::kHalf},
    {"BF16", at::kBFloat16}, {"I64", at::kLong},  {"I32", at::kInt},
    {"I16", at::kShort},     {"I8", at::kChar},   {"U8", at::kByte},
    {"BOOL", at::kBool},
};

// Dtypes of the format that LibTorch 1.13 has no scalar type for.
constexpr const char* kUnsupportedDtypes[] = {
    "U16",     "U32",     "U64",     "F8_E5M2", "F8_E4M3",
    "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",      "C64"};

std::string KnownDtypes() {
  std::vector<std::string> names;
  for (const DtypeName& d : kDtypes) names.emplace_back(d.name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<at::ScalarType> DtypeFromName(const std::string& name) {
  for (const DtypeName& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  for (const char* unsupported : kUnsupportedDtypes) {
    if (name == unsupported) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype '", name,
          "' has no LibTorch 1.13 type (supported: ", KnownDtypes(), ")"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", name, "' (expected one of ", KnownDtypes(), ")"));
}

// The non-negative integer `value` (an offset or a dimension), or an error
// naming `what`.
absl::StatusOr<int64_t> NonNegative(const Json& value,
                                    const std::string& what) {
  if (!value.is_number_unsigned() ||
      value.get<uint64_t>() >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " must be a non-negative integer, got ",
        value.dump(-1, ' ', false, Json::error_handler_t::replace)));
  }
  return static_cast<int64_t>(value.get<uint64_t>());
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name,
                                            const Json& info,
                                            int64_t data_bytes) {
  if (!info.is_object()) {
    return absl::InvalidArgumentError(
        "expected an object with dtype, shape and data_offsets");
  }
  for (const auto& item : info.items()) {
    if (item.key() != "dtype" && item.key() != "shape" &&
        item.key() != "data_offsets") {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected field '", item.key(),
                       "' (expected dtype, shape and data_offsets)"));
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing field '", field, "'"));
    }
  }
  SafetensorsEntry entry;
  entry.name = name;
  if (!info["dtype"].is_string()) {
    return absl::InvalidArgumentError("dtype must be a string");
  }
  STRATA_ASSIGN_OR_RETURN(entry.dtype,
                          DtypeFromName(info["dtype"].get<std::string>()));
  const Json& shape = info["shape"];
  if (!shape.is_array()) {
    return absl::InvalidArgumentError("shape must be an array of integers");
  }
  int64_t numel = 1;
  bool overflow = false;
  for (const Json& dim : shape) {
    STRATA_ASSIGN_OR_RETURN(int64_t size, NonNegative(dim, "a shape entry"));
    entry.shape.push_back(size);
    overflow = overflow || __builtin_mul_overflow(numel, size, &numel);
  }
  const Json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return absl::InvalidArgumentError(
        "data_offsets must be an array [begin, end]");
  }
  STRATA_ASSIGN_OR_RETURN(entry.begin,
                          NonNegative(offsets[0], "data_offsets begin"));
  STRATA_ASSIGN_OR_RETURN(entry.end,
                          NonNegative(offsets[1], "data_offsets end"));
  if (entry.end < entry.begin) {
    return absl::InvalidArgumentError(absl::StrCat("data_offsets [",
                                                   entry.begin, ", ", entry.end,
                                                   "] end before they begin"));
  }
  if (entry.end > data_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_offsets [", entry.begin, ", ", entry.end,
                     "] run past the data section (", data_bytes, " bytes)"));
  }
  const int64_t element_bytes = c10::elementSize(entry.dtype);
  int64_t expected_bytes = 0;
  if (overflow ||
      __builtin_mul_overflow(numel, element_bytes, &expected_bytes) ||
      expected_bytes != entry.end - entry.begin) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape [", absl::StrJoin(entry.shape, ", "), "] of ",
        info["dtype"].get<std::string>(), " needs ",
        overflow ? std::string("more than 2^63") : absl::StrCat(expected_bytes),
        " bytes, but data_offsets span ", entry.end - entry.begin));
  }
  return entry;
}

}  // namespace

absl::StatusOr<std::string> SafetensorsDtypeName(at::ScalarType type) {
  for (const DtypeName& d : kDtypes) {
    if (type == d.type) return std::string(d.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("safetensors has no dtype for ", c10::toString(type),
                   " (supported: ", KnownDtypes(), ")"));
}

// The file's bytes: a private mapping of a file, or a string.
struct SafetensorsFile::Mapping {
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (mapped != nullptr) munmap(mapped, size);
  }
  const char* data() const {
    return mapped != nullptr ? static_cast<const char*>(mapped) : bytes.data();
  }
  void* mapped = nullptr;
  size_t size = 0;
  std::string bytes;  // When not mapped.
};

SafetensorsFile::SafetensorsFile(std::string source,
                                 std::unique_ptr<Mapping> mapping)
    : source_(std::move(source)), mapping_(std::move(mapping)) {}

SafetensorsFile::~SafetensorsFile() = default;

absl::StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(error, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (a safetensors file)"));
  }
  auto mapping = std::make_unique<Mapping>();
  if (st.st_size < 8) {
    // Too small to map usefully; Parse() reports it.
    mapping->bytes.resize(st.st_size);
    const absl::Status read =
        PreadAll(fd, path, mapping->bytes.data(), mapping->bytes.size(), 0);
    close(fd);
    STRATA_RETURN_IF_ERROR(read);
  } else {
    // Private and writable: a view written in place copies its pages and
    // never changes the file.
    void* mapped =
        mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    const int error = errno;
    close(fd);
    if (mapped == MAP_FAILED) {
      return ErrnoStatus(error, absl::StrCat("cannot map ", path));
    }
    mapping->mapped = mapped;
    mapping->size = st.st_size;
  }
  std::shared_ptr<SafetensorsFile> file(
      new SafetensorsFile(path, std::move(mapping)));
  STRATA_RETURN_IF_ERROR(file->Parse());
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

absl::StatusOr<std::shared_ptr<const SafetensorsFile>>
SafetensorsFile::FromBytes(std::string bytes, const std::string& source) {
  auto mapping = std::make_unique<Mapping>();
  mapping->bytes = std::move(bytes);
  std::shared_ptr<SafetensorsFile> file(
      new SafetensorsFile(source, std::move(mapping)));
  STRATA_RETURN_IF_ERROR(file->Parse());
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

absl::Status SafetensorsFile::Parse() {
  const char* data = mapping_->data();
  const int64_t size = mapping_->mapped != nullptr
                           ? static_cast<int64_t>(mapping_->size)
                           : static_cast<int64_t>(mapping_->bytes.size());
  if (size < 8) {
    return absl::DataLossError(
        absl::StrCat(source_, ": truncated: ", size,
                     " bytes, but a safetensors file starts with an 8-byte "
                     "header length"));
  }
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, data, 8);
  if (header_bytes > static_cast<uint64_t>(size - 8)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": the header length (", header_bytes,
                     " bytes) is larger than the rest of the file (", size - 8,
                     " bytes): not a safetensors file, or truncated"));
  }
  if (header_bytes > static_cast<uint64_t>(kMaxSafetensorsHeaderBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": the header length (", header_bytes,
        " bytes) is over the limit of ", kMaxSafetensorsHeaderBytes, " bytes"));
  }
  const absl::string_view header(data + 8, header_bytes);
  if (header.empty() || header[0] != '{') {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": the header does not start with '{' (a JSON object)"));
  }
  STRATA_ASSIGN_OR_RETURN(Json root,
                          ParseJson(header, absl::StrCat(source_, " header")));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": the header is not a JSON object"));
  }
  data_offset_ = 8 + static_cast<int64_t>(header_bytes);
  const int64_t data_bytes = size - data_offset_;
  for (const auto& item : root.items()) {
    const std::string& name = item.key();
    if (name == "__metadata__") {
      if (!item.value().is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source_, ": __metadata__ must be an object of strings"));
      }
      for (const auto& meta : item.value().items()) {
        if (!meta.value().is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(source_, ": __metadata__ key '", meta.key(),
                           "' must have a string value"));
        }
        metadata_[meta.key()] = meta.value().get<std::string>();
      }
      continue;
    }
    absl::StatusOr<SafetensorsEntry> entry =
        ParseEntry(name, item.value(), data_bytes);
    if (!entry.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": tensor '", name, "': ", entry.status().message()));
    }
    entries_.push_back(*std::move(entry));
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
            });
  int64_t covered = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const SafetensorsEntry& e = entries_[i];
    if (e.begin < covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": tensor '", e.name, "' (data_offsets [", e.begin, ", ",
          e.end, "]) overlaps tensor '", entries_[i - 1].name, "'"));
    }
    if (e.begin > covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": bytes [", covered, ", ", e.begin,
          ") of the data belong to no tensor (before '", e.name, "')"));
    }
    covered = e.end;
  }
  if (covered != data_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": the tensors cover ", covered,
                     " bytes of data, but the file holds ", data_bytes,
                     " after the header"));
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const SafetensorsEntry& e = entries_[i];
    index_[e.name] = i;
    if (e.dtype != at::kBool) continue;
    const char* bytes = data + data_offset_ + e.begin;
    for (int64_t j = 0; j < e.end - e.begin; ++j) {
      if (bytes[j] != 0 && bytes[j] != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_, ": BOOL tensor '", e.name, "' has byte ",
                         static_cast<int>(static_cast<unsigned char>(bytes[j])),
                         " at element ", j, " (expected 0 or 1)"));
      }
    }
  }
  return absl::OkStatus();
}

bool SafetensorsFile::Contains(const std::string& name) const {
  return index_.count(name) > 0;
}

at::Tensor SafetensorsFile::ViewOf(const SafetensorsEntry& entry) const {
  char* data = const_cast<char*>(mapping_->data()) + data_offset_ + entry.begin;
  const auto options = at::TensorOptions().dtype(entry.dtype);
  const int64_t element_bytes = c10::elementSize(entry.dtype);
  if (reinterpret_cast<uintptr_t>(data) % element_bytes != 0) {
    at::Tensor copy = at::empty(entry.shape, options);
    // An empty tensor has no storage (data_ptr() is null): memcpy must not
    // be given it, even for 0 bytes (UBSan).
    if (entry.end > entry.begin) {
      std::memcpy(copy.data_ptr(), data, entry.end - entry.begin);
    }
    return copy;
  }
  std::shared_ptr<const SafetensorsFile> self = shared_from_this();
  return at::from_blob(
      data, entry.shape, [self](void*) {}, options);
}

absl::StatusOr<at::Tensor> SafetensorsFile::View(
    const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(
        absl::StrCat(source_, " has no tensor named '", name, "'"));
  }
  return ViewOf(entries_[it->second]);
}

std::vector<std::pair<std::string, at::Tensor>> SafetensorsFile::ViewAll()
    const {
  std::vector<std::pair<std::string, at::Tensor>> views;
  for (const SafetensorsEntry& e : entries_) {
    views.emplace_back(e.name, ViewOf(e));
  }
  return views;
}

absl::Status WriteSafetensors(
    const std::string& path,
    const std::vector<std::pair<std::string, at::Tensor>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": ", what));
  };
  // Dumping a string is where nlohmann checks its UTF-8.
  auto utf8 = [](const std::string& text) {
    try {
      (void)Json(text).dump();
      return true;
    } catch (const Json::type_error&) {
      return false;
    }
  };
  std::set<std::string> names;
  std::vector<std::string> dtype_names;
  std::vector<at::Tensor> values;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__") {
      return error(absl::StrCat("'", name, "' is not a tensor name"));
    }
    if (!utf8(name)) {
      return error(absl::StrCat("tensor name '", name, "' is not UTF-8"));
    }
    if (!names.insert(name).second) {
      return error(absl::StrCat("tensor '", name, "' is given twice"));
    }
    absl::StatusOr<std::string> dtype =
        SafetensorsDtypeName(tensor.scalar_type());
    if (!dtype.ok()) {
      return error(
          absl::StrCat("tensor '", name, "': ", dtype.status().message()));
    }
    dtype_names.push_back(*dtype);
    STRATA_RETURN_IF_ERROR(StatusFromCall(
        absl::StrCat("copying tensor '", name, "' to the CPU for ", path),
        // An init-capture: C++17 lambdas cannot capture a structured
        // binding (clang rejects it).
        [&values, &t = tensor] {
          values.push_back(t.detach().to(at::kCPU).contiguous());
        }));
  }
  for (const auto& [key, value] : metadata) {
    if (!utf8(key) || !utf8(value)) {
      return error(absl::StrCat("__metadata__ key '", key,
                                "' or its value is not UTF-8"));
    }
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t size_a = values[a].element_size();
    const size_t size_b = values[b].element_size();
    if (size_a != size_b) return size_a > size_b;
    return tensors[a].first < tensors[b].first;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (size_t i : order) {
    const int64_t bytes = values[i].nbytes();
    header[tensors[i].first] = {
        {"dtype", dtype_names[i]},
        {"shape", values[i].sizes().vec()},
        {"data_offsets", {offset, offset + bytes}},
    };
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_bytes = text.size();
  char length[8];
  std::memcpy(length, &header_bytes, 8);

  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer,
                          AtomicFileWriter::Create(path));
  STRATA_RETURN_IF_ERROR(writer->Append(length, 8));
  STRATA_RETURN_IF_ERROR(writer->Append(text.data(), text.size()));
  for (size_t i : order) {
    if (values[i].nbytes() == 0) continue;
    STRATA_RETURN_IF_ERROR(
        writer->Append(values[i].data_ptr(), values[i].nbytes()));
  }
  return writer->Commit();
}

}  // namespace strata::serialization
