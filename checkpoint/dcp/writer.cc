#include "checkpoint/dcp/writer.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <glog/logging.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/status.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/io.h"
#include "checkpoint/save_plan.h"
#include "comm/exchange.h"
#include "serialization/pickle_encoder.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint::dcp {
namespace {

using serialization::PickleEncoder;

constexpr char kMetadataModule[] = "torch.distributed.checkpoint.metadata";
constexpr char kFilesystemModule[] = "torch.distributed.checkpoint.filesystem";

std::string DataFile(int rank) { return absl::StrCat("__", rank, "_0.distcp"); }

void AppendBoxes(const std::vector<int64_t>& shape, size_t dim,
                 std::vector<int64_t>& prefix, int64_t base, int64_t begin,
                 int64_t end, std::vector<Box>& out) {
  if (begin >= end) return;
  if (dim == shape.size()) {  // One element (a 0-d tensor's).
    out.push_back({prefix, std::vector<int64_t>(prefix.size(), 1), base});
    return;
  }
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  // A box [prefix..., rows, everything after] starting at row `row`.
  auto whole_rows = [&](int64_t row, int64_t rows) {
    Box box;
    box.offsets = prefix;
    box.sizes.assign(prefix.size(), 1);
    box.offsets.push_back(row);
    box.sizes.push_back(rows);
    for (size_t d = dim + 1; d < shape.size(); ++d) {
      box.offsets.push_back(0);
      box.sizes.push_back(shape[d]);
    }
    box.begin = base + row * inner;
    out.push_back(std::move(box));
  };
  // Within one row: recurse into the dimensions after this one.
  auto part_row = [&](int64_t row, int64_t from, int64_t to) {
    prefix.push_back(row);
    AppendBoxes(shape, dim + 1, prefix, base + row * inner, from, to, out);
    prefix.pop_back();
  };
  if (begin % inner != 0) {
    const int64_t row = begin / inner;
    const int64_t row_end = std::min(end, (row + 1) * inner);
    part_row(row, begin - row * inner, row_end - row * inner);
    begin = row_end;
    if (begin >= end) return;
  }
  const int64_t first = begin / inner, last = end / inner;
  if (last > first) whole_rows(first, last - first);
  if (last * inner < end) part_row(last, 0, end - last * inner);
}

// One item of the checkpoint: a tensor chunk (`box` set) or a value.
struct Item {
  std::string key;
  std::optional<Box> box;
  // Where a chunk's data is: plan tensor `tensor`, run `run` of its section
  // on the writing rank; `step`: a parameter's step (from the "step" run).
  int tensor = -1;
  int run = -1;
  bool step = false;
  std::string file;
  int64_t offset = 0;
  int64_t length = 0;
};

// A saved tensor's description for the metadata.
struct TensorEntry {
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
};

// Where a key sits in the nested state dict (DCP's planner_data): its path
// of dict keys (str) and list indices (int).
using PathPart = std::variant<std::string, int64_t>;

struct Layout {
  // The model's parameters in order, their shapes, the trainable ones.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::vector<std::string> trainable;
  bool has_optimizer = false;
  // The key of each plan tensor ("" for the step, saved per parameter).
  std::vector<std::string> keys;
  // Tensor keys in order with their description, values in order.
  std::vector<std::pair<std::string, TensorEntry>> tensors;
  std::vector<std::string> values;
  std::map<std::string, std::vector<PathPart>> paths;
};

// --- The metadata pickle -----------------------------------------------------

void EncodeSize(PickleEncoder& e, const std::vector<int64_t>& dims) {
  e.Global("torch", "Size");
  e.Mark();
  e.Mark();
  for (int64_t d : dims) e.Int(d);
  e.Tuple();
  e.Tuple();
  e.Reduce();
}

// A dataclass instance: cls.__new__(cls), then its __dict__ from the
// key/value pairs `fields` pushes.
template <typename Fields>
void EncodeDataclass(PickleEncoder& e, const char* module, const char* cls,
                     Fields&& fields) {
  e.Global(module, cls);
  e.EmptyTuple();
  e.NewObj();
  e.EmptyDict();
  e.Mark();
  fields();
  e.SetItems();
  e.Build();
}

// TensorProperties' state is a tuple (its __getstate__): dtype, layout,
// requires_grad, memory format, pin_memory.
absl::Status EncodeProperties(PickleEncoder& e, at::ScalarType dtype) {
  const char* name = DcpDtypeName(dtype);
  if (name == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype ", c10::toString(dtype), " has no DCP spelling here"));
  }
  e.Global(kMetadataModule, "TensorProperties");
  e.EmptyTuple();
  e.NewObj();
  e.Mark();
  e.Global("torch", name);
  e.Global("torch.serialization", "_get_layout");
  e.Mark();
  e.String("torch.strided");
  e.Tuple();
  e.Reduce();
  e.Bool(false);
  e.Global(kMetadataModule, "_MEM_FORMAT_ENCODING");
  e.Mark();
  e.Int(0);  // TORCH_CONTIGUOUS_FORMAT
  e.Tuple();
  e.Reduce();
  e.Bool(false);
  e.Tuple();
  e.Build();
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeMetadata(const Layout& layout,
                                           const std::vector<Item>& items) {
  std::map<std::string, std::vector<const Item*>> chunks;
  for (const Item& item : items) chunks[item.key].push_back(&item);
  PickleEncoder e;
  absl::Status status;
  EncodeDataclass(e, kMetadataModule, "Metadata", [&] {
    e.String("state_dict_metadata");
    e.EmptyDict();
    e.Mark();
    for (const auto& [key, tensor] : layout.tensors) {
      e.String(key);
      EncodeDataclass(e, kMetadataModule, "TensorStorageMetadata", [&] {
        e.String("properties");
        status.Update(EncodeProperties(e, tensor.dtype));
        e.String("size");
        EncodeSize(e, tensor.shape);
        e.String("chunks");
        e.EmptyList();
        e.Mark();
        for (const Item* item : chunks[key]) {
          EncodeDataclass(e, kMetadataModule, "ChunkStorageMetadata", [&] {
            e.String("offsets");
            EncodeSize(e, item->box->offsets);
            e.String("sizes");
            EncodeSize(e, item->box->sizes);
          });
        }
        e.Appends();
      });
    }
    for (const std::string& key : layout.values) {
      e.String(key);
      e.Global(kMetadataModule, "BytesStorageMetadata");
      e.EmptyTuple();
      e.NewObj();
    }
    e.SetItems();
    e.String("planner_data");
    e.EmptyDict();
    e.Mark();
    for (const auto& [key, path] : layout.paths) {
      e.String(key);
      e.Mark();
      for (const PathPart& part : path) {
        if (const auto* s = std::get_if<std::string>(&part)) {
          e.String(*s);
        } else {
          e.Int(std::get<int64_t>(part));
        }
      }
      e.Tuple();
    }
    e.SetItems();
    e.String("storage_data");
    e.EmptyDict();
    e.Mark();
    for (const Item& item : items) {
      EncodeDataclass(e, kMetadataModule, "MetadataIndex", [&] {
        e.String("fqn");
        e.String(item.key);
        e.String("offset");
        if (item.box) {
          EncodeSize(e, item.box->offsets);
        } else {
          e.None();
        }
        e.String("index");
        e.None();
      });
      EncodeDataclass(e, kFilesystemModule, "_StorageInfo", [&] {
        e.String("relative_path");
        e.String(item.file);
        e.String("offset");
        e.Int(item.offset);
        e.String("length");
        e.Int(item.length);
      });
    }
    e.SetItems();
    e.String("storage_meta");
    e.None();
  });
  STRATA_RETURN_IF_ERROR(status);
  return e.Finish();
}

// --- What is saved -----------------------------------------------------------

std::vector<PathPart> Path(std::initializer_list<PathPart> parts) {
  return std::vector<PathPart>(parts);
}

// The DCP key of an optimizer run, and its path.
std::pair<std::string, std::vector<PathPart>> OptimizerKey(
    const std::string& name, const std::set<std::string>& params) {
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && params.count(name.substr(0, dot)) > 0) {
    return {
        kOptimizerStatePrefix + name,
        Path({"optim", "state", name.substr(0, dot), name.substr(dot + 1)})};
  }
  return {absl::StrCat(kStrataPrefix, "optim.", name),
          Path({"strata", "optim", name})};
}

std::string StepKey(const std::string& param) {
  return absl::StrCat(kOptimizerStatePrefix, param, ".step");
}

// Rank 0's values: key, path, value.
struct SavedValue {
  std::string key;
  std::vector<PathPart> path;
  c10::IValue value;
};

std::vector<SavedValue> ValuesOf(const Contents& contents, const Layout& layout,
                                 const std::set<std::string>& frozen,
                                 const OptimizerHyperparameters& hyper,
                                 int64_t step) {
  std::vector<SavedValue> out;
  auto add = [&](const std::string& group, const std::string& field,
                 c10::IValue v) {
    out.push_back({absl::StrCat(kStrataPrefix, group, ".", field),
                   Path({"strata", group, field}), std::move(v)});
  };
  const Meta& m = contents.meta;
  add("meta", "step", m.step);
  add("meta", "seed", static_cast<int64_t>(m.seed));
  add("meta", "time", m.time);
  add("meta", "strata_version", m.strata_version);
  add("meta", "git_hash", m.git_hash);
  add("meta", "world_size", static_cast<int64_t>(m.world_size));
  add("meta", "strategy", m.strategy);
  add("meta", "model_config", m.model_config);
  add("meta", "optimizer", m.optimizer);
  for (const auto& [key, value] : contents.param_scheduler) {
    add("param_scheduler", key, ValueToIValue(value));
  }
  for (const auto& [key, value] : contents.extra) {
    add("extra", key, ValueToIValue(value));
  }
  if (!layout.has_optimizer) return out;
  std::vector<TorchParameter> params;
  for (const std::string& name : layout.order) {
    auto it = layout.shapes.find(name);
    params.push_back(
        {name, it == layout.shapes.end() ? std::vector<int64_t>() : it->second,
         frozen.count(name) > 0});
  }
  const c10::impl::GenericDict optimizer =
      BuildTorchOptimizer(params, m.optimizer, hyper, {}, step, {});
  const c10::impl::GenericList names = optimizer.at("param_names").toList();
  const auto groups = optimizer.at("param_groups").toListRef();
  for (size_t g = 0; g < groups.size(); ++g) {
    // PyTorch 2.6's classes have two keys more than 1.13's (which
    // torch_optimizer.h writes): a strict dcp.load into a 2.6 optimizer's
    // state dict asks for them.
    c10::impl::GenericDict group = groups[g].toGenericDict();
    if (!group.contains("differentiable"))
      group.insert("differentiable", false);
    if (!group.contains("fused")) group.insert("fused", c10::IValue());
    for (const auto& entry : group) {
      const std::string field = entry.key().toStringRef();
      c10::IValue value = entry.value();
      if (field == "params") {
        c10::impl::GenericList fqns(c10::AnyType::get());
        for (const c10::IValue& index : value.toListRef()) {
          fqns.push_back(names.get(index.toInt()));
        }
        value = fqns;
      }
      out.push_back(
          {absl::StrCat(kParamGroupsPrefix, g, ".", field),
           Path({"optim", "param_groups", static_cast<int64_t>(g), field}),
           std::move(value)});
    }
  }
  return out;
}

// The int64s `values` as bytes, and back.
std::string PackInts(const std::vector<int64_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(int64_t));
}
std::vector<int64_t> UnpackInts(const std::string& bytes) {
  std::vector<int64_t> out(bytes.size() / sizeof(int64_t));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(int64_t));
  return out;
}

