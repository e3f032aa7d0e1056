#include "checkpoint/dcp/metadata.h"

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/escape.h"
#include "base/file_io.h"
#include "base/status.h"
#include "serialization/object_pickle.h"

namespace strata::checkpoint::dcp {
namespace {

using serialization::PyValue;
using Kind = PyValue::Kind;

constexpr char kModule[] = "torch.distributed.checkpoint.metadata.";
constexpr char kStorageInfo[] =
    "torch.distributed.checkpoint.filesystem._StorageInfo";

struct DtypeSpelling {
  at::ScalarType dtype;
  const char* name;
};
constexpr DtypeSpelling kDtypes[] = {
    {at::kDouble, "float64"}, {at::kFloat, "float32"},
    {at::kHalf, "float16"},   {at::kBFloat16, "bfloat16"},
    {at::kLong, "int64"},     {at::kInt, "int32"},
    {at::kShort, "int16"},    {at::kChar, "int8"},
    {at::kByte, "uint8"},     {at::kBool, "bool"},
};

// Decodes one Metadata pickle; every error names the file and the key.
class Decoder {
 public:
  explicit Decoder(const std::string& where) : where_(where) {}

  absl::StatusOr<Metadata> Decode(const PyValue& root) {
    const PyValue* state = nullptr;
    STRATA_RETURN_IF_ERROR(ObjectState(root, absl::StrCat(kModule, "Metadata"),
                                       "the root", &state));
    if (state->kind != Kind::kDict) return Bad("the root", "its state");
    for (size_t i = 0; i < state->items.size(); i += 2) {
      const PyValue& key = *state->items[i];
      if (key.kind != Kind::kStr) return Bad("Metadata", "a field name");
      if (key.text == "version") {
        const PyValue& version = *state->items[i + 1];
        return absl::InvalidArgumentError(absl::StrCat(
            where_, ": DCP metadata version ",
            version.kind == Kind::kStr ? "'" + EscapeBytes(version.text) + "'"
                                       : version.Describe(),
            ", written by a PyTorch release newer than 2.6, is not supported "
            "(this reader reads ",
            kSupportedLayout,
            "); save the checkpoint with PyTorch 2.6, or convert it there "
            "(torch.distributed.checkpoint.format_utils.dcp_to_torch_save) "
            "and load the torch.save file"));
      }
      if (key.text != "state_dict_metadata" && key.text != "planner_data" &&
          key.text != "storage_data" && key.text != "storage_meta") {
        return absl::InvalidArgumentError(absl::StrCat(
            where_, ": unknown Metadata field '", EscapeBytes(key.text),
            "' (not written by PyTorch 2.6; this reader reads ",
            kSupportedLayout, ")"));
      }
    }
    const PyValue* entries = state->Get("state_dict_metadata");
    const PyValue* storage = state->Get("storage_data");
    if (entries == nullptr || entries->kind != Kind::kDict) {
      return Bad("Metadata", "state_dict_metadata (a dict)");
    }
    if (storage == nullptr || storage->kind != Kind::kDict) {
      return Bad("Metadata", "storage_data (a dict)");
    }
    STRATA_RETURN_IF_ERROR(DecodeStorage(*storage));
    Metadata metadata;
    for (size_t i = 0; i < entries->items.size(); i += 2) {
      const PyValue& key = *entries->items[i];
      if (key.kind != Kind::kStr) {
        return Bad("state_dict_metadata", "a key (a str)");
      }
      const std::string& name = key.text;
      if (metadata.tensors.count(name) || metadata.values.count(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where_, ": key '", EscapeBytes(name), "' appears twice"));
      }
      const PyValue& entry = *entries->items[i + 1];
      if (entry.kind == Kind::kObject &&
          entry.text == absl::StrCat(kModule, "BytesStorageMetadata")) {
        STRATA_ASSIGN_OR_RETURN(metadata.values[name],
                                TakeStorage(name, nullptr));
        continue;
      }
      STRATA_ASSIGN_OR_RETURN(metadata.tensors[name],
                              DecodeTensor(name, entry));
    }
    if (!storage_.empty()) {
      const auto& [fqn, offsets] = storage_.begin()->first;
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": storage_data has an entry for '", EscapeBytes(fqn), "'",
          offsets.has_offsets ? " at offsets " + Join(offsets.offsets) : "",
          " that no tensor chunk or value of state_dict_metadata names"));
    }
    return metadata;
  }

 private:
  // A MetadataIndex: the key's name and, for a tensor chunk, its offsets.
  struct Offsets {
    bool has_offsets = false;
    std::vector<int64_t> offsets;
    bool operator<(const Offsets& other) const {
      return std::tie(has_offsets, offsets) <
             std::tie(other.has_offsets, other.offsets);
    }
  };
  using Index = std::pair<std::string, Offsets>;

  static std::string Join(const std::vector<int64_t>& values) {
    return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
  }

  absl::Status Bad(const std::string& what, const std::string& field) const {
    return absl::InvalidArgumentError(
        absl::StrCat(where_, ": ", what, " has no valid ", field,
                     " (not a DCP .metadata file as PyTorch 2.6 writes it, "
                     "or corrupted)"));
  }

  // `value` must be an object of class `cls` with a state; sets `state`.
  absl::Status ObjectState(const PyValue& value, const std::string& cls,
                           const std::string& what,
                           const PyValue** state) const {
    if (value.kind != Kind::kObject || value.text != cls) {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": ", what, " is ", value.Describe(), ", expected ", cls,
          " (not a DCP .metadata file as PyTorch 2.6 writes it, or "
          "corrupted)"));
    }
    if (value.state == nullptr) return Bad(what, "state");
    *state = value.state;
    return absl::OkStatus();
  }

  // A torch.Size of non-negative ints.
  absl::Status Size(const PyValue* value, const std::string& what,
                    std::vector<int64_t>* out) const {
    if (value == nullptr || value->kind != Kind::kObject ||
        value->text != "torch.Size" || value->args == nullptr ||
        value->args->items.size() != 1 || value->state != nullptr ||
        value->args->items[0]->kind != Kind::kTuple) {
      return Bad(what, "torch.Size");
    }
    const PyValue* tuple = value->args->items[0];
    out->clear();
    for (const PyValue* item : tuple->items) {
      if (item->kind != Kind::kInt || item->integer < 0) {
        return Bad(what, "torch.Size (non-negative ints)");
      }
      out->push_back(item->integer);
    }
    return absl::OkStatus();
  }

  absl::Status DecodeStorage(const PyValue& storage) {
    for (size_t i = 0; i < storage.items.size(); i += 2) {
      const PyValue* state = nullptr;
      STRATA_RETURN_IF_ERROR(ObjectState(*storage.items[i],
                                         absl::StrCat(kModule, "MetadataIndex"),
                                         "a storage_data key", &state));
      const PyValue* fqn = state->Get("fqn");
      if (state->kind != Kind::kDict || fqn == nullptr ||
          fqn->kind != Kind::kStr) {
        return Bad("a storage_data key", "fqn");
      }
      const std::string what = absl::StrCat("the storage_data key of '",
                                            EscapeBytes(fqn->text), "'");
      Offsets offsets;
      const PyValue* offset = state->Get("offset");
      if (offset != nullptr && offset->kind != Kind::kNone) {
        offsets.has_offsets = true;
        STRATA_RETURN_IF_ERROR(Size(offset, what, &offsets.offsets));
      }
      const PyValue* info = nullptr;
      STRATA_RETURN_IF_ERROR(ObjectState(
          *storage.items[i + 1], kStorageInfo,
          absl::StrCat("the storage of '", EscapeBytes(fqn->text), "'"),
          &info));
      if (info->kind != Kind::kDict) return Bad(what, "_StorageInfo");
      if (info->Get("transform_descriptors") != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            where_, ": the item of '", EscapeBytes(fqn->text),
            "' has transform_descriptors (written by a PyTorch release newer "
            "than 2.6 with storage transforms), not supported: this reader "
            "reads ",
            kSupportedLayout));
      }
      const PyValue* path = info->Get("relative_path");
      const PyValue* start = info->Get("offset");
      const PyValue* length = info->Get("length");
      if (path == nullptr || path->kind != Kind::kStr || start == nullptr ||
          start->kind != Kind::kInt || start->integer < 0 ||
          length == nullptr || length->kind != Kind::kInt ||
          length->integer < 0) {
        return Bad(what, "_StorageInfo (relative_path, offset, length)");
      }
      // Items live in the checkpoint's own directory: a path elsewhere is
      // crafted or corrupted, never followed.
      if (path->text.empty() || path->text == "." || path->text == ".." ||
          absl::StrContains(path->text, '/') ||
          absl::StrContains(path->text, '\0') || path->text == kMetadataFile) {
        return absl::InvalidArgumentError(
            absl::StrCat(where_, ": the item of '", EscapeBytes(fqn->text),
                         "' is in '", EscapeBytes(path->text),
                         "', not a data file of the checkpoint's directory"));
      }
      Index index{fqn->text, std::move(offsets)};
      if (storage_.count(index)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where_, ": ", what, " appears twice"));
      }
      storage_.emplace(
          std::move(index),
          StorageRange{path->text, start->integer, length->integer});
    }
    return absl::OkStatus();
  }

  // Removes and returns the storage of key `name` at `offsets` (null: a
  // value, not a chunk).
  absl::StatusOr<StorageRange> TakeStorage(
      const std::string& name, const std::vector<int64_t>* offsets) {
    Offsets key;
    if (offsets != nullptr) {
      key.has_offsets = true;
      key.offsets = *offsets;
    }
    auto it = storage_.find(Index{name, key});
    if (it == storage_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": no storage_data entry for '", EscapeBytes(name), "'",
          offsets != nullptr ? " at offsets " + Join(*offsets) : "",
          " (the item's bytes are nowhere; corrupted or incomplete "
          "checkpoint)"));
    }
    StorageRange range = std::move(it->second);
    storage_.erase(it);
    return range;
  }

  absl::StatusOr<at::ScalarType> Dtype(const PyValue& properties,
                                       const std::string& what) const {
    const PyValue* state = nullptr;
    STRATA_RETURN_IF_ERROR(
        ObjectState(properties, absl::StrCat(kModule, "TensorProperties"),
                    what + "'s properties", &state));
    // TensorProperties.__getstate__: (dtype, layout, requires_grad,
    // memory format encoding, pin_memory).
    if (state->kind != Kind::kTuple || state->items.size() != 5 ||
        state->items[0]->kind != Kind::kGlobal) {
      return Bad(what, "TensorProperties");
    }
    const PyValue& layout = *state->items[1];
    const bool strided = layout.kind == Kind::kObject &&
                         layout.text == "torch.serialization._get_layout" &&
                         layout.args != nullptr &&
                         layout.args->items.size() == 1 &&
                         layout.args->items[0]->kind == Kind::kStr &&
                         layout.args->items[0]->text == "torch.strided";
    if (!strided) {
      return absl::InvalidArgumentError(
          absl::StrCat(where_, ": ", what,
                       " is not a strided (dense) tensor; sparse and other "
                       "layouts are not supported"));
    }
    const std::string& spelled = state->items[0]->text;
    std::optional<at::ScalarType> dtype;
    if (absl::StartsWith(spelled, "torch.")) {
      dtype = DcpDtype(absl::string_view(spelled).substr(6));
    }
    if (!dtype.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": ", what, " has dtype ", EscapeBytes(spelled),
          ", not supported (float64/32/16, bfloat16, int64/32/16/8, uint8, "
          "bool)"));
    }
    return *dtype;
  }

  absl::StatusOr<SavedTensor> DecodeTensor(const std::string& name,
                                           const PyValue& entry) {
    const std::string what = absl::StrCat("'", EscapeBytes(name), "'");
    const PyValue* state = nullptr;
    STRATA_RETURN_IF_ERROR(ObjectState(
        entry, absl::StrCat(kModule, "TensorStorageMetadata"), what, &state));
    const PyValue* properties = state->Get("properties");
    const PyValue* chunks = state->Get("chunks");
    if (properties == nullptr) return Bad(what, "properties");
    if (chunks == nullptr || chunks->kind != Kind::kList) {
      return Bad(what, "chunks (a list)");
    }
    SavedTensor info;
    STRATA_ASSIGN_OR_RETURN(info.dtype, Dtype(*properties, what));
    STRATA_RETURN_IF_ERROR(Size(state->Get("size"), what, &info.shape));
    int64_t numel = 1;
    for (int64_t dim : info.shape) {
      if (__builtin_mul_overflow(numel, dim, &numel)) {
        return Bad(what, "size (too large)");
      }
    }
    int64_t covered = 0;
    for (const PyValue* item : chunks->items) {
      const PyValue* chunk_state = nullptr;
      STRATA_RETURN_IF_ERROR(
          ObjectState(*item, absl::StrCat(kModule, "ChunkStorageMetadata"),
                      what + "'s chunk", &chunk_state));
      Chunk chunk;
      STRATA_RETURN_IF_ERROR(
          Size(chunk_state->Get("offsets"), what + "'s chunk", &chunk.offsets));
      STRATA_RETURN_IF_ERROR(
          Size(chunk_state->Get("sizes"), what + "'s chunk", &chunk.sizes));
      if (chunk.offsets.size() != info.shape.size() ||
          chunk.sizes.size() != info.shape.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where_, ": ", what, " of shape ", Join(info.shape),
                         " has a chunk at ", Join(chunk.offsets), " of size ",
                         Join(chunk.sizes), " of another rank"));
      }
      int64_t chunk_numel = 1;
      for (size_t d = 0; d < info.shape.size(); ++d) {
        if (chunk.offsets[d] > info.shape[d] ||
            chunk.sizes[d] > info.shape[d] - chunk.offsets[d]) {
          return absl::InvalidArgumentError(
              absl::StrCat(where_, ": ", what, " of shape ", Join(info.shape),
                           " has a chunk at ", Join(chunk.offsets), " of size ",
                           Join(chunk.sizes), " that reaches outside it"));
        }
        chunk_numel *= chunk.sizes[d];  // <= numel: no overflow
      }
      if (__builtin_add_overflow(covered, chunk_numel, &covered)) {
        return Bad(what, "chunks (too many elements)");
      }
      STRATA_ASSIGN_OR_RETURN(chunk.storage, TakeStorage(name, &chunk.offsets));
      info.chunks.push_back(std::move(chunk));
    }
    if (covered != numel) {
      return absl::InvalidArgumentError(absl::StrCat(
          where_, ": the chunks of ", what, " (shape ", Join(info.shape), ", ",
          numel, " elements) hold ", covered,
          " elements: they do not cover it exactly once (corrupted, or "
          "saved from replicated tensors without deduplication)"));
    }
    return info;
  }

  const std::string& where_;
  std::map<Index, StorageRange> storage_;
};

}  // namespace

const char* DcpDtypeName(at::ScalarType dtype) {
  for (const DtypeSpelling& d : kDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  return nullptr;
}

std::optional<at::ScalarType> DcpDtype(absl::string_view name) {
  for (const DtypeSpelling& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

absl::StatusOr<Metadata> ParseMetadata(absl::string_view pickle,
                                       const std::string& where) {
  STRATA_ASSIGN_OR_RETURN(
      const std::unique_ptr<serialization::PickledObjects> objects,
      serialization::ReadObjectPickle(pickle, where));
  return Decoder(where).Decode(objects->root());
}

absl::StatusOr<Metadata> ReadMetadata(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kMetadataFile);
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a torch.distributed.checkpoint directory (no ",
                     kMetadataFile, " file)"));
  }
  STRATA_ASSIGN_OR_RETURN(const std::string pickle, ReadWholeFile(path));
  return ParseMetadata(pickle, path);
}

bool IsDcpCheckpoint(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return false;
  const std::string metadata = absl::StrCat(path, "/", kMetadataFile);
  return stat(metadata.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace strata::checkpoint::dcp
