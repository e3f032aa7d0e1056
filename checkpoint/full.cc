#include "checkpoint/full.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <glog/logging.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/escape.h"
#include "base/file_io.h"
#include "base/status.h"
#include "checkpoint/save_plan.h"
#include "checkpoint/torch_optimizer.h"
#include "comm/exchange.h"
#include "serialization/pickle_writer.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint {
namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;

const std::set<std::string>& ReservedKeys() {
  static const auto* keys = new std::set<std::string>{
      "meta", "state_dict", "optimizer", "param_schedulers"};
  return *keys;
}

std::string RecordKey(const PlannedTensor& t) {
  return absl::StrCat(
      t.section == Section::kModel ? "state_dict/" : "optimizer/", t.name);
}

// Splits "<param>.<key>" where <param> is a known parameter.
bool SplitOptimizerName(const std::string& name,
                        const std::map<std::string, int64_t>& index,
                        int64_t* param, std::string* key) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  auto it = index.find(name.substr(0, dot));
  if (it == index.end()) return false;
  *param = it->second;
  *key = name.substr(dot + 1);
  return true;
}

std::vector<std::string> ParameterOrder(const SavePlan& plan,
                                        const FullOptions& options) {
  if (!options.parameter_order.empty()) return options.parameter_order;
  std::vector<std::string> order;
  for (const PlannedTensor& t : plan.tensors) {
    if (t.section == Section::kModel) order.push_back(t.name);
  }
  return order;
}

// The object saved: placeholders[j] stands for plan.tensors[j]. The
// optimizer's "step" is written as a value (`step`) in every parameter's
// state, as PyTorch keeps it, not as the placeholder; so are frozen
// parameters' moments left out (torch_optimizer.h).
c10::IValue BuildRoot(const SavePlan& plan, const Contents& contents,
                      const FullOptions& options,
                      const std::vector<at::Tensor>& placeholders,
                      const std::map<std::string, int64_t>& checksums,
                      int64_t step) {
  GenericDict root(c10::StringType::get(), c10::AnyType::get());
  GenericDict meta(c10::StringType::get(), c10::AnyType::get());
  const Meta& m = contents.meta;
  meta.insert("seed", static_cast<int64_t>(m.seed));
  meta.insert("time", m.time);
  meta.insert("strata_version", m.strata_version);
  meta.insert("git_hash", m.git_hash);
  meta.insert("step", m.step);
  meta.insert("world_size", static_cast<int64_t>(m.world_size));
  meta.insert("strategy", m.strategy);
  meta.insert("model_config", m.model_config);
  meta.insert("optimizer", m.optimizer);
  GenericDict sums(c10::StringType::get(), c10::IntType::get());
  for (const auto& [key, crc] : checksums) sums.insert(key, crc);
  meta.insert("checksums", sums);
  root.insert("meta", meta);

  const std::vector<std::string> order = ParameterOrder(plan, options);
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < order.size(); ++i) index[order[i]] = i;

  GenericDict state_dict(c10::StringType::get(), c10::TensorType::get());
  // Model tensors in parameter order, then any others in plan order.
  std::map<std::string, size_t> model_tensor;
  for (size_t j = 0; j < plan.tensors.size(); ++j) {
    if (plan.tensors[j].section == Section::kModel) {
      model_tensor[plan.tensors[j].name] = j;
    }
  }
  for (const std::string& name : order) {
    auto it = model_tensor.find(name);
    if (it != model_tensor.end())
      state_dict.insert(name, placeholders[it->second]);
  }
  for (size_t j = 0; j < plan.tensors.size(); ++j) {
    const PlannedTensor& t = plan.tensors[j];
    if (t.section == Section::kModel && index.count(t.name) == 0) {
      state_dict.insert(t.name, placeholders[j]);
    }
  }
  root.insert("state_dict", state_dict);

  bool has_optimizer = false;
  std::map<std::string, std::vector<std::pair<std::string, at::Tensor>>>
      per_param;
  std::vector<std::pair<std::string, at::Tensor>> others;
  for (size_t j = 0; j < plan.tensors.size(); ++j) {
    const PlannedTensor& t = plan.tensors[j];
    if (t.section != Section::kOptimizer) continue;
    has_optimizer = true;
    int64_t param;
    std::string key;
    if (t.name == "step") continue;  // Written per parameter, as a float.
    if (SplitOptimizerName(t.name, index, &param, &key)) {
      per_param[order[param]].emplace_back(key, placeholders[j]);
    } else {
      others.emplace_back(t.name, placeholders[j]);
    }
  }
  if (has_optimizer) {
    std::vector<TorchParameter> params;
    for (const std::string& name : order) {
      auto it = model_tensor.find(name);
      params.push_back({name,
                        it == model_tensor.end()
                            ? std::vector<int64_t>()
                            : plan.tensors[it->second].shape,
                        options.frozen.count(name) > 0});
    }
    root.insert("optimizer",
                BuildTorchOptimizer(params, contents.meta.optimizer,
                                    options.hyper, per_param, step, others));
  }

  GenericList schedulers(c10::AnyType::get());
  if (!contents.param_scheduler.empty()) {
    // Named fields with their own types, like a PyTorch scheduler's
    // state_dict(); bytes have no place in a schedule.
    GenericDict s(c10::StringType::get(), c10::AnyType::get());
    for (const auto& [key, value] : contents.param_scheduler) {
      if (const auto* i = std::get_if<int64_t>(&value)) s.insert(key, *i);
      if (const auto* d = std::get_if<double>(&value)) s.insert(key, *d);
      if (const auto* t = std::get_if<std::string>(&value)) s.insert(key, *t);
    }
    schedulers.push_back(s);
  }
  root.insert("param_schedulers", schedulers);

  for (const auto& [key, value] : contents.extra) {
    root.insert(key, ValueToIValue(value));
  }
  return root;
}

