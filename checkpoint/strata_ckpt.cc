// strata_ckpt: inspect, verify and convert Strata checkpoints.
//
//   strata_ckpt inspect PATH          format, step, world size, strategy,
//                                     optimizer and every tensor's shape and
//                                     dtype
//   strata_ckpt verify PATH           every checksum; exit 1 naming the
//                                     first bad chunk or tensor
//   strata_ckpt convert SRC DST FMT   to FMT = full (from sharded or local,
//                                     like DeepSpeed's zero_to_fp32) or
//                                     sharded (from full or local)
//
// PATH is a full checkpoint (a file) or a sharded / local one (a
// directory). Conversion holds the whole state in memory once. A full
// checkpoint written by convert has the param groups of the optimizer the
// source records (meta.optimizer) with Strata's default hyperparameters
// (OptimizerHyperparameters: sharded and local checkpoints record the
// optimizer, not its lr, betas or momentum); set those in PyTorch before
// stepping.
#include <glog/logging.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/contents.h"
#include "checkpoint/full.h"
#include "checkpoint/local.h"
#include "checkpoint/metadata.h"
#include "checkpoint/sharded.h"

namespace strata::checkpoint {
namespace {

constexpr char kUsage[] =
    "usage: strata_ckpt inspect PATH | verify PATH | convert SRC DST "
    "full|sharded";

struct Source {
  std::string format;  // "full", "sharded", "local".
  TensorState state;   // Only when read.
  Contents contents;
  std::vector<std::string> parameter_order;
};

absl::StatusOr<std::string> FormatOf(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return std::string("full");
  STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(path));
  if (md.format() == kShardedFormat) return std::string("sharded");
  if (md.format() == kLocalFormat) return std::string("local");
  return absl::InvalidArgumentError(
      absl::StrCat("'", path, "' has unknown format '", md.format(), "'"));
}

// Reads (and so verifies) the whole checkpoint.
absl::StatusOr<Source> ReadAll(const std::string& path) {
  Source s;
  STRATA_ASSIGN_OR_RETURN(s.format, FormatOf(path));
  if (s.format == "full") {
    STRATA_ASSIGN_OR_RETURN(ReadCheckpoint read, ReadFullCheckpoint(path));
    s.state = std::move(read.state);
    s.contents = std::move(read.contents);
    s.parameter_order = std::move(read.parameter_order);
    return s;
  }
  std::pair<TensorState, Contents> read;
  if (s.format == "sharded") {
    STRATA_ASSIGN_OR_RETURN(read, ReadShardedCheckpoint(path));
  } else {
    STRATA_ASSIGN_OR_RETURN(read, ReadLocalCheckpoint(path));
  }
  s.state = std::move(read.first);
  s.contents = std::move(read.second);
  for (const auto& run : s.state.model) {
    if (std::find(s.parameter_order.begin(), s.parameter_order.end(),
                  run.name) == s.parameter_order.end()) {
      s.parameter_order.push_back(run.name);
    }
  }
  return s;
}

void PrintMeta(const std::string& format, const Contents& c) {
  std::cout << "format: " << format << "\n"
            << "step: " << c.meta.step << "\n"
            << "world size: " << c.meta.world_size << "\n"
            << "strategy: " << c.meta.strategy << "\n"
            << "optimizer: "
            << (c.meta.optimizer.empty() ? "adamw (not recorded)"
                                         : c.meta.optimizer)
            << "\n"
            << "seed: " << c.meta.seed << "\n"
            << "time: " << c.meta.time << "\n"
            << "strata version: " << c.meta.strata_version << "\n"
            << "git hash: " << c.meta.git_hash << "\n"
            << "model config: " << c.meta.model_config << "\n";
}

void PrintTensor(const std::string& section, const std::string& name,
                 const std::vector<int64_t>& shape, const std::string& dtype) {
  std::cout << section << " " << name << " " << ShapeString(shape) << " "
            << dtype << "\n";
}

absl::Status Inspect(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string format, FormatOf(path));
  if (format == "full") {
    STRATA_ASSIGN_OR_RETURN(Source s, ReadAll(path));
    PrintMeta(format, s.contents);
    for (int section = 0; section < 2; ++section) {
      for (const auto& run : section == 0 ? s.state.model : s.state.optimizer) {
        PrintTensor(section == 0 ? "model" : "optimizer", run.name,
                    run.global_shape, DtypeName(run.local.scalar_type()));
      }
    }
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(proto::Metadata md, ReadMetadataFile(path));
  PrintMeta(format, ContentsFromProto(md));
  for (int section = 0; section < 2; ++section) {
    for (const proto::Tensor& t : section == 0 ? md.model() : md.optimizer()) {
      PrintTensor(section == 0 ? "model" : "optimizer", t.name(),
                  std::vector<int64_t>(t.global_shape().begin(),
                                       t.global_shape().end()),
                  t.dtype());
    }
  }
  return absl::OkStatus();
}

absl::Status Verify(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string format, FormatOf(path));
  if (format == "sharded") {
    STRATA_ASSIGN_OR_RETURN(int64_t bytes, VerifySharded(path));
    std::cout << "OK: " << path << " (sharded): " << bytes
              << " bytes, every chunk's checksums match\n";
    return absl::OkStatus();
  }
  STRATA_ASSIGN_OR_RETURN(Source s, ReadAll(path));
  std::cout << "OK: " << path << " (" << format
            << "): " << s.state.model.size() + s.state.optimizer.size()
            << " tensors, every checksum matches\n";
  return absl::OkStatus();
}

absl::Status Convert(const std::string& src, const std::string& dst,
                     const std::string& to) {
  STRATA_ASSIGN_OR_RETURN(Format format, ParseFormat(to, "target format"));
  if (format == Format::kLocal) {
    return absl::InvalidArgumentError(
        "convert writes full or sharded checkpoints; a local checkpoint "
        "belongs to the world size and strategy that saved it");
  }
  STRATA_ASSIGN_OR_RETURN(Source s, ReadAll(src));
  if (s.format == to) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", src, "' is already a ", to, " checkpoint"));
  }
  SaveOptions options;
  options.format = format;
  STRATA_RETURN_IF_ERROR(
      SaveState(dst, s.state, s.contents, s.contents.meta.strategy,
                ModelParameters{s.parameter_order, {}},
                OptimizerHyperparameters(), nullptr, options));
  std::cout << "wrote " << dst << " (" << to << ") from " << src << " ("
            << s.format << ")\n";
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::Status status;
  if (args.size() == 2 && args[0] == "inspect") {
    status = Inspect(args[1]);
  } else if (args.size() == 2 && args[0] == "verify") {
    status = Verify(args[1]);
  } else if (args.size() == 4 && args[0] == "convert") {
    status = Convert(args[1], args[2], args[3]);
  } else {
    std::cerr << kUsage << "\n";
    return 2;
  }
  if (!status.ok()) {
    std::cerr << "strata_ckpt: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace strata::checkpoint

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  return strata::checkpoint::Main(argc, argv);
}
