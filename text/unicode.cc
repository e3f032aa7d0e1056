#include "text/unicode.h"

#include <array>
#include <cstdint>
#include <string>

#include "text/unicode_tables.h"

namespace strata::text {
namespace {

using internal::CodePointRange;

bool InRanges(const CodePointRange* ranges, int size, uint32_t cp) {
  int lo = 0;
  int hi = size;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (ranges[mid].last < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < size && ranges[lo].first <= cp;
}

uint8_t ClassFromTables(uint32_t cp) {
  uint8_t c = 0;
  if (InRanges(internal::kLetterRanges, internal::kLetterRangesSize, cp)) {
    c |= kLetter;
  }
  if (InRanges(internal::kNumberRanges, internal::kNumberRangesSize, cp)) {
    c |= kNumber;
  }
  if (InRanges(internal::kWhiteSpaceRanges, internal::kWhiteSpaceRangesSize,
               cp)) {
    c |= kWhiteSpace;
  }
  return c;
}

// The Basic Multilingual Plane's classes, one byte each (64 KiB), built once.
const std::array<uint8_t, 0x10000>& BmpClasses() {
  static const auto* table = [] {
    auto* t = new std::array<uint8_t, 0x10000>();
    for (uint32_t cp = 0; cp < 0x10000; ++cp) (*t)[cp] = ClassFromTables(cp);
    return t;
  }();
  return *table;
}

}  // namespace

int DecodeUtf8(const char* p, const char* end, uint32_t* code_point) {
  const auto* s = reinterpret_cast<const unsigned char*>(p);
  const int64_t avail = end - p;
  const unsigned char b0 = s[0];
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  }
  // Lengths and the allowed range of the second byte (Unicode Table 3-7).
  int length;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  uint32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *code_point = kInvalidCodePoint;
    return 1;
  }
  if (avail < length || s[1] < lo || s[1] > hi) {
    *code_point = kInvalidCodePoint;
    return 1;
  }
  cp = (cp << 6) | (s[1] & 0x3F);
  for (int i = 2; i < length; ++i) {
    if ((s[i] & 0xC0) != 0x80) {
      *code_point = kInvalidCodePoint;
      return 1;
    }
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  *code_point = cp;
  return length;
}

uint8_t CharClassOf(uint32_t code_point) {
  if (code_point < 0x10000) return BmpClasses()[code_point];
  if (code_point == kInvalidCodePoint) return 0;
  return ClassFromTables(code_point);
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace strata::text