// --- Loading -----------------------------------------------------------------

struct SavedTensor {
  TensorInfo info;
  at::Tensor tensor;
  std::string record_key;  // For checksums.
};

absl::StatusOr<std::vector<SavedTensor>> ModelTensors(const std::string& path,
                                                      const GenericDict& root) {
  GenericDict model = root;
  if (root.contains("state_dict")) {
    if (!root.at("state_dict").isGenericDict()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "': \"state_dict\" is a ", root.at("state_dict").tagKind(),
          ", expected a dict of tensors"));
    }
    model = root.at("state_dict").toGenericDict();
  }
  std::vector<SavedTensor> out;
  for (const auto& entry : model) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path,
                       "' is not a checkpoint: it has no \"state_dict\" and is "
                       "not a dict of tensors (key ",
                       entry.key().isString()
                           ? "'" + EscapeBytes(entry.key().toStringRef()) + "'"
                           : entry.key().tagKind(),
                       " holds a ", entry.value().tagKind(), ")"));
    }
    SavedTensor s;
    s.info.name = entry.key().toStringRef();
    s.tensor = entry.value().toTensor();
    s.info.shape = s.tensor.sizes().vec();
    s.info.dtype = s.tensor.scalar_type();
    s.record_key = "state_dict/" + s.info.name;
    out.push_back(std::move(s));
  }
  return out;
}

