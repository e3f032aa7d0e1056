// TokenSource: the read-only sequence of token ids a training run reads.
//
// Implementations: MarkovCorpus (markov_corpus.h, the embedded synthetic
// corpus), byte-level text and nanoGPT token files (file_sources.h), and
// InMemoryTokenSource below. DistributedSampler (sampler.h) cuts a source into
// training windows.
//
// Thread-compatibility: a TokenSource never changes after construction, so
// its const methods may be called concurrently.
#ifndef STRATA_DATA_TOKEN_SOURCE_H_
#define STRATA_DATA_TOKEN_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace strata::data {

class TokenSource {
 public:
  TokenSource(const TokenSource&) = delete;
  TokenSource& operator=(const TokenSource&) = delete;
  virtual ~TokenSource() = default;

  // Number of tokens in the sequence.
  virtual int64_t num_tokens() const = 0;
  // Every token id is in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // Copies tokens [start, start + count) into out[0, count). CHECK-fails if
  // the range is not inside [0, num_tokens()).
  virtual void Read(int64_t start, int64_t count, int64_t* out) const = 0;
  // What this source is, for logs, e.g.
  // "markov(vocab=128, branching=4, seed=1, 2000000 tokens)" or
  // "bytes(/data/shakespeare.txt, 1115394 tokens)".
  virtual std::string Describe() const = 0;

 protected:
  TokenSource() = default;

  // CHECK-fails, naming this source, unless 0 <= start, 0 <= count,
  // start + count <= num_tokens() and (out != nullptr or count == 0).
  void CheckReadRange(int64_t start, int64_t count, const int64_t* out) const;
};

// Tokens held in memory, e.g. for tests or tokens produced by other code.
class InMemoryTokenSource : public TokenSource {
 public:
  // InvalidArgument if vocab_size < 1 or a token is outside [0, vocab_size)
  // (naming `name`, the token's offset and its value). `name` appears in
  // Describe(): "memory(name, 10 tokens)".
  static absl::StatusOr<std::unique_ptr<InMemoryTokenSource>> Create(
      std::vector<int64_t> tokens, int64_t vocab_size, std::string name);

  int64_t num_tokens() const override;
  int64_t vocab_size() const override;
  void Read(int64_t start, int64_t count, int64_t* out) const override;
  std::string Describe() const override;

 private:
  InMemoryTokenSource(std::vector<int64_t> tokens, int64_t vocab_size,
                      std::string name);

  const std::vector<int64_t> tokens_;
  const int64_t vocab_size_;
  const std::string name_;
};

}  // namespace strata::data

#endif  // STRATA_DATA_TOKEN_SOURCE_H_
