#include "text/pretokenize.h"

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

constexpr absl::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kCl100kRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A character of the text: its class bits and length in bytes. kEnd marks
// the end of the text.
struct Char {
  uint32_t code_point;
  uint8_t cls;
  uint8_t length;
};
constexpr uint32_t kEnd = 0xFFFFFFFE;

std::array<uint8_t, 128> AsciiClasses() {
  std::array<uint8_t, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) t[c] = CharClassOf(c);
  return t;
}

class Scanner {
 public:
  explicit Scanner(absl::string_view text) : text_(text) {}

  Char At(size_t i) const {
    static const std::array<uint8_t, 128> ascii = AsciiClasses();
    if (i >= text_.size()) return {kEnd, 0, 0};
    const auto b = static_cast<unsigned char>(text_[i]);
    if (b < 0x80) return {b, ascii[b], 1};
    uint32_t cp;
    const int length =
        DecodeUtf8(text_.data() + i, text_.data() + text_.size(), &cp);
    return {cp, CharClassOf(cp), static_cast<uint8_t>(length)};
  }

  // The end of the run of characters starting at i whose class has a bit
  // of `mask` (and, with max_chars, at most that many characters).
  size_t RunEnd(size_t i, uint8_t mask, int max_chars = 1 << 30) const {
    int n = 0;
    while (n < max_chars) {
      const Char c = At(i);
      if (c.code_point == kEnd || (c.cls & mask) == 0) break;
      i += c.length;
      ++n;
    }
    return i;
  }

  // The end of the run of characters in no class (not \s, \p{L}, \p{N}).
  size_t OtherRunEnd(size_t i) const {
    for (;;) {
      const Char c = At(i);
      if (c.code_point == kEnd || c.cls != 0) return i;
      i += c.length;
    }
  }

  size_t size() const { return text_.size(); }
  char byte(size_t i) const { return i < text_.size() ? text_[i] : '\0'; }

 private:
  absl::string_view text_;
};

bool IsOther(const Char& c) { return c.code_point != kEnd && c.cls == 0; }

// 's|'t|'re|'ve|'m|'ll|'d at i (text[i] == '\''), case-insensitively when
// `fold`: the end of the match or 0.
size_t ContractionEnd(const Scanner& s, size_t i, bool fold) {
  auto lower = [&](char c) {
    return fold && c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
  };
  const char a = lower(s.byte(i + 1));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  // U+017F folds to 's' (0xC5 0xBF).
  if (fold && s.byte(i + 1) == '\xC5' && s.byte(i + 2) == '\xBF') return i + 3;
  const char b = lower(s.byte(i + 2));
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') ||
      (a == 'l' && b == 'l')) {
    return i + 3;
  }
  return 0;
}

// \s+(?!\S)|\s+ over the white-space run [i, run_end): all of it at the end
// of the text, else all but its last character, or the one character.
size_t WhiteSpaceEnd(const Scanner& s, size_t i, size_t run_end) {
  if (run_end >= s.size()) return run_end;
  // The start of the run's last character (UTF-8: skip continuation bytes).
  size_t last = run_end - 1;
  while (last > i && (static_cast<unsigned char>(s.byte(last)) & 0xC0) == 0x80)
    --last;
  return last > i ? last : run_end;
}

size_t Gpt2PieceEnd(const Scanner& s, size_t i) {
  const Char c0 = s.At(i);
  if (c0.code_point == '\'') {
    if (const size_t end = ContractionEnd(s, i, /*fold=*/false)) return end;
  }
  //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
  size_t j = i;
  Char c = c0;
  if (c0.code_point == ' ') {
    c = s.At(i + 1);
    j = i + 1;
  }
  if (c.code_point != kEnd) {
    if (c.cls & kLetter) return s.RunEnd(j, kLetter);
    if (c.cls & kNumber) return s.RunEnd(j, kNumber);
    if (c.cls == 0) return s.OtherRunEnd(j);
  }
  return WhiteSpaceEnd(s, i, s.RunEnd(i, kWhiteSpace));
}

size_t Cl100kPieceEnd(const Scanner& s, size_t i) {
  const Char c0 = s.At(i);
  if (c0.code_point == '\'') {
    if (const size_t end = ContractionEnd(s, i, /*fold=*/true)) return end;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c0.cls & kLetter) return s.RunEnd(i, kLetter);
  if (c0.code_point != '\r' && c0.code_point != '\n' &&
      (c0.cls & kNumber) == 0) {
    const Char c1 = s.At(i + c0.length);
    if (c1.code_point != kEnd && (c1.cls & kLetter)) {
      return s.RunEnd(i + c0.length, kLetter);
    }
  }
  // \p{N}{1,3}
  if (c0.cls & kNumber) return s.RunEnd(i, kNumber, 3);
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const bool other = IsOther(c0);
  if (other || (c0.code_point == ' ' && IsOther(s.At(i + 1)))) {
    size_t end = s.OtherRunEnd(other ? i : i + 1);
    while (s.byte(end) == '\r' || s.byte(end) == '\n') ++end;
    return end;
  }
  // \s*[\r\n]+ : up to the run's last CR or LF.
  const size_t run_end = s.RunEnd(i, kWhiteSpace);
  for (size_t k = run_end; k > i; --k) {
    if (s.byte(k - 1) == '\r' || s.byte(k - 1) == '\n') return k;
  }
  return WhiteSpaceEnd(s, i, run_end);
}

}  // namespace

absl::string_view SplitPatternRegex(SplitPattern pattern) {
  return pattern == SplitPattern::kGpt2 ? kGpt2Regex : kCl100kRegex;
}

absl::StatusOr<SplitPattern> SplitPatternFromRegex(absl::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::kGpt2;
  if (regex == kCl100kRegex) return SplitPattern::kCl100k;
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported pre-tokenization regex '", regex,
                   "'; supported are GPT-2's '", kGpt2Regex,
                   "' and cl100k_base / Llama 3's '", kCl100kRegex, "'"));
}

size_t PieceEnd(SplitPattern pattern, absl::string_view text, size_t begin) {
  const Scanner s(text);
  return pattern == SplitPattern::kGpt2 ? Gpt2PieceEnd(s, begin)
                                        : Cl100kPieceEnd(s, begin);
}

void SplitText(SplitPattern pattern, absl::string_view text,
               absl::FunctionRef<void(absl::string_view)> piece) {
  const Scanner s(text);
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = pattern == SplitPattern::kGpt2 ? Gpt2PieceEnd(s, i)
                                                      : Cl100kPieceEnd(s, i);
    piece(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace strata::text
