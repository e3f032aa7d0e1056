#include <gtest/gtest.h>

#include "tools/build_defs/testdata/example.pb.h"

namespace strata {
namespace {

TEST(StrataCcProtoLibraryTest, GeneratedMessageRoundTrips) {
  testing::Chunk chunk;
  chunk.set_offset(42);
  chunk.add_shape(3);
  chunk.add_shape(4);
  chunk.set_name("blocks.0.attn.qkv.weight");
  std::string bytes;
  ASSERT_TRUE(chunk.SerializeToString(&bytes));
  testing::Chunk parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.offset(), 42);
  ASSERT_EQ(parsed.shape_size(), 2);
  EXPECT_EQ(parsed.shape(1), 4);
  EXPECT_EQ(parsed.name(), "blocks.0.attn.qkv.weight");
}

}  // namespace
}  // namespace strata