// The optimizer's tensors under Strata's names (torch_optimizer.h), for
// the parameters of `options.parameter_order` (or the file's model tensors)
// with the shapes of the file's model tensors; `optimizer` gets what the
// file's param groups show (torch_optimizer.h), or stays as it is when the
// file has no optimizer.
absl::StatusOr<std::vector<SavedTensor>> OptimizerTensors(
    const std::string& path, const GenericDict& root,
    const std::vector<SavedTensor>& model, const FullOptions& options,
    std::string* optimizer) {
  std::vector<SavedTensor> out;
  if (!root.contains("optimizer")) return out;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<std::string> order = options.parameter_order;
  for (const SavedTensor& s : model) {
    shapes[s.info.name] = s.info.shape;
    if (options.parameter_order.empty()) order.push_back(s.info.name);
  }
  std::vector<TorchParameter> params;
  for (const std::string& name : order) {
    auto it = shapes.find(name);
    params.push_back({name,
                      it == shapes.end() ? std::vector<int64_t>() : it->second,
                      options.frozen.count(name) > 0});
  }
  STRATA_ASSIGN_OR_RETURN(
      TorchOptimizerState read,
      ReadTorchOptimizer(absl::StrCat("'", path, "' \"optimizer\""),
                         root.at("optimizer"), params));
  *optimizer = read.optimizer;
  for (auto& [name, tensor] : read.tensors) {
    SavedTensor s;
    s.info.name = name;
    s.tensor = std::move(tensor);
    s.info.shape = s.tensor.sizes().vec();
    s.info.dtype = s.tensor.scalar_type();
    s.record_key = "optimizer/" + s.info.name;
    out.push_back(std::move(s));
  }
  return out;
}

// The optimizer a file holds the state of: its meta "optimizer", or for a
// file without one (saved by PyTorch) the SGD kind its param groups show
// (`shown`, torch_optimizer.h; empty: the file has no optimizer), which
// then goes into `meta`. With `live` set (FullOptions::optimizer), another
// optimizer is an error (CheckOptimizer) naming the key it was read from.
absl::Status ResolveOptimizer(const std::string& path, const std::string& shown,
                              const std::string& live, Meta& meta) {
  if (shown.empty()) return absl::OkStatus();
  const bool recorded = !meta.optimizer.empty();
  if (!recorded && shown != kAdamOrAdamW) meta.optimizer = shown;
  if (live.empty()) return absl::OkStatus();
  return CheckOptimizer(absl::StrCat("checkpoint '", path, "' ",
                                     recorded ? "(meta \"optimizer\")"
                                              : "(\"optimizer\" param groups)"),
                        recorded ? meta.optimizer : shown, live);
}

Contents ContentsFromRoot(const GenericDict& root) {
  Contents c;
  if (root.contains("meta") && root.at("meta").isGenericDict()) {
    GenericDict meta = root.at("meta").toGenericDict();
    auto get_int = [&](const char* key, int64_t fallback) {
      return meta.contains(key) && meta.at(key).isInt() ? meta.at(key).toInt()
                                                        : fallback;
    };
    auto get_str = [&](const char* key) {
      return meta.contains(key) && meta.at(key).isString()
                 ? meta.at(key).toStringRef()
                 : std::string();
    };
    c.meta.step = get_int("step", 0);
    c.meta.seed = static_cast<uint64_t>(get_int("seed", 0));
    c.meta.world_size = static_cast<int>(get_int("world_size", 1));
    c.meta.time = get_str("time");
    c.meta.strata_version = get_str("strata_version");
    c.meta.git_hash = get_str("git_hash");
    c.meta.strategy = get_str("strategy");
    c.meta.model_config = get_str("model_config");
    c.meta.optimizer = get_str("optimizer");
  }
  if (root.contains("param_schedulers") &&
      root.at("param_schedulers").isList()) {
    // Held by value: at() returns a copy, and a range over the temporary's
    // list would dangle.
    const c10::IValue schedulers = root.at("param_schedulers");
    for (const c10::IValue& s : schedulers.toListRef()) {
      if (!s.isGenericDict()) continue;
      for (const auto& kv : s.toGenericDict()) {
        if (!kv.key().isString()) continue;
        const std::string& key = kv.key().toStringRef();
        const c10::IValue& v = kv.value();
        if (v.isInt()) c.param_scheduler.emplace_back(key, v.toInt());
        if (v.isDouble()) c.param_scheduler.emplace_back(key, v.toDouble());
        if (v.isString()) {
          c.param_scheduler.emplace_back(key, v.toStringRef());
        }
      }
      break;
    }
  }
  if (root.contains("state_dict")) {
    for (const auto& kv : root) {
      if (!kv.key().isString()) continue;
      const std::string key = kv.key().toStringRef();
      if (ReservedKeys().count(key) > 0) continue;
      std::optional<Value> value = ValueFromIValue(kv.value());
      if (value.has_value()) c.extra.emplace_back(key, *std::move(value));
    }
  }
  return c;
}

