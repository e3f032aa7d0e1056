#include "text/chunked_encode.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace strata::text {

std::vector<size_t> ChunkEnds(const Tokenizer& tokenizer,
                              absl::string_view text, size_t chunk_bytes) {
  CHECK_GT(chunk_bytes, 0u);
  std::vector<size_t> ends;
  size_t start = 0;
  while (start < text.size()) {
    const size_t target = start + chunk_bytes;
    const size_t end =
        target >= text.size() ? text.size() : tokenizer.NextCut(text, target);
    ends.push_back(end);
    start = end;
  }
  return ends;
}

std::vector<int32_t> EncodeDocuments(
    const Tokenizer& tokenizer, absl::Span<const absl::string_view> documents,
    const ChunkedEncodeOptions& options) {
  CHECK_GE(options.num_threads, 1);
  std::optional<int32_t> end_of_text;
  if (options.end_of_text_after_documents) {
    end_of_text = tokenizer.end_of_text_id();
    CHECK(end_of_text.has_value())
        << tokenizer.Describe() << " has no end-of-text token";
  }
  // Every chunk of every document; a document's last chunk carries its
  // end-of-text token.
  struct Chunk {
    absl::string_view text;
    bool ends_document;
  };
  std::vector<Chunk> chunks;
  for (const absl::string_view doc : documents) {
    size_t start = 0;
    for (const size_t end : ChunkEnds(tokenizer, doc, options.chunk_bytes)) {
      chunks.push_back({doc.substr(start, end - start), end == doc.size()});
      start = end;
    }
    if (doc.empty()) chunks.push_back({doc, true});
  }
  EncodeOptions encode;
  encode.special_tokens_in_text = options.special_tokens_in_text;
  std::vector<std::vector<int32_t>> ids(chunks.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < chunks.size(); i = next++) {
      tokenizer.Encode(chunks[i].text, encode, &ids[i]);
      if (chunks[i].ends_document && end_of_text) {
        ids[i].push_back(*end_of_text);
      }
    }
  };
  const int threads = static_cast<int>(std::min<size_t>(
      options.num_threads, std::max<size_t>(chunks.size(), 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  size_t total = 0;
  for (const auto& v : ids) total += v.size();
  std::vector<int32_t> out;
  out.reserve(total);
  for (auto& v : ids) {
    out.insert(out.end(), v.begin(), v.end());
    std::vector<int32_t>().swap(v);
  }
  return out;
}

}  // namespace strata::text
