// strata_ckpt: inspect, verify and convert Strata checkpoints.
//
//   strata_ckpt inspect PATH          format, step, world size, strategy,
//                                     optimizer and every tensor's shape and
//                                     dtype
//   strata_ckpt verify PATH           every checksum; exit 1 naming the
//                                     first bad chunk or tensor
//   strata_ckpt convert SRC DST FMT   to FMT = full (from sharded, local or
//                                     dcp, like DeepSpeed's zero_to_fp32),
//                                     sharded (from full, local or dcp) or
//                                     dcp (PyTorch's torch.distributed.
//                                     checkpoint, which dcp.load reads at
//                                     any world size; from full, sharded or
//                                     local); SRC may also be a DCP
//                                     directory PyTorch wrote
//   strata_ckpt convert --to=dcp SRC DST   the same as FMT = dcp
//   strata_ckpt convert --from=hf-gpt2|hf-llama HF DST
//                                     a Hugging Face checkpoint (a
//                                     .safetensors file or a directory,
//                                     single or sharded, with config.json)
//                                     to a PyTorch state dict with Strata's
//                                     names (what train --load_weights
//                                     takes)
//   strata_ckpt convert --to=hf-gpt2|hf-llama [--model=NAME]
//                       [--max_shard_bytes=N] SRC DIR
//                                     Strata weights (a state dict such as
//                                     model.pt, or a full, sharded or local
//                                     checkpoint) to a Hugging Face
//                                     directory: model.safetensors (or
//                                     shards and an index past N bytes) and
//                                     config.json. --model names the config,
//                                     or is a Hugging Face config.json or
//                                     its directory (default: the checkpoint's
//                                     meta.model_config).
//
// PATH is a full checkpoint (a file) or a sharded / local / DCP one (a
// directory). Conversion holds the whole state in memory once. A full
// checkpoint written by convert has the param groups of the optimizer the
// source records (meta.optimizer) with Strata's default hyperparameters
// (OptimizerHyperparameters: sharded and local checkpoints record the
// optimizer, not its lr, betas or momentum); set those in PyTorch before
// stepping.
#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/status.h"
#include "checkpoint/contents.h"
#include "checkpoint/dcp/load.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/full.h"
#include "checkpoint/local.h"
#include "checkpoint/metadata.h"
#include "checkpoint/sharded.h"
#include "checkpoint/strategy/checkpoint.h"
#include "models/config.h"
#include "models/hf_config.h"
#include "models/hf_layout.h"
#include "models/state_dict.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint {
namespace {

constexpr char kUsage[] =
    "usage: strata_ckpt inspect PATH | verify PATH | convert SRC DST "
    "full|sharded|dcp\n"
    "       strata_ckpt convert --to=dcp SRC DST_DIR\n"
    "       strata_ckpt convert --from=hf-gpt2|hf-llama HF_PATH DST.pt\n"
    "       strata_ckpt convert --to=hf-gpt2|hf-llama [--model=NAME] "
    "[--max_shard_bytes=N] SRC DST_DIR";

struct Source {
  std::string format;  // "full", "sharded", "local", "dcp".
  TensorState state;   // Only when read.
  Contents contents;
  std::vector<std::string> parameter_order;
};

absl::StatusOr<std::string> FormatOf(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return std::string("full");
  if (dcp::IsDcpCheckpoint(path)) return std::string("dcp");
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
  } else if (s.format == "dcp") {
    STRATA_ASSIGN_OR_RETURN(read, dcp::ReadDcpCheckpoint(path));
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
  if (format == "full" || format == "dcp") {
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
            << " tensors, every checksum matches"
            << (format == "dcp" ? " (each item's zip CRC-32)" : "") << "\n";
  return absl::OkStatus();
}

absl::Status Convert(const std::string& src, const std::string& dst,
                     const std::string& to) {
  STRATA_ASSIGN_OR_RETURN(Format format, ParseFormat(to, "target format"));
  if (format == Format::kLocal) {
    return absl::InvalidArgumentError(
        "convert writes full, sharded or dcp checkpoints; a local checkpoint "
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

// The registered config with `config`'s shape, if any.
std::string NamedConfigLike(const models::ModelConfig& config) {
  for (const std::string& name : models::ConfigNames()) {
    if (models::ModelConfigRecord(name, config) == name) return name;
  }
  return "";
}

absl::Status ImportFromHf(const std::string& layout, const std::string& src,
                          const std::string& dst) {
  STRATA_ASSIGN_OR_RETURN(std::string family, models::HfFamilyFromName(layout));
  const std::string config_path = models::HfConfigPath(src);
  STRATA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(config_path));
  STRATA_ASSIGN_OR_RETURN(
      models::ModelConfig config,
      models::ModelConfigFromHfJson(text, config_path, family));
  STRATA_ASSIGN_OR_RETURN(models::NamedTensors hf, models::ReadHfWeights(src));
  STRATA_ASSIGN_OR_RETURN(models::NamedTensors strata,
                          models::ImportHf(hf, config, src));
  STRATA_RETURN_IF_ERROR(models::SaveStateDict(strata, dst));
  const std::string named = NamedConfigLike(config);
  std::cout << "wrote " << dst << " (" << strata.size()
            << " tensors, Strata names) from " << src << " (" << layout << ")"
            << (named.empty() ? "" : "; model config: --model=" + named)
            << "\n";
  return absl::OkStatus();
}

// Strata weights: a {name: tensor} PyTorch file, or a checkpoint's model
// (assembled from its runs). `config_name` gets meta.model_config when the
// source is a checkpoint.
absl::StatusOr<models::NamedTensors> ReadStrataWeights(
    const std::string& src, std::string* config_name) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(src, ec)) {
    STRATA_ASSIGN_OR_RETURN(c10::IValue value,
                            serialization::ReadTorchFile(src));
    if (value.isGenericDict() && !value.toGenericDict().contains("meta")) {
      models::NamedTensors tensors;
      for (const auto& entry : value.toGenericDict()) {
        if (!entry.key().isString() || !entry.value().isTensor()) {
          return absl::InvalidArgumentError(absl::StrCat(
              src,
              ": expected a state dict (a dict of named tensors) or a "
              "Strata checkpoint"));
        }
        tensors.emplace_back(entry.key().toStringRef(),
                             entry.value().toTensor());
      }
      return tensors;
    }
  }
  STRATA_ASSIGN_OR_RETURN(Source s, ReadAll(src));
  *config_name = s.contents.meta.model_config;
  std::map<std::string, at::Tensor> flat;
  models::NamedTensors tensors;
  for (const ShardedTensor& run : s.state.model) {
    at::Tensor& whole = flat[run.name];
    if (!whole.defined()) {
      int64_t numel = 1;
      for (int64_t d : run.global_shape) numel *= d;
      whole = at::empty({numel}, run.local.options());
      tensors.emplace_back(run.name, whole.view(run.global_shape));
    }
    whole.narrow(0, run.offset, run.local.numel())
        .copy_(run.local.reshape({-1}));
  }
  return tensors;
}

absl::Status ExportToHf(const std::string& layout, const std::string& src,
                        const std::string& dst, std::string model_name,
                        int64_t max_shard_bytes) {
  STRATA_ASSIGN_OR_RETURN(std::string family, models::HfFamilyFromName(layout));
  std::string recorded;
  STRATA_ASSIGN_OR_RETURN(models::NamedTensors strata,
                          ReadStrataWeights(src, &recorded));
  models::ModelConfig config;
  if (!model_name.empty()) {
    absl::StatusOr<models::ModelConfig> named =
        models::ModelConfigByNameOrPath(model_name);
    if (!named.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model=", model_name, ": ", named.status().message()));
    }
    config = *std::move(named);
    model_name = "--model=" + model_name;
  } else if (!recorded.empty()) {
    STRATA_ASSIGN_OR_RETURN(config,
                            models::ModelConfigFromRecord(recorded, src));
    const std::string named = NamedConfigLike(config);
    model_name = absl::StrCat(named.empty() ? "its config" : named,
                              ", recorded in ", src);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--to=", layout, ": ", src,
        " does not record its model config; name it with --model=NAME (",
        absl::StrJoin(models::ConfigNames(), ", "),
        ") or --model=PATH (a Hugging Face config.json or its directory)"));
  }
  if (config.family != family) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_name, ": a ", config.family,
                     " model, but --to=", layout, " writes ", family));
  }
  STRATA_ASSIGN_OR_RETURN(models::NamedTensors hf,
                          models::ExportHf(strata, config, src));
  STRATA_RETURN_IF_ERROR(
      models::WriteHfModel(dst, hf, config, max_shard_bytes));
  std::cout << "wrote " << dst << " (" << layout << ", " << hf.size()
            << " tensors) from " << src << " (" << model_name << ")\n";
  return absl::OkStatus();
}