// The keys, paths and tensor entries of everything saved (the same on every
// rank: from the plan alone); rank 0 adds the values.
Layout MakeLayout(const SavePlan& plan, const WriteOptions& options) {
  Layout layout;
  layout.order = options.parameter_order;
  for (const PlannedTensor& t : plan.tensors) {
    if (t.section != Section::kModel) continue;
    layout.shapes[t.name] = t.shape;
    if (options.parameter_order.empty()) layout.order.push_back(t.name);
  }
  const std::set<std::string> params(layout.order.begin(), layout.order.end());
  for (const std::string& name : layout.order) {
    if (options.frozen.count(name) == 0) layout.trainable.push_back(name);
  }
  layout.keys.resize(plan.tensors.size());
  for (size_t j = 0; j < plan.tensors.size(); ++j) {
    const PlannedTensor& t = plan.tensors[j];
    std::string& key = layout.keys[j];
    if (t.section == Section::kModel) {
      key = "model." + t.name;
      layout.paths[key] = Path({"model", t.name});
    } else if (t.name == "step") {
      layout.has_optimizer = true;
      for (const std::string& p : layout.trainable) {
        const std::string step_key = StepKey(p);
        layout.tensors.push_back({step_key, {at::kFloat, {}}});
        layout.paths[step_key] = Path({"optim", "state", p, "step"});
      }
      continue;
    } else {
      layout.has_optimizer = true;
      auto [name, path] = OptimizerKey(t.name, params);
      key = name;
      layout.paths[key] = std::move(path);
    }
    layout.tensors.push_back({key, {t.dtype, t.shape}});
  }
  return layout;
}

