#include "base/named_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace strata {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

constexpr const char* kKeys[] = {"a", "b"};

TEST(NamedStateMapTest, ReturnsValuesByKey) {
  auto map = NamedStateMap<double>("s", {{"b", 2.0}, {"a", 1.0}}, kKeys);
  ASSERT_THAT(map, IsOk());
  EXPECT_EQ(map->at("a"), 1.0);
  EXPECT_EQ(map->at("b"), 2.0);
}

TEST(NamedStateMapTest, RejectsUnexpectedRepeatedAndMissingKeys) {
  EXPECT_THAT(std::string(NamedStateMap<int64_t>("x state", {{"c", 1}}, kKeys)
                              .status()
                              .message()),
              HasSubstr("x state has unexpected key 'c'; expected keys: a, b"));
  EXPECT_THAT(
      std::string(NamedStateMap<int64_t>("x state", {{"a", 1}, {"a", 2}}, kKeys)
                      .status()
                      .message()),
      HasSubstr("x state has key 'a' twice"));
  EXPECT_THAT(std::string(NamedStateMap<int64_t>("x state", {{"a", 1}}, kKeys)
                              .status()
                              .message()),
              HasSubstr("x state is missing key 'b'"));
}

}  // namespace
}  // namespace strata