// Verifies `tensor` (contiguous, CPU) against the CRC-32C that meta
// "checksums" records for `record_key`, if any.
absl::Status VerifyChecksum(const std::string& path,
                            const std::string& record_key,
                            const at::Tensor& tensor,
                            const std::map<std::string, int64_t>& checksums) {
  auto it = checksums.find(record_key);
  if (it == checksums.end()) return absl::OkStatus();
  const uint32_t crc =
      Crc32c(tensor.data_ptr(), tensor.numel() * tensor.element_size());
  if (crc != static_cast<uint32_t>(it->second)) {
    return absl::DataLossError(absl::StrFormat(
        "'%s' is corrupted: tensor '%s' fails its checksum (stored "
        "%08x, computed %08x)",
        path, EscapeBytes(record_key), static_cast<uint32_t>(it->second), crc));
  }
  return absl::OkStatus();
}

// Stages each matched live run: its saved tensor read from the file (one at
// a time, released before the next), verified, and the run's range copied
// out. The extra memory is the largest saved tensor plus the staged runs.
absl::Status Stage(const std::string& path,
                   const serialization::TorchFileReader& file,
                   const std::vector<ShardedTensor>& live,
                   const std::vector<SavedTensor>& saved,
                   const std::vector<int>& match,
                   const std::map<std::string, int64_t>& checksums,
                   std::vector<at::Tensor>& staged) {
  staged.assign(live.size(), at::Tensor());
  int current = -1;  // The saved tensor in `flat`.
  at::Tensor flat;
  for (size_t i = 0; i < live.size(); ++i) {
    if (match[i] < 0) continue;
    const SavedTensor& s = saved[match[i]];
    if (match[i] != current) {
      flat = at::Tensor();  // Released before the next is read.
      absl::StatusOr<at::Tensor> read = file.Materialize(s.tensor);
      if (!read.ok()) {
        return absl::Status(read.status().code(),
                            absl::StrCat("tensor '", EscapeBytes(s.record_key),
                                         "': ", read.status().message()));
      }
      flat = read->contiguous().reshape({-1});
      *read = at::Tensor();
      STRATA_RETURN_IF_ERROR(
          VerifyChecksum(path, s.record_key, flat, checksums));
      current = match[i];
    }
    const int64_t numel = live[i].local.numel();
    if (live[i].offset < 0 || live[i].offset + numel > flat.numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "': tensor '", EscapeBytes(s.record_key), "' has ",
          flat.numel(), " elements, the live run needs [", live[i].offset, ", ",
          live[i].offset + numel, ")"));
    }
    // A part is copied out so that the whole tensor is not kept.
    staged[i] = numel == flat.numel()
                    ? flat
                    : flat.narrow(0, live[i].offset, numel).clone();
  }
  return absl::OkStatus();
}

std::vector<std::string> Names(const std::vector<ShardedTensor>& runs) {
  std::vector<std::string> names;
  names.reserve(runs.size());
  for (const auto& run : runs) names.push_back(run.name);
  return names;
}

}  // namespace

