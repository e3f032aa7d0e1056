// GPT-2's byte-to-unicode mapping (`bytes_to_unicode` in its encoder.py,
// Hugging Face's ByteLevel): the byte-level vocabularies of GPT-2's
// encoder.json and of tokenizer.json spell each byte as one printable
// character, the printable Latin-1 bytes as themselves and the others
// (controls, space, 0x7F-0xA0, 0xAD) as U+0100 onwards, so that "Ġ" (U+0120)
// is the space byte. Strata's encoder works on raw bytes: these convert.
#ifndef STRATA_TEXT_BYTE_LEVEL_H_
#define STRATA_TEXT_BYTE_LEVEL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::text {

// The code point that spells `byte`.
uint32_t ByteLevelCodePoint(uint8_t byte);

// The UTF-8 spelling of raw `bytes`.
std::string ByteLevelSpell(absl::string_view bytes);

// The raw bytes `spelled` stands for. InvalidArgument naming the offending
// character (and its offset) if it is not valid UTF-8 or a character is not
// one of the 256 of the mapping.
absl::StatusOr<std::string> ByteLevelUnspell(absl::string_view spelled);

}  // namespace strata::text

#endif  // STRATA_TEXT_BYTE_LEVEL_H_
