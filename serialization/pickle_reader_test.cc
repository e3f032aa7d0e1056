#include "serialization/pickle_reader.h"

#include <ATen/core/ivalue.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"

namespace strata::serialization {
namespace {

using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A loader for pickles that name no storage.
absl::StatusOr<at::Tensor> NoStorage(const std::string& key, at::ScalarType,
                                     int64_t) {
  return absl::InternalError("unexpected storage " + key);
}

// The bytes of a string literal, NULs included.
template <size_t N>
std::string Bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

absl::StatusOr<c10::IValue> Read(const std::string& pickle) {
  return ReadPickle(pickle, "test.pkl", NoStorage);
}

// Opcodes: \x80 PROTO, K BININT1, J BININT, } EMPTY_DICT, ( MARK,
// \x8c SHORT_BINUNICODE, u SETITEMS, ] EMPTY_LIST, e APPENDS, . STOP.
TEST(ReadPickleTest, SmallInt) {
  ASSERT_OK_AND_ASSIGN(const c10::IValue value, Read(Bytes("\x80\x02K\x05.")));
  EXPECT_EQ(value.toInt(), 5);
}

TEST(ReadPickleTest, NegativeBinInt) {
  ASSERT_OK_AND_ASSIGN(const c10::IValue value,
                       Read(Bytes("\x80\x02J\xfe\xff\xff\xff.")));
  EXPECT_EQ(value.toInt(), -2);
}

TEST(ReadPickleTest, DictOfStringToInt) {
  ASSERT_OK_AND_ASSIGN(const c10::IValue value, Read(Bytes("\x80\x02}(\x8c\x01"
                                                           "aK\x01\x8c\x01"
                                                           "bK\x02u.")));
  const auto dict = value.toGenericDict();
  ASSERT_EQ(dict.size(), 2);
  EXPECT_EQ(dict.at("a").toInt(), 1);
  EXPECT_EQ(dict.at("b").toInt(), 2);
}

TEST(ReadPickleTest, ListAppends) {
  ASSERT_OK_AND_ASSIGN(const c10::IValue value,
                       Read(Bytes("\x80\x02](K\x01K\x02K\x03"
                                  "e.")));
  ASSERT_EQ(value.toListRef().size(), 3);
  EXPECT_EQ(value.toListRef()[2].toInt(), 3);
}

TEST(ReadPickleTest, TruncatedPickleIsAnError) {
  EXPECT_THAT(
      Read(Bytes("\x80\x02K")),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(StartsWith("test.pkl: "), HasSubstr("truncated pickle"))));
}

TEST(ReadPickleTest, UnsupportedOpcodeIsNamedWithItsPosition) {
  // 'I' (INT, a text integer) is never written by torch.save.
  EXPECT_THAT(Read(Bytes("\x80\x02I5\n.")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unsupported pickle opcode 0x49"),
                             HasSubstr("at pickle byte 3"))));
}

TEST(ReadPickleTest, UnsupportedProtocolIsNamed) {
  EXPECT_THAT(Read(Bytes("\x80\x05K\x01.")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unsupported pickle protocol 5")));
}

TEST(ReadPickleTest, ValuesLeftAtStopAreMalformed) {
  EXPECT_THAT(Read(Bytes("\x80\x02K\x01K\x02.")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 values left at STOP")));
}

TEST(ReadPickleTest, UnknownGlobalIsNamed) {
  // GLOBAL os.system, called with an empty tuple.
  EXPECT_THAT(Read(Bytes("\x80\x02"
                         "cos\nsystem\n)R.")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unsupported Python object 'os.system'")));
}

TEST(ReadPickleTest, ControlBytesInAGlobalNameAreEscaped) {
  // GLOBAL "os\x1b[2J" "sys\xff": an escape sequence and a byte that is
  // not UTF-8 must not reach the message raw.
  const absl::StatusOr<c10::IValue> read =
      Read(Bytes("\x80\x02"
                 "cos\x1b[2J\nsys\xff\n)R."));
  EXPECT_THAT(read, StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("'os\\x1b[2J.sys\\xff'")));
  EXPECT_EQ(read.status().message().find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace strata::serialization