// The chunks rank `rank` writes, in plan order: the boxes of its pieces,
// and for the "step" piece one scalar per trainable parameter.
std::vector<Item> ItemsOfRank(const SavePlan& plan, const Layout& layout,
                              int rank) {
  std::vector<Item> items;
  for (size_t j = 0; j < plan.tensors.size(); ++j) {
    const PlannedTensor& t = plan.tensors[j];
    for (const PlannedTensor::Piece& piece : t.pieces) {
      if (piece.rank != rank) continue;
      if (t.section == Section::kOptimizer && t.name == "step") {
        for (const std::string& p : layout.trainable) {
          Item item;
          item.key = StepKey(p);
          item.box = Box{};
          item.tensor = static_cast<int>(j);
          item.run = piece.run;
          item.step = true;
          items.push_back(std::move(item));
        }
        continue;
      }
      for (Box& box : BoxesOfRange(t.shape, piece.offset, piece.numel)) {
        Item item;
        item.key = layout.keys[j];
        item.box = std::move(box);
        item.tensor = static_cast<int>(j);
        item.run = piece.run;
        items.push_back(std::move(item));
      }
    }
  }
  return items;
}

// Appends `value` as one item (a torch.save archive) to `writer`.
absl::Status WriteItem(const std::string& dir, FileWriter& writer,
                       const c10::IValue& value, Item& item) {
  item.file = std::filesystem::path(writer.path()).filename().string();
  item.offset = writer.size();
  STRATA_RETURN_IF_ERROR(serialization::WriteTorchArchive(
      value, absl::StrCat(dir, "/", item.file, " (", item.key, ")"),
      [&](const void* data, size_t n) -> absl::Status {
        return writer.Append(data, n).status();
      }));
  item.length = writer.size() - item.offset;
  return absl::OkStatus();
}

