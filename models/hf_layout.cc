#include "models/hf_layout.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_io.h"
#include "base/json.h"
#include "base/status.h"
#include "models/factory.h"
#include "models/hf_config.h"
#include "models/state_dict.h"
#include "serialization/safetensors.h"

namespace strata::models {
namespace {

using Json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

// How a Strata tensor becomes its Hugging Face counterpart.
enum class Transform {
  kNone,
  kTranspose,  // Linear [out, in] <-> Conv1D [in, out].
  kRope,       // Interleaved pairs <-> rotate-half rows, per head.
};

struct Mapped {
  std::string hf_name;
  Transform transform = Transform::kNone;
  int64_t heads = 0;  // kRope: heads the rows split into.
};

// "<prefix><i>.<rest>" -> {i, rest}.
bool SplitLayer(absl::string_view name, absl::string_view prefix,
                std::string* layer, std::string* rest) {
  if (!absl::ConsumePrefix(&name, prefix)) return false;
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos) return false;
  *layer = std::string(name.substr(0, dot));
  *rest = std::string(name.substr(dot + 1));
  return true;
}

// The Hugging Face name and transform of a Strata parameter; NotFound for a
// name Strata's models do not have.
absl::StatusOr<Mapped> MapName(const std::string& name,
                               const models::ModelConfig& config) {
  std::string layer, rest;
  if (config.family == "gpt") {
    static const auto* kTop = new std::map<std::string, std::string>{
        {"wte.weight", "transformer.wte.weight"},
        {"wpe.weight", "transformer.wpe.weight"},
        {"ln_f.weight", "transformer.ln_f.weight"},
        {"ln_f.bias", "transformer.ln_f.bias"}};
    static const auto* kBlock = new std::map<std::string, Mapped>{
        {"ln_1.weight", {"ln_1.weight"}},
        {"ln_1.bias", {"ln_1.bias"}},
        {"attn.qkv.weight", {"attn.c_attn.weight", Transform::kTranspose}},
        {"attn.qkv.bias", {"attn.c_attn.bias"}},
        {"attn.proj.weight", {"attn.c_proj.weight", Transform::kTranspose}},
        {"attn.proj.bias", {"attn.c_proj.bias"}},
        {"ln_2.weight", {"ln_2.weight"}},
        {"ln_2.bias", {"ln_2.bias"}},
        {"mlp.fc.weight", {"mlp.c_fc.weight", Transform::kTranspose}},
        {"mlp.fc.bias", {"mlp.c_fc.bias"}},
        {"mlp.proj.weight", {"mlp.c_proj.weight", Transform::kTranspose}},
        {"mlp.proj.bias", {"mlp.c_proj.bias"}}};
    if (auto it = kTop->find(name); it != kTop->end()) {
      return Mapped{it->second};
    }
    if (SplitLayer(name, "blocks.", &layer, &rest)) {
      if (auto it = kBlock->find(rest); it != kBlock->end()) {
        Mapped m = it->second;
        m.hf_name = absl::StrCat("transformer.h.", layer, ".", m.hf_name);
        return m;
      }
    }
  } else {
    static const auto* kTop = new std::map<std::string, std::string>{
        {"tok_embeddings.weight", "model.embed_tokens.weight"},
        {"norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"}};
    static const auto* kLayer = new std::map<std::string, Mapped>{
        {"attention.wq.weight", {"self_attn.q_proj.weight", Transform::kRope}},
        {"attention.wk.weight", {"self_attn.k_proj.weight", Transform::kRope}},
        {"attention.wv.weight", {"self_attn.v_proj.weight"}},
        {"attention.wo.weight", {"self_attn.o_proj.weight"}},
        {"feed_forward.w1.weight", {"mlp.gate_proj.weight"}},
        {"feed_forward.w2.weight", {"mlp.down_proj.weight"}},
        {"feed_forward.w3.weight", {"mlp.up_proj.weight"}},
        {"attention_norm.weight", {"input_layernorm.weight"}},
        {"ffn_norm.weight", {"post_attention_layernorm.weight"}}};
    if (auto it = kTop->find(name); it != kTop->end()) {
      return Mapped{it->second};
    }
    if (SplitLayer(name, "layers.", &layer, &rest)) {
      if (auto it = kLayer->find(rest); it != kLayer->end()) {
        Mapped m = it->second;
        m.hf_name = absl::StrCat("model.layers.", layer, ".", m.hf_name);
        if (m.transform == Transform::kRope) {
          m.heads = rest == "attention.wq.weight" ? config.num_heads
                                                  : config.num_kv_heads;
        }
        return m;
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("no Hugging Face name for '", name,
                                          "' of a ", config.family, " model"));
}

std::vector<int64_t> HfShape(const Mapped& m, at::IntArrayRef strata_shape) {
  std::vector<int64_t> shape = strata_shape.vec();
  if (m.transform == Transform::kTranspose) std::swap(shape[0], shape[1]);
  return shape;
}

// Rows [heads, d] as pairs (2j, 2j + 1) <-> as halves (j, j + d/2).
at::Tensor PermuteRope(const at::Tensor& w, int64_t heads, bool to_hf) {
  const int64_t rows = w.size(0), cols = w.size(1);
  const int64_t half = rows / heads / 2;
  const at::Tensor c = w.contiguous();
  return (to_hf ? c.view({heads, half, 2, cols})
                : c.view({heads, 2, half, cols}))
      .transpose(1, 2)
      .reshape({rows, cols})
      .contiguous();
}

at::Tensor Apply(const Mapped& m, const at::Tensor& w, bool to_hf) {
  switch (m.transform) {
    case Transform::kNone:
      return w;
    case Transform::kTranspose:
      return w.t().contiguous();
    case Transform::kRope:
      return PermuteRope(w, m.heads, to_hf);
  }
  return w;
}

// The model's parameter names and shapes (a deferred build: no memory).
absl::StatusOr<std::vector<std::pair<std::string, std::vector<int64_t>>>>
ModelShapes(const models::ModelConfig& config) {
  models::BuildOptions options;
  options.deferred = true;
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<models::UnitModel> model,
                          models::BuildModel(config, options));
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto& [name, tensor] : models::NamedStateTensors(*model)) {
    shapes.emplace_back(name, tensor.sizes().vec());
  }
  return shapes;
}

std::string ShapeText(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Up to 10 names, then how many more.
std::string Listed(const std::vector<std::string>& names) {
  std::vector<std::string> shown(
      names.begin(), names.begin() + std::min<size_t>(names.size(), 10));
  std::string text = absl::StrCat("'", absl::StrJoin(shown, "', '"), "'");
  if (names.size() > shown.size()) {
    absl::StrAppend(&text, " and ", names.size() - shown.size(), " more");
  }
  return text;
}

// What keeps a set of tensors from being a model's: each list cut short.
std::vector<std::string> Problems(const std::vector<std::string>& missing,
                                  const std::vector<std::string>& unexpected,
                                  const std::vector<std::string>& misshaped) {
  std::vector<std::string> problems;
  if (!missing.empty()) {
    problems.push_back(
        absl::StrCat(missing.size(), " missing tensor(s): ", Listed(missing)));
  }
  if (!unexpected.empty()) {
    problems.push_back(absl::StrCat(
        unexpected.size(),
        " tensor(s) the model does not have: ", Listed(unexpected)));
  }
  if (!misshaped.empty()) {
    const size_t shown = std::min<size_t>(misshaped.size(), 5);
    std::string text = absl::StrCat(
        misshaped.size(), " shape mismatch(es): ",
        absl::StrJoin(misshaped.begin(), misshaped.begin() + shown, "; "));
    if (misshaped.size() > shown) {
      absl::StrAppend(&text, " and ", misshaped.size() - shown, " more");
    }
    problems.push_back(std::move(text));
  }
  return problems;
}

// Hugging Face buffers that are not weights.
bool IsSkippedBuffer(absl::string_view name) {
  return absl::EndsWith(name, ".attn.bias") ||
         absl::EndsWith(name, ".attn.masked_bias") ||
         absl::EndsWith(name, ".rotary_emb.inv_freq");
}

absl::StatusOr<std::shared_ptr<const serialization::SafetensorsFile>> OpenShard(
    const std::string& dir, const std::string& shard,
    const std::string& index_path) {
  if (shard.empty() || shard.find('/') != std::string::npos || shard == "." ||
      shard == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": shard file name '", shard,
                     "' must be a file name in the same directory"));
  }
  return serialization::SafetensorsFile::Open(dir + "/" + shard);
}

