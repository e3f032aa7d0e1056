#include "launch/config/option_kinds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(DataKindTest, NamesRoundTrip) {
  for (DataKind kind : {DataKind::kMarkov, DataKind::kBytes, DataKind::kUint16,
                        DataKind::kUint32, DataKind::kText}) {
    ASSERT_OK_AND_ASSIGN(const DataKind parsed,
                         ParseDataKind(DataKindName(kind)));
    EXPECT_EQ(parsed, kind) << DataKindName(kind);
  }
}

TEST(DataKindTest, Names) {
  EXPECT_EQ(DataKindName(DataKind::kMarkov), "markov");
  EXPECT_EQ(DataKindName(DataKind::kBytes), "bytes");
  EXPECT_EQ(DataKindName(DataKind::kUint16), "uint16");
  EXPECT_EQ(DataKindName(DataKind::kUint32), "uint32");
  EXPECT_EQ(DataKindName(DataKind::kText), "text");
}

TEST(DataKindTest, UnknownNameNamesTheFlagAndTheChoices) {
  EXPECT_THAT(ParseDataKind("parquet"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--data: must be markov, bytes, uint16, uint32 or text, "
                       "got 'parquet'"));
}

TEST(PrecisionTest, NamesRoundTrip) {
  for (Precision precision :
       {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    ASSERT_OK_AND_ASSIGN(const Precision parsed,
                         ParsePrecision(PrecisionName(precision)));
    EXPECT_EQ(parsed, precision) << PrecisionName(precision);
  }
}

TEST(PrecisionTest, Names) {
  EXPECT_EQ(PrecisionName(Precision::kFp32), "fp32");
  EXPECT_EQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_EQ(PrecisionName(Precision::kFp16), "fp16");
}

TEST(PrecisionTest, UnknownNameNamesTheFlagAndTheChoices) {
  EXPECT_THAT(ParsePrecision("fp8"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--precision: must be fp32, bf16 or fp16, got 'fp8'"));
}

}  // namespace
}  // namespace strata::launch
