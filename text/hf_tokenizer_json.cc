#include "text/hf_tokenizer_json.h"

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/file_io.h"
#include "base/json.h"
#include "text/bpe_tokenizer.h"
#include "text/byte_level_vocab.h"
#include "text/pretokenize.h"

namespace strata::text {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kSupported =
    "Strata reads byte-level BPE tokenizer.json files (GPT-2, Llama 3) and "
    "SentencePiece .model files (Llama 2)";

// Errors of one file: "<source>: <key>: <what>".
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", key, ": ", what));
  }

  // obj[name] if present and not null, else nullptr.
  static const Json* Get(const Json& obj, const char* name) {
    const auto it = obj.find(name);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  absl::StatusOr<std::string> String(const Json& obj, const char* name,
                                     absl::string_view key) const {
    const Json* v = Get(obj, name);
    if (v == nullptr) return Error(key, "missing; expected a string");
    if (!v->is_string()) {
      return Error(key, absl::StrCat("expected a string, got ", v->dump()));
    }
    return v->get<std::string>();
  }

  // A boolean that defaults to `fallback` when absent or null.
  absl::StatusOr<bool> Bool(const Json& obj, const char* name,
                            absl::string_view key, bool fallback) const {
    const Json* v = Get(obj, name);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) {
      return Error(key,
                   absl::StrCat("expected true or false, got ", v->dump()));
    }
    return v->get<bool>();
  }

  absl::StatusOr<std::string> Type(const Json& obj,
                                   absl::string_view key) const {
    if (!obj.is_object()) {
      return Error(key, absl::StrCat("expected an object, got ", obj.dump()));
    }
    return String(obj, "type", absl::StrCat(key, ".type"));
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

absl::Status ReadModel(const Reader& r, const Json& root,
                       BpeTokenizerSpec* spec) {
  const Json* model = Reader::Get(root, "model");
  if (model == nullptr) {
    return r.Error("model", absl::StrCat("missing; ", kSupported));
  }
  if (!model->is_object()) return r.Error("model", "expected an object");
  // Files of older tokenizers leave out the type of a BPE model.
  if (Reader::Get(*model, "type") != nullptr) {
    absl::StatusOr<std::string> type = r.String(*model, "type", "model.type");
    if (!type.ok()) return type.status();
    if (*type != "BPE") {
      return r.Error(
          "model.type",
          absl::StrCat("'", *type, "' is not supported; ", kSupported));
    }
  }
  for (const char* unsupported :
       {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* v = Reader::Get(*model, unsupported);
    if (v != nullptr && !(v->is_string() && v->get<std::string>().empty())) {
      return r.Error(absl::StrCat("model.", unsupported),
                     absl::StrCat(v->dump(),
                                  " is not supported (expected "
                                  "null, as byte-level BPE has)"));
    }
  }
  absl::StatusOr<bool> ignore_merges =
      r.Bool(*model, "ignore_merges", "model.ignore_merges", false);
  if (!ignore_merges.ok()) return ignore_merges.status();
  spec->ignore_merges = *ignore_merges;
  if (absl::StatusOr<bool> b =
          r.Bool(*model, "byte_fallback", "model.byte_fallback", false);
      !b.ok()) {
    return b.status();
  }
  const Json* vocab_json = Reader::Get(*model, "vocab");
  if (vocab_json == nullptr) {
    return r.Error("model.vocab", "missing; expected an object token -> id");
  }
  absl::StatusOr<ByteLevelVocab> vocab = ReadByteLevelVocab(
      *vocab_json, absl::StrCat(r.source(), ": model.vocab"));
  if (!vocab.ok()) return vocab.status();
  const Json* merges_json = Reader::Get(*model, "merges");
  if (merges_json == nullptr || !merges_json->is_array()) {
    return r.Error("model.merges",
                   "missing or not an array; expected [\"a b\", ...] or "
                   "[[\"a\", \"b\"], ...]");
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json->size());
  for (size_t i = 0; i < merges_json->size(); ++i) {
    const Json& m = (*merges_json)[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const std::vector<std::string> parts = absl::StrSplit(s, ' ');
      if (parts.size() == 2 && !parts[0].empty() && !parts[1].empty()) {
        merges.emplace_back(parts[0], parts[1]);
        continue;
      }
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() &&
               m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    return r.Error(absl::StrCat("model.merges[", i, "]"),
                   absl::StrCat("expected \"left right\" or [\"left\", "
                                "\"right\"], got ",
                                m.dump()));
  }
  absl::StatusOr<std::vector<BpeMerge>> ids = ByteLevelMergeIds(
      merges, *vocab, absl::StrCat(r.source(), ": model.merges"));
  if (!ids.ok()) return ids.status();
  spec->tokens = std::move(vocab->tokens);
  spec->merges = *std::move(ids);
  return absl::OkStatus();
}

// One ByteLevel pre-tokenizer: whether it applies GPT-2's regex.
absl::StatusOr<bool> ReadByteLevel(const Reader& r, const Json& p,
                                   absl::string_view key,
                                   BpeTokenizerSpec* spec) {
  absl::StatusOr<bool> prefix = r.Bool(
      p, "add_prefix_space", absl::StrCat(key, ".add_prefix_space"), true);
  if (!prefix.ok()) return prefix.status();
  spec->add_prefix_space = *prefix;
  return r.Bool(p, "use_regex", absl::StrCat(key, ".use_regex"), true);
}

absl::Status ReadSplit(const Reader& r, const Json& p, absl::string_view key,
                       BpeTokenizerSpec* spec) {
  const Json* pattern = Reader::Get(p, "pattern");
  if (pattern == nullptr || !pattern->is_object() ||
      Reader::Get(*pattern, "Regex") == nullptr) {
    return r.Error(absl::StrCat(key, ".pattern"),
                   "expected {\"Regex\": \"...\"}");
  }
  absl::StatusOr<std::string> regex =
      r.String(*pattern, "Regex", absl::StrCat(key, ".pattern.Regex"));
  if (!regex.ok()) return regex.status();
  absl::StatusOr<SplitPattern> split = SplitPatternFromRegex(*regex);
  if (!split.ok()) {
    return r.Error(absl::StrCat(key, ".pattern.Regex"),
                   split.status().message());
  }
  spec->pattern = *split;
  absl::StatusOr<std::string> behavior =
      r.String(p, "behavior", absl::StrCat(key, ".behavior"));
  if (!behavior.ok()) return behavior.status();
  if (*behavior != "Isolated") {
    return r.Error(
        absl::StrCat(key, ".behavior"),
        absl::StrCat("'", *behavior, "' is not supported (expected Isolated)"));
  }
  absl::StatusOr<bool> invert =
      r.Bool(p, "invert", absl::StrCat(key, ".invert"), false);
  if (!invert.ok()) return invert.status();
  if (*invert) {
    return r.Error(absl::StrCat(key, ".invert"),
                   "true is not supported (expected false)");
  }
  return absl::OkStatus();
}

absl::Status ReadPreTokenizer(const Reader& r, const Json& root,
                              BpeTokenizerSpec* spec) {
  const Json* p = Reader::Get(root, "pre_tokenizer");
  constexpr absl::string_view kExpected =
      "expected ByteLevel (GPT-2) or Sequence[Split, ByteLevel] (Llama 3)";
  if (p == nullptr) {
    return r.Error("pre_tokenizer", absl::StrCat("missing; ", kExpected));
  }
  absl::StatusOr<std::string> type = r.Type(*p, "pre_tokenizer");
  if (!type.ok()) return type.status();
  if (*type == "ByteLevel") {
    absl::StatusOr<bool> regex = ReadByteLevel(r, *p, "pre_tokenizer", spec);
    if (!regex.ok()) return regex.status();
    if (!*regex) {
      return r.Error("pre_tokenizer.use_regex",
                     "false without a Split before it is not supported");
    }
    spec->pattern = SplitPattern::kGpt2;
    return absl::OkStatus();
  }
  if (*type != "Sequence") {
    return r.Error("pre_tokenizer.type",
                   absl::StrCat("'", *type, "' is not supported; ", kExpected));
  }
  const Json* list = Reader::Get(*p, "pretokenizers");
  if (list == nullptr || !list->is_array() || list->size() != 2) {
    return r.Error("pre_tokenizer.pretokenizers",
                   absl::StrCat("expected two entries; ", kExpected));
  }
  absl::StatusOr<std::string> first =
      r.Type((*list)[0], "pre_tokenizer.pretokenizers[0]");
  if (!first.ok()) return first.status();
  absl::StatusOr<std::string> second =
      r.Type((*list)[1], "pre_tokenizer.pretokenizers[1]");
  if (!second.ok()) return second.status();
  if (*first != "Split" || *second != "ByteLevel") {
    return r.Error("pre_tokenizer.pretokenizers",
                   absl::StrCat("[", *first, ", ", *second,
                                "] is not supported; ", kExpected));
  }
  if (absl::Status s =
          ReadSplit(r, (*list)[0], "pre_tokenizer.pretokenizers[0]", spec);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<bool> regex =
      ReadByteLevel(r, (*list)[1], "pre_tokenizer.pretokenizers[1]", spec);
  if (!regex.ok()) return regex.status();
  if (*regex) {
    return r.Error("pre_tokenizer.pretokenizers[1].use_regex",
                   "true after a Split is not supported (expected false)");
  }
  return absl::OkStatus();
}

absl::Status ReadAddedTokens(const Reader& r, const Json& root,
                             BpeTokenizerSpec* spec) {
  const Json* added = Reader::Get(root, "added_tokens");
  if (added == nullptr) return absl::OkStatus();
  if (!added->is_array()) return r.Error("added_tokens", "expected an array");
  for (size_t i = 0; i < added->size(); ++i) {
    const Json& a = (*added)[i];
    const std::string key = absl::StrCat("added_tokens[", i, "]");
    if (!a.is_object()) return r.Error(key, "expected an object");
    absl::StatusOr<std::string> content =
        r.String(a, "content", absl::StrCat(key, ".content"));
    if (!content.ok()) return content.status();
    if (content->empty()) {
      return r.Error(absl::StrCat(key, ".content"), "is empty");
    }
    const Json* id = Reader::Get(a, "id");
    if (id == nullptr || !id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() > INT32_MAX) {
      return r.Error(absl::StrCat(key, ".id"),
                     "missing or not an integer in [0, 2^31)");
    }
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      absl::StatusOr<bool> on =
          r.Bool(a, flag, absl::StrCat(key, ".", flag), false);
      if (!on.ok()) return on.status();
      if (*on) {
        return r.Error(absl::StrCat(key, ".", flag),
                       "true is not supported (expected false)");
      }
    }
    spec->special_tokens.push_back({*content, id->get<int32_t>()});
  }
  return absl::OkStatus();
}

// TemplateProcessing's "single": [{SpecialToken: {id}}, {Sequence: {id: A}}].
absl::Status ReadTemplate(const Reader& r, const Json& p, absl::string_view key,
                          BpeTokenizerSpec* spec) {
  const Json* single = Reader::Get(p, "single");
  const Json* specials = Reader::Get(p, "special_tokens");
  if (single == nullptr || !single->is_array()) {
    return r.Error(absl::StrCat(key, ".single"), "missing or not an array");
  }
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& item = (*single)[i];
    const std::string item_key = absl::StrCat(key, ".single[", i, "]");
    if (item.is_object() && Reader::Get(item, "Sequence") != nullptr) {
      seen_sequence = true;
      continue;
    }
    const Json* special =
        item.is_object() ? Reader::Get(item, "SpecialToken") : nullptr;
    if (special == nullptr || !special->is_object()) {
      return r.Error(item_key,
                     "expected {SpecialToken: ...} or {Sequence: ...}");
    }
    absl::StatusOr<std::string> name =
        r.String(*special, "id", absl::StrCat(item_key, ".SpecialToken.id"));
    if (!name.ok()) return name.status();
    const Json* entry = specials != nullptr && specials->is_object() &&
                                specials->contains(*name)
                            ? &(*specials)[*name]
                            : nullptr;
    const Json* ids = entry != nullptr && entry->is_object()
                          ? Reader::Get(*entry, "ids")
                          : nullptr;
    if (ids == nullptr || !ids->is_array()) {
      return r.Error(absl::StrCat(key, ".special_tokens"),
                     absl::StrCat("has no ids for '", *name, "'"));
    }
    for (const Json& id : *ids) {
      if (!id.is_number_integer()) {
        return r.Error(absl::StrCat(key, ".special_tokens.", *name, ".ids"),
                       absl::StrCat("expected integers, got ", id.dump()));
      }
      (seen_sequence ? spec->template_suffix : spec->template_prefix)
          .push_back(id.get<int32_t>());
    }
  }
  return absl::OkStatus();
}

absl::Status ReadPostProcessor(const Reader& r, const Json& root,
                               BpeTokenizerSpec* spec) {
  const Json* p = Reader::Get(root, "post_processor");
  if (p == nullptr) return absl::OkStatus();
  absl::StatusOr<std::string> type = r.Type(*p, "post_processor");
  if (!type.ok()) return type.status();
  std::vector<std::pair<const Json*, std::string>> parts;
  if (*type == "Sequence") {
    const Json* list = Reader::Get(*p, "processors");
    if (list == nullptr || !list->is_array()) {
      return r.Error("post_processor.processors", "missing or not an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      parts.emplace_back(&(*list)[i],
                         absl::StrCat("post_processor.processors[", i, "]"));
    }
  } else {
    parts.emplace_back(p, "post_processor");
  }
  for (const auto& [part, key] : parts) {
    absl::StatusOr<std::string> t = r.Type(*part, key);
    if (!t.ok()) return t.status();
    if (*t == "ByteLevel") continue;  // Offsets only.
    if (*t == "TemplateProcessing") {
      if (absl::Status s = ReadTemplate(r, *part, key, spec); !s.ok()) return s;
      continue;
    }
    return r.Error(absl::StrCat(key, ".type"),
                   absl::StrCat("'", *t,
                                "' is not supported (expected ByteLevel or "
                                "TemplateProcessing)"));
  }
  return absl::OkStatus();
}

absl::Status ReadNormalizerAndDecoder(const Reader& r, const Json& root) {
  if (const Json* n = Reader::Get(root, "normalizer")) {
    absl::StatusOr<std::string> type = r.Type(*n, "normalizer");
    if (!type.ok()) return type.status();
    return r.Error("normalizer.type",
                   absl::StrCat("'", *type,
                                "' is not supported (byte-level BPE models "
                                "have none); ",
                                kSupported));
  }
  if (const Json* d = Reader::Get(root, "decoder")) {
    absl::StatusOr<std::string> type = r.Type(*d, "decoder");
    if (!type.ok()) return type.status();
    if (*type != "ByteLevel") {
      return r.Error(
          "decoder.type",
          absl::StrCat("'", *type, "' is not supported (expected ByteLevel); ",
                       kSupported));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> ParseHfTokenizerJson(
    absl::string_view json_text, absl::string_view source) {
  absl::StatusOr<Json> root = ParseJson(json_text, source);
  if (!root.ok()) return root.status();
  const Reader r(source);
  if (!root->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object at the top level"));
  }
  BpeTokenizerSpec spec;
  spec.source = absl::StrCat("tokenizer.json ", source);
  for (absl::Status s :
       {ReadNormalizerAndDecoder(r, *root), ReadPreTokenizer(r, *root, &spec),
        ReadModel(r, *root, &spec), ReadAddedTokens(r, *root, &spec),
        ReadPostProcessor(r, *root, &spec)}) {
    if (!s.ok()) return s;
  }
  return BpeTokenizer::CreateFrom(source, std::move(spec));
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadHfTokenizerJson(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ParseHfTokenizerJson(*text, path);
}

}  // namespace strata::text