absl::Status SaveFull(const std::string& path, const TensorState& state,
                      const Contents& contents, comm::Group* group,
                      const FullOptions& options) {
  const int rank = group == nullptr ? 0 : group->rank();
  STRATA_ASSIGN_OR_RETURN(SavePlan plan, MakeSavePlan(group, state));
  for (const auto& [key, value] : contents.extra) {
    if (ReservedKeys().count(key) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extra key '", key, "' is reserved by the full checkpoint layout"));
    }
  }

  // Rank 0: the archive, its records written as tensors arrive, into a
  // temporary file that replaces `path` (fsynced, renamed, directory
  // fsynced) only once complete.
  absl::Status local = absl::OkStatus();
  std::vector<at::Tensor> placeholders;
  std::unordered_map<const void*, size_t> record_of;  // Storage -> record.
  std::unique_ptr<AtomicFileWriter> file;
  std::unique_ptr<serialization::TorchArchiveWriter> archive;
  std::map<std::string, int64_t> checksums;
  serialization::Pickled first;
  if (rank == 0) {
    local = [&]() -> absl::Status {
      std::error_code ec;
      const auto parent = std::filesystem::path(path).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
      for (const PlannedTensor& t : plan.tensors) {
        // Untouched memory: pages are not resident until written.
        placeholders.push_back(at::empty(t.shape, at::TensorOptions(t.dtype)));
      }
      STRATA_ASSIGN_OR_RETURN(
          first, serialization::Pickle(
                     BuildRoot(plan, contents, options, placeholders, {}, 0)));
      for (size_t i = 0; i < first.tensors.size(); ++i) {
        record_of[first.tensors[i].storage().data()] = i;
      }
      STRATA_ASSIGN_OR_RETURN(file, AtomicFileWriter::Create(path));
      STRATA_ASSIGN_OR_RETURN(archive,
                              serialization::TorchArchiveWriter::Create(
                                  path, [&file](const void* data, size_t n) {
                                    return file->Append(data, n);
                                  }));
      return absl::OkStatus();
    }();
  }

  int tag = 0;
  int64_t step = 0;  // The optimizer's, once gathered (rank 0).
  for (size_t j = 0; j < plan.tensors.size(); ++j) {
    const PlannedTensor& t = plan.tensors[j];
    const auto& runs =
        t.section == Section::kModel ? state.model : state.optimizer;
    at::Tensor buffer;
    if (rank == 0) buffer = at::empty({NumElements(t.shape)}, t.dtype);
    for (const PlannedTensor::Piece& piece : t.pieces) {
      ++tag;
      if (piece.rank == rank) {
        const ShardedTensor& run = runs[piece.run];
        at::Tensor src = run.local.reshape({-1}).narrow(
            0, piece.offset - run.offset, piece.numel);
        if (rank == 0) {
          buffer.narrow(0, piece.offset, piece.numel).copy_(src);
        } else {
          STRATA_RETURN_IF_ERROR(group->Send(src, 0, tag));
        }
      } else if (rank == 0) {
        at::Tensor dst = buffer.narrow(0, piece.offset, piece.numel);
        STRATA_RETURN_IF_ERROR(group->Recv(dst, piece.rank, tag));
      }
    }
    if (rank == 0 && local.ok()) {
      if (t.section == Section::kOptimizer && t.name == "step") {
        step = buffer.item<int64_t>();
      }
      // Not every tensor is a record: "step" is written as a value, frozen
      // parameters' moments are left out (BuildRoot).
      auto record = record_of.find(placeholders[j].storage().data());
      if (record != record_of.end()) {
        const int64_t bytes = buffer.numel() * buffer.element_size();
        checksums[RecordKey(t)] = Crc32c(buffer.data_ptr(), bytes);
        local = archive->WriteStorage(
            record->second,
            absl::string_view(static_cast<const char*>(buffer.data_ptr()),
                              bytes));
      }
    }
  }

  if (rank == 0 && local.ok()) {
    local = [&]() -> absl::Status {
      // Tensors that are not state (extra bytes) are real already.
      std::set<const void*> placeholder_storage;
      for (const at::Tensor& p : placeholders) {
        placeholder_storage.insert(p.storage().data());
      }
      STRATA_ASSIGN_OR_RETURN(
          const serialization::Pickled second,
          serialization::Pickle(BuildRoot(plan, contents, options, placeholders,
                                          checksums, step)));
      CHECK_EQ(second.tensors.size(), first.tensors.size());
      for (size_t i = 0; i < second.tensors.size(); ++i) {
        const at::Tensor& t = second.tensors[i];
        if (placeholder_storage.count(t.storage().data()) > 0) continue;
        STRATA_RETURN_IF_ERROR(
            archive->WriteStorage(i, serialization::StorageBytes(t)));
      }
      STRATA_RETURN_IF_ERROR(archive->Finish(second.data));
      return file->Commit();
    }();
  }
  // Uncommitted (an error), the temporary file is removed.
  archive.reset();
  file.reset();
  return comm::AgreeOnStatus(group, local);
}

