#include "base/shape.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(ShapeStringTest, JoinsDimensionsInBrackets) {
  EXPECT_EQ(ShapeString(std::vector<int64_t>{2, 3, 4}), "[2, 3, 4]");
}

TEST(ShapeStringTest, ScalarIsEmptyBrackets) {
  EXPECT_EQ(ShapeString(std::vector<int64_t>{}), "[]");
}

TEST(NumElementsTest, IsTheProductOfDimensions) {
  EXPECT_EQ(NumElements(std::vector<int64_t>{2, 3, 4}), 24);
  EXPECT_EQ(NumElements(std::vector<int64_t>{}), 1);
  EXPECT_EQ(NumElements(std::vector<int64_t>{5, 0}), 0);
}

}  // namespace
}  // namespace strata
