#include "checkpoint/local.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/escape.h"
#include "base/file_io.h"
#include "base/status.h"
#include "checkpoint/io.h"
#include "checkpoint/metadata.h"
#include "checkpoint/metadata.pb.h"
#include "checkpoint/save_plan.h"
#include "comm/exchange.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint {
namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;

std::vector<int64_t> Ints(const c10::IValue& v) {
  std::vector<int64_t> out;
  for (const c10::IValue& x : v.toListRef()) out.push_back(x.toInt());
  return out;
}

std::string RankFile(int rank) { return absl::StrCat("rank", rank, ".pth"); }

uint32_t TensorCrc(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return Crc32c(c.data_ptr(), c.numel() * c.element_size());
}

std::string Describe(int section, const std::string& name, int64_t offset,
                     int64_t numel) {
  return absl::StrFormat("%s '%s' elements [%d, %d)",
                         section == 0 ? "model tensor" : "optimizer tensor",
                         name, offset, offset + numel);
}

}  // namespace

absl::Status SaveLocal(const std::string& dir, const TensorState& state,
                       const Contents& contents, const std::string& strategy,
                       comm::Group* group) {
  const int rank = group == nullptr ? 0 : group->rank();
  const int world = group == nullptr ? 1 : group->size();
  STRATA_RETURN_IF_ERROR(CheckRuns(state.model));
  STRATA_RETURN_IF_ERROR(CheckRuns(state.optimizer));
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(
      group, rank == 0 ? PrepareStagingDir(dir) : absl::OkStatus()));
  absl::Status written = [&]() -> absl::Status {
    GenericDict root(c10::StringType::get(), c10::AnyType::get());
    root.insert("rank", static_cast<int64_t>(rank));
    root.insert("world_size", static_cast<int64_t>(world));
    root.insert("strategy", strategy);
    GenericList runs(c10::AnyType::get());
    for (int section = 0; section < 2; ++section) {
      for (const auto& run : section == 0 ? state.model : state.optimizer) {
        GenericDict r(c10::StringType::get(), c10::AnyType::get());
        r.insert("section", static_cast<int64_t>(section));
        r.insert("name", run.name);
        r.insert("global_shape", c10::List<int64_t>(run.global_shape));
        r.insert("offset", run.offset);
        r.insert("tensor", run.local);
        r.insert("crc32c", static_cast<int64_t>(TensorCrc(run.local)));
        runs.push_back(r);
      }
    }
    root.insert("runs", runs);
    const std::string file = StagingDir(dir) + "/" + RankFile(rank);
    STRATA_ASSIGN_OR_RETURN(FileWriter writer, FileWriter::Create(file));
    STRATA_RETURN_IF_ERROR(serialization::WriteTorchArchive(
        c10::IValue(root), file, [&](const void* data, size_t size) {
          return writer.Append(data, size).status();
        }));
    return writer.SyncAndClose();
  }();
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, written));
  // The global description for metadata.pb (also checks the ranks agree).
  STRATA_ASSIGN_OR_RETURN(SavePlan plan, MakeSavePlan(group, state));
  absl::Status committed = absl::OkStatus();
  if (rank == 0) {
    committed = [&]() -> absl::Status {
      proto::Metadata md;
      md.set_format(kLocalFormat);
      md.set_format_version(1);
      Contents c = contents;
      c.meta.world_size = world;
      c.meta.strategy = strategy;
      ContentsToProto(c, md);
      for (int r = 0; r < world; ++r) md.add_files(RankFile(r));
      for (const PlannedTensor& t : plan.tensors) {
        proto::Tensor* out =
            t.section == Section::kModel ? md.add_model() : md.add_optimizer();
        out->set_name(t.name);
        for (int64_t d : t.shape) out->add_global_shape(d);
        out->set_dtype(DtypeName(t.dtype));
      }
      STRATA_RETURN_IF_ERROR(WriteMetadataFile(StagingDir(dir), md));
      return CommitStagingDir(dir);
    }();
  }
  return comm::AgreeOnStatus(group, committed);
}

