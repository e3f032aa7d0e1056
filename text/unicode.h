// UTF-8 decoding and the Unicode character classes the pre-tokenization
// patterns need: letters (\p{L}), numbers (\p{N}) and white space (\s, the
// White_Space property), from tables generated out of Node.js's ICU
// (text/testing/gen_unicode_tables.js).
//
// Text is bytes and need not be valid UTF-8: DecodeUtf8 reads a byte that
// does not start a well-formed sequence (a stray continuation byte, a
// truncated, overlong or surrogate sequence, a value above U+10FFFF) as one
// unit of its own, kInvalidCodePoint, which is in no class. Byte-level BPE
// encodes such bytes like any other, so decode(encode(x)) == x for any bytes.
#ifndef STRATA_TEXT_UNICODE_H_
#define STRATA_TEXT_UNICODE_H_

#include <cstdint>
#include <string>

namespace strata::text {

// What DecodeUtf8 yields for a byte outside a well-formed sequence.
constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFF;

// Character classes, as bits of CharClassOf's result (none: 0).
enum CharClass : uint8_t {
  kLetter = 1,
  kNumber = 2,
  kWhiteSpace = 4,
};

// The code point starting at `p` (p < end) into *code_point and its length
// in bytes (1 to 4). A byte that does not start a well-formed sequence
// (Unicode's definition: no overlongs, no surrogates, at most U+10FFFF) is
// one unit: *code_point = kInvalidCodePoint, length 1.
int DecodeUtf8(const char* p, const char* end, uint32_t* code_point);

// The CharClass bits of `code_point` (0 for kInvalidCodePoint).
uint8_t CharClassOf(uint32_t code_point);

// The UTF-8 bytes of `code_point` (at most U+10FFFF, not a surrogate)
// appended to `out`.
void AppendUtf8(uint32_t code_point, std::string* out);

}  // namespace strata::text

#endif  // STRATA_TEXT_UNICODE_H_
