#include "serialization/pickle_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata::serialization {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

// The one opcode `bytes` holds (checked to be all of it).
PickleOp DecodeOne(const std::string& bytes) {
  const std::string where = "test.pkl";
  PickleDecoder decoder(bytes, where);
  PickleOp op;
  EXPECT_THAT(decoder.Next(&op), IsOk());
  PickleOp stop;
  EXPECT_THAT(decoder.Next(&stop), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("truncated pickle")));
  return op;
}

TEST(PickleOpsTest, SmallIntegersAreUnsignedLittleEndian) {
  EXPECT_EQ(DecodeOne(std::string("K\xff", 2)).integer, 255);
  EXPECT_EQ(DecodeOne(std::string("M\x01\x02", 3)).integer, 0x0201);
}

TEST(PickleOpsTest, BinIntIsSigned) {
  EXPECT_EQ(DecodeOne(std::string("J\xfe\xff\xff\xff", 5)).integer, -2);
}

TEST(PickleOpsTest, Long1IsSignExtendedTwosComplement) {
  // 0xff7f little-endian = -129; 0x80 0x00 = +128.
  EXPECT_EQ(DecodeOne(std::string("\x8a\x02\x7f\xff", 4)).integer, -129);
  EXPECT_EQ(DecodeOne(std::string("\x8a\x02\x80\x00", 4)).integer, 128);
  EXPECT_EQ(DecodeOne(std::string("\x8a\x00", 2)).integer, 0);
}

TEST(PickleOpsTest, Long1WiderThan64BitsIsAnError) {
  const std::string bytes(
      "\x8a\x09"
      "123456789",
      11);
  const std::string where = "wide.pkl";
  PickleDecoder decoder(bytes, where);
  PickleOp op;
  EXPECT_THAT(decoder.Next(&op),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("wide.pkl: integer wider than 64 bits "
                                 "(opcode 0x8a, at pickle byte 2)")));
}

TEST(PickleOpsTest, BinFloatIsBigEndian) {
  // 1.5 = 0x3ff8000000000000.
  EXPECT_EQ(DecodeOne(std::string("G\x3f\xf8\0\0\0\0\0\0", 9)).real, 1.5);
}

TEST(PickleOpsTest, StringsAndBytesCarryTheirPayload) {
  EXPECT_EQ(DecodeOne(std::string("\x8c\x02hi", 4)).text, "hi");
  EXPECT_EQ(DecodeOne(std::string("X\x03\0\0\0abc", 8)).text, "abc");
  EXPECT_EQ(DecodeOne(std::string("C\x01z", 3)).text, "z");
  EXPECT_EQ(DecodeOne(std::string("\x8e\x01\0\0\0\0\0\0\0q", 10)).text, "q");
}

TEST(PickleOpsTest, GlobalJoinsModuleAndNameSpellingBuiltinsForPython3) {
  EXPECT_EQ(DecodeOne("ctorch\nSize\n").text, "torch.Size");
  EXPECT_EQ(DecodeOne("c__builtin__\nset\n").text, "builtins.set");
}

TEST(PickleOpsTest, MemoIndicesAreDecoded) {
  EXPECT_EQ(DecodeOne(std::string("q\x07", 2)).integer, 7);
  EXPECT_EQ(DecodeOne(std::string("j\x00\x01\0\0", 5)).integer, 256);
}

TEST(PickleOpsTest, OpcodeWithoutArgumentIsItsCodeAlone) {
  const PickleOp op = DecodeOne("}");
  EXPECT_EQ(op.code, '}');
  EXPECT_EQ(op.integer, 0);
  EXPECT_TRUE(op.text.empty());
}

TEST(PickleOpsTest, TruncatedArgumentNamesTheOpcodeAndPosition) {
  const std::string bytes("X\x05\0\0\0ab", 7);
  const std::string where = "cut.pkl";
  PickleDecoder decoder(bytes, where);
  PickleOp op;
  EXPECT_THAT(decoder.Next(&op),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cut.pkl: truncated pickle (opcode 0x58, at "
                                 "pickle byte 5)")));
}

}  // namespace
}  // namespace strata::serialization