absl::StatusOr<NamedTensors> ReadSharded(const std::string& dir) {
  const std::string index_path = dir + "/" + kIndexFile;
  STRATA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(index_path));
  STRATA_ASSIGN_OR_RETURN(Json index, ParseJson(text, index_path));
  if (!index.is_object() || !index.contains("weight_map") ||
      !index["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, ": expected an object with a \"weight_map\" object"));
  }
  std::map<std::string, std::string> shard_of;  // Tensor -> shard file.
  std::map<std::string, std::vector<std::string>> shards;  // Shard -> names.
  for (const auto& item : index["weight_map"].items()) {
    if (!item.value().is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map['", item.key(),
                       "'] must be a shard file name (a string)"));
    }
    shard_of[item.key()] = item.value().get<std::string>();
    shards[item.value().get<std::string>()].push_back(item.key());
  }
  NamedTensors tensors;
  for (const auto& [shard, names] : shards) {
    STRATA_ASSIGN_OR_RETURN(auto file, OpenShard(dir, shard, index_path));
    for (const std::string& name : names) {
      if (!file->Contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, " maps '", name, "' to ", shard,
                         ", which has no such tensor"));
      }
    }
    for (auto& [name, tensor] : file->ViewAll()) {
      auto it = shard_of.find(name);
      if (it == shard_of.end() || it->second != shard) {
        return absl::InvalidArgumentError(absl::StrCat(
            file->source(), " has tensor '", name, "', which ", index_path,
            it == shard_of.end() ? " does not list"
                                 : " maps to " + it->second));
      }
      tensors.emplace_back(name, std::move(tensor));
    }
  }
  return tensors;
}

}  // namespace