// Each chunk of `items`: its box of the run, copied out contiguous.
absl::Status WriteChunks(const std::string& dir, const SavePlan& plan,
                         const TensorState& state, FileWriter& writer,
                         std::vector<Item>& items) {
  for (Item& item : items) {
    const PlannedTensor& t = plan.tensors[item.tensor];
    const ShardedTensor& run =
        (t.section == Section::kModel ? state.model
                                      : state.optimizer)[item.run];
    if (item.step) {
      const double step = static_cast<double>(run.local.item<int64_t>());
      STRATA_RETURN_IF_ERROR(
          WriteItem(dir, writer, at::full({}, step, at::kFloat), item));
      continue;
    }
    int64_t numel = 1;
    for (int64_t size : item.box->sizes) numel *= size;
    const at::Tensor chunk = run.local.reshape({-1})
                                 .narrow(0, item.box->begin - run.offset, numel)
                                 .reshape(item.box->sizes)
                                 .clone();
    STRATA_RETURN_IF_ERROR(WriteItem(dir, writer, chunk, item));
  }
  return absl::OkStatus();
}

// Rank 0: the values (contents, param groups) as items, added to `layout`.
absl::Status WriteValues(const std::string& dir, const TensorState& state,
                         const Contents& contents, const WriteOptions& options,
                         Layout& layout, FileWriter& writer,
                         std::vector<Item>& items) {
  int64_t step = 0;
  for (const ShardedTensor& run : state.optimizer) {
    if (run.name == "step") step = run.local.item<int64_t>();
  }
  for (SavedValue& v :
       ValuesOf(contents, layout, options.frozen, options.hyper, step)) {
    layout.values.push_back(v.key);
    layout.paths[v.key] = std::move(v.path);
    Item item;
    item.key = v.key;
    STRATA_RETURN_IF_ERROR(WriteItem(dir, writer, v.value, item));
    items.push_back(std::move(item));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Box> BoxesOfRange(const std::vector<int64_t>& shape, int64_t begin,
                              int64_t numel) {
  std::vector<Box> out;
  std::vector<int64_t> prefix;
  AppendBoxes(shape, 0, prefix, 0, begin, begin + numel, out);
  return out;
}

absl::Status SaveDcp(const std::string& dir, const TensorState& state,
                     const Contents& contents, comm::Group* group,
                     const WriteOptions& options) {
  const int rank = group == nullptr ? 0 : group->rank();
  const int world = group == nullptr ? 1 : group->size();
  STRATA_ASSIGN_OR_RETURN(const SavePlan plan, MakeSavePlan(group, state));
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(
      group, rank == 0 ? PrepareStagingDir(dir) : absl::OkStatus()));
  Layout layout = MakeLayout(plan, options);

  // This rank's items, in plan order, then (rank 0) the values.
  std::vector<Item> mine = ItemsOfRank(plan, layout, rank);
  absl::Status written = [&]() -> absl::Status {
    STRATA_ASSIGN_OR_RETURN(
        FileWriter writer,
        FileWriter::Create(StagingDir(dir) + "/" + DataFile(rank)));
    STRATA_RETURN_IF_ERROR(WriteChunks(dir, plan, state, writer, mine));
    if (rank == 0) {
      STRATA_RETURN_IF_ERROR(
          WriteValues(dir, state, contents, options, layout, writer, mine));
    }
    STRATA_RETURN_IF_ERROR(writer.SyncAndClose());
    if (options.before_commit) options.before_commit();
    return absl::OkStatus();
  }();
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, written));
  std::vector<int64_t> ranges;  // offset, length per item
  for (const Item& item : mine) {
    ranges.push_back(item.offset);
    ranges.push_back(item.length);
  }
  STRATA_ASSIGN_OR_RETURN(const std::vector<std::string> all_ranges,
                          comm::AllGatherBytes(group, PackInts(ranges)));

  absl::Status committed = absl::OkStatus();
  if (rank == 0) {
    committed = [&]() -> absl::Status {
      // Every rank's items, re-derived from the plan, with their ranges.
      std::vector<Item> items = mine;
      for (int r = 1; r < world; ++r) {
        std::vector<Item> theirs = ItemsOfRank(plan, layout, r);
        const std::vector<int64_t> at = UnpackInts(all_ranges[r]);
        if (at.size() != 2 * theirs.size()) {
          return absl::InternalError(absl::StrCat(
              "rank ", r, " wrote ", at.size() / 2, " items, its share of the ",
              "plan is ", theirs.size()));
        }
        for (size_t i = 0; i < theirs.size(); ++i) {
          theirs[i].file = DataFile(r);
          theirs[i].offset = at[2 * i];
          theirs[i].length = at[2 * i + 1];
          items.push_back(std::move(theirs[i]));
        }
      }
      STRATA_ASSIGN_OR_RETURN(const std::string pickle,
                              EncodeMetadata(layout, items));
      STRATA_RETURN_IF_ERROR(WriteFileAtomic(
          absl::StrCat(StagingDir(dir), "/", kMetadataFile), pickle));
      return CommitStagingDir(dir);
    }();
  }
  return comm::AgreeOnStatus(group, committed);
}

}  // namespace strata::checkpoint::dcp