namespace {

// A full checkpoint file opened: its top-level dict (tensors not read yet,
// see TorchFileReader) and the per-tensor checksums its meta records (empty
// for files Strata did not write).
struct OpenedFull {
  std::unique_ptr<serialization::TorchFileReader> file;
  GenericDict root;
  std::map<std::string, int64_t> checksums;
};

absl::StatusOr<OpenedFull> OpenFull(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is a directory, not a full checkpoint (a file)"));
  }
  OpenedFull out{
      nullptr, GenericDict(c10::StringType::get(), c10::AnyType::get()), {}};
  STRATA_ASSIGN_OR_RETURN(out.file, serialization::TorchFileReader::Open(path));
  const c10::IValue& value = out.file->value();
  if (!value.isGenericDict()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a checkpoint: it holds a ",
                     value.tagKind(), ", expected a dict"));
  }
  out.root = value.toGenericDict();
  // Top-level tensors that are not state (extra bytes) are read now.
  for (auto& kv : out.root) {
    if (!kv.value().isTensor() ||
        (kv.key().isString() &&
         ReservedKeys().count(kv.key().toStringRef()) > 0)) {
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(at::Tensor read,
                            out.file->Materialize(kv.value().toTensor()));
    kv.setValue(read);
  }
  if (out.root.contains("meta") && out.root.at("meta").isGenericDict()) {
    GenericDict meta = out.root.at("meta").toGenericDict();
    if (meta.contains("checksums") && meta.at("checksums").isGenericDict()) {
      for (const auto& kv : meta.at("checksums").toGenericDict()) {
        if (!kv.key().isString() || !kv.value().isInt()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "'", path, "': meta \"checksums\" must map strings to ints"));
        }
        out.checksums[kv.key().toStringRef()] = kv.value().toInt();
      }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Contents> LoadFull(const std::string& path,
                                  const TensorState& live,
                                  const ReadOptions& options,
                                  comm::Group* group, const FullOptions& full) {
  STRATA_ASSIGN_OR_RETURN(const std::set<std::string> model_names,
                          comm::AllGatherNames(group, Names(live.model)));
  STRATA_ASSIGN_OR_RETURN(const std::set<std::string> optimizer_names,
                          comm::AllGatherNames(group, Names(live.optimizer)));
  std::vector<at::Tensor> model_staged, optimizer_staged;
  auto load = [&]() -> absl::StatusOr<Contents> {
    STRATA_ASSIGN_OR_RETURN(OpenedFull opened, OpenFull(path));
    const GenericDict& root = opened.root;
    const std::map<std::string, int64_t>& checksums = opened.checksums;
    STRATA_RETURN_IF_ERROR(CheckRuns(live.model));
    STRATA_RETURN_IF_ERROR(CheckRuns(live.optimizer));
    STRATA_ASSIGN_OR_RETURN(std::vector<SavedTensor> model,
                            ModelTensors(path, root));
    std::vector<TensorInfo> infos;
    infos.reserve(model.size());
    for (const auto& s : model) infos.push_back(s.info);
    STRATA_ASSIGN_OR_RETURN(
        std::vector<int> match,
        MatchRuns(absl::StrCat("checkpoint '", path, "' (model)"), live.model,
                  model_names, infos, options, /*revise=*/true,
                  options.model_keys));
    STRATA_RETURN_IF_ERROR(Stage(path, *opened.file, live.model, model, match,
                                 checksums, model_staged));
    Contents contents = ContentsFromRoot(root);
    if (options.load_optimizer) {
      std::string shown;
      STRATA_ASSIGN_OR_RETURN(
          std::vector<SavedTensor> optimizer,
          OptimizerTensors(path, root, model, full, &shown));
      STRATA_RETURN_IF_ERROR(
          ResolveOptimizer(path, shown, full.optimizer, contents.meta));
      infos.clear();
      for (const auto& s : optimizer) infos.push_back(s.info);
      STRATA_ASSIGN_OR_RETURN(
          match, MatchRuns(absl::StrCat("checkpoint '", path, "' (optimizer)"),
                           live.optimizer, optimizer_names, infos, options,
                           /*revise=*/false));
      STRATA_RETURN_IF_ERROR(Stage(path, *opened.file, live.optimizer,
                                   optimizer, match, checksums,
                                   optimizer_staged));
    }
    return contents;
  };
  // A malformed file that LibTorch's IValue accessors reject (c10::Error)
  // is an error like any other.
  absl::StatusOr<Contents> result = absl::UnknownError("not loaded");
  const absl::Status thrown = StatusFromCall(
      absl::StrCat("loading '", path, "'"), [&] { result = load(); });
  if (!thrown.ok()) result = thrown;
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, result.status()));
  CopyStaged(live.model, model_staged);
  if (options.load_optimizer) CopyStaged(live.optimizer, optimizer_staged);
  return result;
}