absl::StatusOr<std::string> HfFamilyFromName(absl::string_view name) {
  if (name == "hf-gpt2") return std::string("gpt");
  if (name == "hf-llama") return std::string("llama");
  return absl::InvalidArgumentError(
      absl::StrCat("unknown Hugging Face layout '", name,
                   "' (expected hf-gpt2 or hf-llama)"));
}

bool IsHfCheckpoint(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return std::filesystem::exists(path + "/" + kSingleFile, ec) ||
           std::filesystem::exists(path + "/" + kIndexFile, ec);
  }
  return absl::EndsWith(path, ".safetensors");
}

absl::StatusOr<NamedTensors> ReadHfWeights(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    STRATA_ASSIGN_OR_RETURN(auto file,
                            serialization::SafetensorsFile::Open(path));
    return file->ViewAll();
  }
  if (std::filesystem::exists(path + "/" + kIndexFile, ec)) {
    return ReadSharded(path);
  }
  if (std::filesystem::exists(path + "/" + kSingleFile, ec)) {
    STRATA_ASSIGN_OR_RETURN(auto file, serialization::SafetensorsFile::Open(
                                           path + "/" + kSingleFile));
    return file->ViewAll();
  }
  return absl::NotFoundError(
      absl::StrCat(path, " has neither ", kSingleFile, " nor ", kIndexFile));
}

