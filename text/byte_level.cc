#include "text/byte_level.h"

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

bool SpelledAsItself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
         (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> code_point;
  // Code points below 0x144 back to their byte; -1: not in the mapping.
  std::array<int16_t, 0x144> byte;
};

const Tables& ByteTables() {
  static const Tables* tables = [] {
    auto* t = new Tables;
    t->byte.fill(-1);
    uint32_t extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      t->code_point[b] = SpelledAsItself(b) ? b : extra++;
      t->byte[t->code_point[b]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return *tables;
}

}  // namespace

uint32_t ByteLevelCodePoint(uint8_t byte) {
  return ByteTables().code_point[byte];
}

std::string ByteLevelSpell(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    AppendUtf8(ByteLevelCodePoint(static_cast<uint8_t>(c)), &out);
  }
  return out;
}

absl::StatusOr<std::string> ByteLevelUnspell(absl::string_view spelled) {
  const Tables& t = ByteTables();
  std::string out;
  out.reserve(spelled.size());
  size_t i = 0;
  while (i < spelled.size()) {
    uint32_t cp;
    const int length =
        DecodeUtf8(spelled.data() + i, spelled.data() + spelled.size(), &cp);
    if (cp == kInvalidCodePoint || cp >= t.byte.size() || t.byte[cp] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", absl::CHexEscape(spelled), "' has ",
          cp == kInvalidCodePoint
              ? std::string("a byte outside well-formed UTF-8")
              : absl::StrFormat("U+%04X", cp),
          " at byte ", i,
          ", which is not one of the 256 characters of GPT-2's byte-level "
          "alphabet"));
    }
    out.push_back(static_cast<char>(t.byte[cp]));
    i += length;
  }
  return out;
}

}  // namespace strata::text
