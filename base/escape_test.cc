#include "base/escape.h"

#include <string>

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(EscapeBytesTest, KeepsPrintableAscii) {
  EXPECT_EQ(EscapeBytes("model.layers.0.weight"), "model.layers.0.weight");
}

TEST(EscapeBytesTest, EscapesControlBytes) {
  EXPECT_EQ(EscapeBytes(std::string("a\nb\0c\x1b[31m", 10)),
            "a\\x0ab\\x00c\\x1b[31m");
}

TEST(EscapeBytesTest, EscapesQuotesAndBackslash) {
  EXPECT_EQ(EscapeBytes("it's \"x\" \\"), "it\\'s \\\"x\\\" \\\\");
}

TEST(EscapeBytesTest, KeepsValidUtf8) {
  // "é" (U+00E9) and "€" (U+20AC) and U+1F600, each well formed.
  EXPECT_EQ(EscapeBytes("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
            "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST(EscapeBytesTest, EscapesInvalidUtf8) {
  // A lone continuation byte, a truncated sequence, an overlong "/" (C0 AF),
  // a UTF-16 surrogate (ED A0 80) and a C1 control (U+0085 = C2 85).
  EXPECT_EQ(EscapeBytes("\x80|\xe2\x82|\xc0\xaf|\xed\xa0\x80|\xc2\x85"),
            "\\x80|\\xe2\\x82|\\xc0\\xaf|\\xed\\xa0\\x80|\\xc2\\x85");
}

TEST(EscapeBytesTest, CutsLongText) {
  EXPECT_EQ(EscapeBytes(std::string(10, 'a'), 4), "aaaa...");
  EXPECT_EQ(EscapeBytes("abcd", 4), "abcd");
}

}  // namespace
}  // namespace strata