namespace {

absl::StatusOr<ReadCheckpoint> ReadWholeFull(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(OpenedFull opened, OpenFull(path));
  const GenericDict& root = opened.root;
  ReadCheckpoint out;
  STRATA_ASSIGN_OR_RETURN(std::vector<SavedTensor> model,
                          ModelTensors(path, root));
  for (const auto& s : model) out.parameter_order.push_back(s.info.name);
  FullOptions full;
  full.parameter_order = out.parameter_order;
  std::string shown;
  STRATA_ASSIGN_OR_RETURN(std::vector<SavedTensor> optimizer,
                          OptimizerTensors(path, root, model, full, &shown));
  for (int section = 0; section < 2; ++section) {
    const auto& saved = section == 0 ? model : optimizer;
    auto& runs = section == 0 ? out.state.model : out.state.optimizer;
    for (const SavedTensor& s : saved) {
      STRATA_ASSIGN_OR_RETURN(at::Tensor read,
                              opened.file->Materialize(s.tensor));
      read = read.contiguous();
      STRATA_RETURN_IF_ERROR(
          VerifyChecksum(path, s.record_key, read, opened.checksums));
      runs.push_back({s.info.name, s.info.shape, 0, read});
    }
  }
  // Records no tensor uses (e.g. "version") are verified too.
  STRATA_RETURN_IF_ERROR(opened.file->VerifyAllRecords());
  out.contents = ContentsFromRoot(root);
  STRATA_RETURN_IF_ERROR(ResolveOptimizer(path, shown, "", out.contents.meta));
  return out;
}

}  // namespace

absl::StatusOr<ReadCheckpoint> ReadFullCheckpoint(const std::string& path) {
  absl::StatusOr<ReadCheckpoint> result = absl::UnknownError("not read");
  const absl::Status thrown =
      StatusFromCall(absl::StrCat("reading '", path, "'"),
                     [&] { result = ReadWholeFull(path); });
  if (!thrown.ok()) return thrown;
  return result;
}

}  // namespace strata::checkpoint