absl::StatusOr<Contents> LoadLocal(const std::string& dir,
                                   const TensorState& live,
                                   const std::string& strategy,
                                   bool load_optimizer, comm::Group* group) {
  const int rank = group == nullptr ? 0 : group->rank();
  const int world = group == nullptr ? 1 : group->size();
  std::vector<at::Tensor> model_staged(live.model.size()),
      optimizer_staged(live.optimizer.size());
  auto load = [&]() -> absl::StatusOr<Contents> {
    STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(dir));
    if (md.format() != kLocalFormat) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", dir, "' is a '", md.format(), "' checkpoint, not a local one"));
    }
    if (md.meta().world_size() != world || md.meta().strategy() != strategy) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "local checkpoint '%s' was saved by %d rank(s) under strategy '%s' "
          "but this job has %d rank(s) under '%s': a local checkpoint loads "
          "only with the same world size and layout (save in the sharded or "
          "full format to change either)",
          dir, md.meta().world_size(), md.meta().strategy(), world, strategy));
    }
    const std::string path = dir + "/" + RankFile(rank);
    // The whole rank file (its runs may share one storage, e.g. a flat
    // buffer): every record's zip CRC-32 is verified as it is read.
    STRATA_ASSIGN_OR_RETURN(const c10::IValue value,
                            serialization::ReadTorchFile(path));
    if (!value.isGenericDict() || !value.toGenericDict().contains("runs")) {
      return absl::DataLossError(
          absl::StrCat("'", path, "' is not a Strata local checkpoint file"));
    }
    GenericDict root = value.toGenericDict();
    std::vector<c10::IValue> runs = root.at("runs").toListRef().vec();
    size_t next = 0;
    for (int section = 0; section < 2; ++section) {
      const auto& lives = section == 0 ? live.model : live.optimizer;
      auto& staged = section == 0 ? model_staged : optimizer_staged;
      for (size_t i = 0; i < lives.size(); ++i) {
        const auto& run = lives[i];
        const std::string want =
            Describe(section, run.name, run.offset, run.local.numel());
        if (next >= runs.size()) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "local checkpoint '%s' has another layout than this rank's "
              "state: rank %d holds %s, which '%s' lacks",
              dir, rank, want, path));
        }
        GenericDict r = runs[next++].toGenericDict();
        const at::Tensor tensor = r.at("tensor").toTensor();
        const std::string have =
            Describe(r.at("section").toInt(), r.at("name").toStringRef(),
                     r.at("offset").toInt(), tensor.numel());
        if (have != want || Ints(r.at("global_shape")) != run.global_shape) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "local checkpoint '%s' has another layout than this rank's "
              "state: run %d of '%s' is %s %s, rank %d holds %s %s",
              dir, next - 1, path, have,
              ShapeString(Ints(r.at("global_shape"))), rank, want,
              ShapeString(run.global_shape)));
        }
        if (static_cast<int64_t>(TensorCrc(tensor)) != r.at("crc32c").toInt()) {
          return absl::DataLossError(
              absl::StrFormat("'%s' is corrupted: %s fails its checksum", path,
                              EscapeBytes(have)));
        }
        staged[i] = tensor;
      }
    }
    if (next != runs.size()) {
      GenericDict r = runs[next].toGenericDict();
      return absl::InvalidArgumentError(absl::StrFormat(
          "local checkpoint '%s' has another layout than this rank's state: "
          "'%s' also holds %s",
          dir, path,
          Describe(r.at("section").toInt(), r.at("name").toStringRef(),
                   r.at("offset").toInt(), r.at("tensor").toTensor().numel())));
    }
    return ContentsFromProto(md);
  };
  // A malformed file that LibTorch's IValue accessors reject (c10::Error)
  // is an error like any other.
  absl::StatusOr<Contents> result = absl::UnknownError("not loaded");
  const absl::Status thrown = StatusFromCall(
      absl::StrCat("loading '", dir, "'"), [&] { result = load(); });
  if (!thrown.ok()) result = thrown;
  STRATA_RETURN_IF_ERROR(comm::AgreeOnStatus(group, result.status()));
  CopyStaged(live.model, model_staged);
  if (load_optimizer) CopyStaged(live.optimizer, optimizer_staged);
  return result;
}

absl::StatusOr<std::pair<TensorState, Contents>> ReadLocalCheckpoint(
    const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(dir));
  if (md.format() != kLocalFormat) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", dir, "' is a '", md.format(), "' checkpoint, not a local one"));
  }
  TensorState state;
  for (const std::string& file : md.files()) {
    const std::string path = absl::StrCat(dir, "/", file);
    STRATA_ASSIGN_OR_RETURN(c10::IValue value,
                            serialization::ReadTorchFile(path));
    if (!value.isGenericDict() || !value.toGenericDict().contains("runs")) {
      return absl::DataLossError(
          absl::StrCat("'", path, "' is not a Strata local checkpoint file"));
    }
    const c10::IValue runs = value.toGenericDict().at("runs");
    for (const c10::IValue& v : runs.toListRef()) {
      GenericDict r = v.toGenericDict();
      const at::Tensor tensor = r.at("tensor").toTensor().contiguous();
      const int section = static_cast<int>(r.at("section").toInt());
      if (static_cast<int64_t>(TensorCrc(tensor)) != r.at("crc32c").toInt()) {
        return absl::DataLossError(
            absl::StrFormat("'%s' is corrupted: %s fails its checksum", path,
                            Describe(section, r.at("name").toStringRef(),
                                     r.at("offset").toInt(), tensor.numel())));
      }
      (section == 0 ? state.model : state.optimizer)
          .push_back({r.at("name").toStringRef(), Ints(r.at("global_shape")),
                      r.at("offset").toInt(), tensor.reshape({-1})});
    }
  }
  return std::make_pair(std::move(state), ContentsFromProto(md));
}

}  // namespace strata::checkpoint
