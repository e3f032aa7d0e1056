#include "base/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

TEST(ParseJsonTest, ReadsNestedValues) {
  absl::StatusOr<nlohmann::json> json =
      ParseJson(R"({"a": {"b": [1, 2.5, "x"]}, "c": true})", "t.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["a"]["b"][0].get<int>(), 1);
  EXPECT_EQ((*json)["a"]["b"][1].get<double>(), 2.5);
  EXPECT_EQ((*json)["a"]["b"][2].get<std::string>(), "x");
  EXPECT_TRUE((*json)["c"].get<bool>());
}

TEST(ParseJsonTest, SyntaxErrorNamesLineAndColumn) {
  absl::StatusOr<nlohmann::json> json = ParseJson("{\n  \"a\": ,\n}", "t.json");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("t.json:2:8: JSON syntax"));
}

TEST(ParseJsonTest, DuplicateKeyIsNamedWithItsPath) {
  absl::StatusOr<nlohmann::json> json =
      ParseJson(R"({"a": {"b": 1, "b": 2}})", "t.json");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(),
              HasSubstr("t.json: a.b: the key appears twice"));
}

TEST(ParseJsonTest, SameKeyInSiblingObjectsIsAllowed) {
  EXPECT_TRUE(ParseJson(R"({"a": {"k": 1}, "b": {"k": 2}})", "t.json").ok());
}

TEST(ParseJsonTest, IllFormedUtf8IsASyntaxError) {
  absl::StatusOr<nlohmann::json> json = ParseJson("{\"a\xff\": 1}", "t.json");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("t.json:1:"));
}

}  // namespace
}  // namespace strata
