#include "text/unicode.h"

#include <gtest/gtest.h>

#include <string>

namespace strata::text {
namespace {

uint32_t Decode(const std::string& s, int* length) {
  uint32_t cp;
  *length = DecodeUtf8(s.data(), s.data() + s.size(), &cp);
  return cp;
}

TEST(DecodeUtf8Test, DecodesOneToFourByteSequences) {
  int length;
  EXPECT_EQ(Decode("A", &length), 0x41u);
  EXPECT_EQ(length, 1);
  EXPECT_EQ(Decode("\xC3\xA9", &length), 0xE9u);  // é
  EXPECT_EQ(length, 2);
  EXPECT_EQ(Decode("\xE2\x82\xAC", &length), 0x20ACu);  // €
  EXPECT_EQ(length, 3);
  EXPECT_EQ(Decode("\xF0\x9F\x98\x80", &length), 0x1F600u);  // 😀
  EXPECT_EQ(length, 4);
}

TEST(DecodeUtf8Test, IllFormedBytesAreSingleInvalidUnits) {
  int length;
  for (const std::string& bad :
       {std::string("\x80"), std::string("\xC0\xAF"),  // Overlong '/'.
        std::string("\xC3"),                           // Truncated.
        std::string("\xED\xA0\x80"),                   // Surrogate D800.
        std::string("\xF4\x90\x80\x80"),               // Above U+10FFFF.
        std::string("\xE2\x82"
                    "A"),  // Bad third byte.
        std::string("\xFF")}) {
    EXPECT_EQ(Decode(bad, &length), kInvalidCodePoint);
    EXPECT_EQ(length, 1);
  }
}

TEST(CharClassTest, ClassifiesLettersNumbersAndWhiteSpace) {
  EXPECT_EQ(CharClassOf('a'), kLetter);
  EXPECT_EQ(CharClassOf(0x4E2D), kLetter);   // 中
  EXPECT_EQ(CharClassOf(0x1D400), kLetter);  // Mathematical bold A.
  EXPECT_EQ(CharClassOf('7'), kNumber);
  EXPECT_EQ(CharClassOf(0x216B), kNumber);  // Roman numeral twelve (Nl).
  EXPECT_EQ(CharClassOf(0xBD), kNumber);    // ½ (No).
  EXPECT_EQ(CharClassOf(' '), kWhiteSpace);
  EXPECT_EQ(CharClassOf(0x85), kWhiteSpace);  // NEL is White_Space.
  EXPECT_EQ(CharClassOf(0x3000), kWhiteSpace);
  EXPECT_EQ(CharClassOf(0xFEFF), 0);  // BOM is not White_Space.
  EXPECT_EQ(CharClassOf('!'), 0);
  EXPECT_EQ(CharClassOf(0x1F600), 0);
  EXPECT_EQ(CharClassOf(kInvalidCodePoint), 0);
}

TEST(AppendUtf8Test, RoundTripsThroughDecode) {
  for (const uint32_t cp :
       {0x24u, 0xA2u, 0x939u, 0x20ACu, 0xD55Cu, 0x10348u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    int length;
    EXPECT_EQ(Decode(s, &length), cp);
    EXPECT_EQ(length, static_cast<int>(s.size()));
  }
}

}  // namespace
}  // namespace strata::text
