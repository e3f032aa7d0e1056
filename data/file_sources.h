// Token sources backed by files, and writers for nanoGPT token files.
//
// Byte-level text: every byte of the file is one token (vocabulary 256), so
// any text trains without a tokenizer. Token-bin files use nanoGPT's `.bin`
// layout (what its prepare.py scripts write with numpy's tofile): token ids
// back to back as little-endian uint16 (or uint32 for vocabularies above
// 2^16), no header.
//
// Both readers memory-map the file read-only, so opening is cheap and the
// pages are shared by every rank on a machine. The file must not be truncated
// or rewritten in place while a source reads it (the writers below replace
// files atomically, which is safe: an open source keeps the old contents).
#ifndef STRATA_DATA_FILE_SOURCES_H_
#define STRATA_DATA_FILE_SOURCES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/token_source.h"

namespace strata::data {

enum class TokenBinDtype { kUint16, kUint32 };

// "uint16" or "uint32".
absl::string_view TokenBinDtypeName(TokenBinDtype dtype);
// Bytes per token: 2 or 4.
int TokenBinDtypeWidth(TokenBinDtype dtype);
// Parses "uint16" or "uint32"; InvalidArgument naming the value otherwise.
absl::StatusOr<TokenBinDtype> ParseTokenBinDtype(absl::string_view name);

// Opens a text file as byte tokens (vocabulary 256). NotFound /
// PermissionDenied if it cannot be opened; InvalidArgument if it is a
// directory, not a regular file, or empty. Describe():
// "bytes(/path, 1234 tokens)".
absl::StatusOr<std::unique_ptr<TokenSource>> OpenByteText(
    const std::string& path);

// Opens a nanoGPT token file. InvalidArgument if vocab_size is outside
// [1, 2^16] for kUint16 or [1, 2^32] for kUint32, the file is empty or a
// directory, its size is not a multiple of the token width, or a token id is
// >= vocab_size (the whole file is scanned once here; the error names the
// file, the token's offset and its value). Describe():
// "token_bin(/path, uint16, vocab=50304, 1234 tokens)".
absl::StatusOr<std::unique_ptr<TokenSource>> OpenTokenBin(
    const std::string& path, TokenBinDtype dtype, int64_t vocab_size);

// Writes `tokens` as a nanoGPT token file, atomically: to a temporary file
// beside `path`, synced, then renamed over it. InvalidArgument (and nothing
// written) if `tokens` is empty or a token does not fit `dtype`.
absl::Status WriteTokenBin(absl::Span<const int64_t> tokens,
                           const std::string& path, TokenBinDtype dtype);

// Tokenises a text file byte by byte (each byte is its token id) into a
// nanoGPT token file, atomically as WriteTokenBin. Streams: memory use does
// not grow with the file. Errors as OpenByteText for the input and as
// WriteTokenBin for the output.
absl::Status TextFileToTokenBin(const std::string& text_path,
                                const std::string& bin_path,
                                TokenBinDtype dtype);

}  // namespace strata::data

#endif  // STRATA_DATA_FILE_SOURCES_H_
