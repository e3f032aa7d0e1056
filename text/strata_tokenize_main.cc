// strata_tokenize: text to token ids and back with any tokenizer Strata
// reads (text/load_tokenizer.h).
//
//   strata_tokenize --tokenizer=gpt2/tokenizer.json --text="Hello world"
//     prints the ids, comma-separated: 15496,995
//   strata_tokenize --tokenizer=gpt2/tokenizer.json --ids=15496,995
//     prints the text: Hello world
//   strata_tokenize --tokenizer=T --documents=docs.bin --output=ids.bin
//     batch mode (text/testing/cross_check.js): docs.bin holds documents as
//     [uint64 byte count][bytes], little-endian; ids.bin gets, for each,
//     [uint64 id count][int32 ids]. Every document is also decoded back and
//     compared with itself; the run fails if any differs.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "base/help_flags.h"
#include "text/load_tokenizer.h"

DEFINE_string(tokenizer, "",
              "Tokenizer file: tokenizer.json, encoder.json (vocab.bpe beside "
              "it), *.tiktoken, *.model, or a directory holding one.");
DEFINE_string(text, "", "Text to encode; the ids are printed.");
DEFINE_string(ids, "", "Comma-separated ids to decode; the text is printed.");
DEFINE_string(documents, "", "Batch mode: the documents file.");
DEFINE_string(output, "", "Batch mode: the ids file to write.");
DEFINE_bool(special_tokens_in_text, true,
            "Special tokens written in the text (<|endoftext|>) become their "
            "ids; false: encoded as ordinary text (tiktoken's "
            "encode_ordinary).");

namespace {

int Batch(const strata::text::Tokenizer& tokenizer,
          const strata::text::EncodeOptions& options) {
  absl::StatusOr<std::string> docs = strata::ReadWholeFile(FLAGS_documents);
  if (!docs.ok()) {
    LOG(ERROR) << "--documents: " << docs.status();
    return 1;
  }
  std::string out;
  size_t pos = 0;
  int64_t count = 0, bytes = 0, tokens = 0, round_trip_failures = 0;
  while (pos < docs->size()) {
    uint64_t size;
    if (docs->size() - pos < 8 || (std::memcpy(&size, docs->data() + pos, 8),
                                   docs->size() - pos - 8 < size)) {
      LOG(ERROR) << "--documents=" << FLAGS_documents
                 << ": truncated document header or body at byte " << pos;
      return 1;
    }
    const absl::string_view doc(docs->data() + pos + 8, size);
    pos += 8 + size;
    const std::vector<int32_t> ids = tokenizer.Encode(doc, options);
    const uint64_t n = ids.size();
    out.append(reinterpret_cast<const char*>(&n), 8);
    out.append(reinterpret_cast<const char*>(ids.data()), n * 4);
    absl::StatusOr<std::string> back = tokenizer.Decode(ids);
    if (!back.ok() || *back != doc) {
      ++round_trip_failures;
      LOG(ERROR) << "document " << count << ": decode(encode(x)) != x: "
                 << (back.ok() ? "different bytes" : back.status().ToString());
    }
    ++count;
    bytes += size;
    tokens += n;
  }
  if (absl::Status s = strata::WriteFileAtomic(FLAGS_output, out); !s.ok()) {
    LOG(ERROR) << "--output: " << s;
    return 1;
  }
  LOG(INFO) << count << " documents, " << bytes << " bytes, " << tokens
            << " tokens, " << round_trip_failures << " round-trip failures";
  return round_trip_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(
      "Encodes --text, decodes --ids, or encodes a --documents batch with "
      "--tokenizer.");
  ::strata::NarrowHelp("text/strata_tokenize_main", argc,
                       argv);  // --helpfull: every flag.
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1]
               << "': strata_tokenize takes only flags (see --help)";
    return 2;
  }
  if (FLAGS_tokenizer.empty()) {
    LOG(ERROR) << "--tokenizer is empty; expected a tokenizer file";
    return 2;
  }
  const int modes =
      !FLAGS_text.empty() + !FLAGS_ids.empty() + !FLAGS_documents.empty();
  if (modes != 1 || FLAGS_documents.empty() != FLAGS_output.empty()) {
    LOG(ERROR) << "give exactly one of --text, --ids or --documents (with "
                  "--output)";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<strata::text::Tokenizer>> tokenizer =
      strata::text::LoadTokenizer(FLAGS_tokenizer);
  if (!tokenizer.ok()) {
    LOG(ERROR) << "--tokenizer: " << tokenizer.status().message();
    return 1;
  }
  strata::text::EncodeOptions options;
  options.special_tokens_in_text = FLAGS_special_tokens_in_text;
  if (!FLAGS_documents.empty()) return Batch(**tokenizer, options);
  if (!FLAGS_text.empty()) {
    std::cout << absl::StrJoin((*tokenizer)->Encode(FLAGS_text, options), ",")
              << std::endl;
    return 0;
  }
  std::vector<int32_t> ids;
  for (const absl::string_view part : absl::StrSplit(FLAGS_ids, ',')) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      LOG(ERROR) << "--ids: '" << part << "' is not an integer id";
      return 2;
    }
    ids.push_back(id);
  }
  absl::StatusOr<std::string> text = (*tokenizer)->Decode(ids);
  if (!text.ok()) {
    LOG(ERROR) << "--ids: " << text.status().message();
    return 1;
  }
  std::cout << *text << std::endl;
  return 0;
}