// convert with --from / --to: flags anywhere, two paths.
absl::Status ConvertHf(const std::vector<std::string>& args) {
  std::map<std::string, std::string> flags;
  std::vector<std::string> paths;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      paths.push_back(args[i]);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string key(arg.substr(0, eq));
    if (eq == absl::string_view::npos ||
        (key != "from" && key != "to" && key != "model" &&
         key != "max_shard_bytes")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", args[i],
                       "' (convert takes --from=, --to=, --model=, "
                       "--max_shard_bytes=)"));
    }
    flags[key] = std::string(arg.substr(eq + 1));
  }
  if (paths.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("convert takes two paths (SRC DST), got ", paths.size()));
  }
  if (flags.count("from") == flags.count("to")) {
    return absl::InvalidArgumentError(
        "convert takes one of --from=hf-gpt2|hf-llama and --to=...");
  }
  if (flags.count("to") && flags["to"] == "dcp") {
    if (flags.count("model") || flags.count("max_shard_bytes")) {
      return absl::InvalidArgumentError(
          "--model and --max_shard_bytes go with --to=hf-gpt2|hf-llama");
    }
    return Convert(paths[0], paths[1], "dcp");
  }
  if (flags.count("from")) {
    if (flags.count("model") || flags.count("max_shard_bytes")) {
      return absl::InvalidArgumentError(
          "--model and --max_shard_bytes go with --to (--from reads the "
          "config from config.json)");
    }
    return ImportFromHf(flags["from"], paths[0], paths[1]);
  }
  int64_t max_shard_bytes = 0;
  if (flags.count("max_shard_bytes") &&
      (!absl::SimpleAtoi(flags["max_shard_bytes"], &max_shard_bytes) ||
       max_shard_bytes < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_shard_bytes=", flags["max_shard_bytes"],
                     ": expected a byte count (0: one file)"));
  }
  return ExportToHf(flags["to"], paths[0], paths[1], flags["model"],
                    max_shard_bytes);
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool hf = std::any_of(args.begin(), args.end(), [](const auto& a) {
    return absl::StartsWith(a, "--");
  });
  absl::Status status;
  if (!args.empty() && args[0] == "convert" && hf) {
    status = ConvertHf(args);
  } else if (args.size() == 2 && args[0] == "inspect") {
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