absl::StatusOr<NamedTensors> ImportHf(const NamedTensors& hf,
                                      const models::ModelConfig& config,
                                      const std::string& source) {
  STRATA_ASSIGN_OR_RETURN(auto shapes, ModelShapes(config));
  // Hugging Face name -> tensor; GPT2Model's files lack "transformer.".
  std::map<std::string, at::Tensor> by_name;
  for (const auto& [raw_name, tensor] : hf) {
    if (IsSkippedBuffer(raw_name)) continue;
    std::string name = raw_name;
    if (config.family == "gpt" && name != "lm_head.weight" &&
        !absl::StartsWith(name, "transformer.")) {
      name = absl::StrCat("transformer.", name);
    }
    if (!by_name.emplace(name, tensor).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": tensor '", name,
                       "' is given twice (with and without "
                       "the \"transformer.\" prefix?)"));
    }
  }
  std::set<std::string> used;
  std::vector<std::string> missing, misshaped;
  NamedTensors strata;
  for (const auto& [name, shape] : shapes) {
    STRATA_ASSIGN_OR_RETURN(Mapped m, MapName(name, config));
    const std::vector<int64_t> hf_shape = HfShape(m, shape);
    auto it = by_name.find(m.hf_name);
    if (it == by_name.end()) {
      missing.push_back(m.hf_name);
      continue;
    }
    used.insert(m.hf_name);
    if (it->second.sizes().vec() != hf_shape) {
      misshaped.push_back(absl::StrCat("'", m.hf_name, "' is ",
                                       ShapeText(it->second.sizes()),
                                       ", expected ", ShapeText(hf_shape)));
      continue;
    }
    strata.emplace_back(name, Apply(m, it->second, /*to_hf=*/false));
  }
  // A tied head may be stored; it must be the embedding.
  if (config.tie_embeddings) {
    const std::string embedding = config.family == "gpt"
                                      ? "transformer.wte.weight"
                                      : "model.embed_tokens.weight";
    auto head = by_name.find("lm_head.weight");
    auto wte = by_name.find(embedding);
    if (head != by_name.end() && wte != by_name.end()) {
      used.insert(head->first);
      if (head->second.sizes() != wte->second.sizes() ||
          !at::equal(head->second, wte->second)) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": lm_head.weight differs from ", embedding,
                         ", but the model ties them"));
      }
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : by_name) {
    if (used.count(name) == 0) unexpected.push_back(name);
  }
  const std::vector<std::string> problems =
      Problems(missing, unexpected, misshaped);
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, " is not a Hugging Face ",
        config.family == "gpt" ? "GPT-2" : "Llama",
        " checkpoint of this config: ", absl::StrJoin(problems, "; ")));
  }
  return strata;
}

absl::StatusOr<NamedTensors> ExportHf(const NamedTensors& strata,
                                      const models::ModelConfig& config,
                                      const std::string& source) {
  STRATA_ASSIGN_OR_RETURN(auto shapes, ModelShapes(config));
  std::map<std::string, at::Tensor> by_name(strata.begin(), strata.end());
  std::vector<std::string> missing, misshaped, unexpected;
  NamedTensors hf;
  std::set<std::string> known;
  for (const auto& [name, shape] : shapes) {
    known.insert(name);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      continue;
    }
    if (it->second.sizes().vec() != shape) {
      misshaped.push_back(absl::StrCat("'", name, "' is ",
                                       ShapeText(it->second.sizes()),
                                       ", expected ", ShapeText(shape)));
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(Mapped m, MapName(name, config));
    hf.emplace_back(m.hf_name, Apply(m, it->second, /*to_hf=*/true));
  }
  for (const auto& [name, tensor] : by_name) {
    if (known.count(name) == 0) unexpected.push_back(name);
  }
  const std::vector<std::string> problems =
      Problems(missing, unexpected, misshaped);
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, " does not hold the weights of this ", config.family,
        " config: ", absl::StrJoin(problems, "; ")));
  }
  return hf;
}

absl::Status WriteHfModel(const std::string& dir, const NamedTensors& hf,
                          const models::ModelConfig& config,
                          int64_t max_shard_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create directory ", dir, ": ", ec.message()));
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  int64_t total_bytes = 0;
  for (const auto& [name, tensor] : hf) total_bytes += tensor.nbytes();
  if (max_shard_bytes <= 0 || total_bytes <= max_shard_bytes) {
    STRATA_RETURN_IF_ERROR(
        serialization::WriteSafetensors(dir + "/" + kSingleFile, hf, metadata));
    // A stale index would shadow the new file.
    std::filesystem::remove(dir + "/" + kIndexFile, ec);
  } else {
    std::vector<NamedTensors> shards(1);
    int64_t shard_bytes = 0;
    for (const auto& item : hf) {
      const int64_t bytes = item.second.nbytes();
      if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
        shards.emplace_back();
        shard_bytes = 0;
      }
      shards.back().push_back(item);
      shard_bytes += bytes;
    }
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total_bytes}};
    index["weight_map"] = nlohmann::ordered_json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = absl::StrFormat("model-%05d-of-%05d.safetensors",
                                               i + 1, shards.size());
      STRATA_RETURN_IF_ERROR(serialization::WriteSafetensors(
          absl::StrCat(dir, "/", file), shards[i], metadata));
      for (const auto& [name, tensor] : shards[i]) {
        index["weight_map"][name] = file;
      }
    }
    STRATA_RETURN_IF_ERROR(
        WriteFileAtomic(dir + "/" + kIndexFile, index.dump(2) + "\n"));
  }
  return WriteFileAtomic(dir + "/config.json", HfConfigJson(config));
}

}  // namespace strata::models
