#include "base/escape.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace strata {
namespace {

// The length of the valid UTF-8 sequence of a printable (non-control) code
// point at the start of `s`, or 0.
size_t Utf8Length(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(0);
  size_t n = 0;
  uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  // Overlong forms, surrogates, beyond U+10FFFF, C1 controls.
  const uint32_t min_code[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < min_code[n] || (code >= 0xD800 && code <= 0xDFFF) ||
      code > 0x10FFFF || (code >= 0x80 && code <= 0x9F)) {
    return 0;
  }
  return n;
}

}  // namespace

std::string EscapeBytes(absl::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const uint8_t u = static_cast<uint8_t>(c);
    if (c == '\\' || c == '\'' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
      ++i;
    } else if (u >= 0x20 && u < 0x7F) {
      out.push_back(c);
      ++i;
    } else if (const size_t n = Utf8Length(text.substr(i)); n > 0) {
      out.append(text.data() + i, n);
      i += n;
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", u);
      ++i;
    }
  }
  if (cut) out += "...";
  return out;
}

}  // namespace strata
