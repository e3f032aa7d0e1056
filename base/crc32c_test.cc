#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace strata::checkpoint {
namespace {

TEST(Crc32cTest, CheckValueOfTheStandard) {
  // The check value of CRC-32C (RFC 3720, "123456789").
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, Rfc3720ZerosVector) {
  // RFC 3720 B.4: 32 bytes of zeros.
  const std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
}

TEST(Crc32cTest, FastPathEqualsPortableAtEverySizeAndAlignment) {
  // Sizes around the interleaved block (3 x 8192 bytes) and odd alignments
  // exercise every path: head bytes, three streams, 8-byte words, tail.
  std::mt19937 rng(3);
  std::vector<uint8_t> data(3 * 8192 * 2 + 64);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t offset : {0, 1, 3, 7}) {
    for (size_t size :
         {0, 1, 7, 8, 9, 100, 24575, 24576, 24577, 49152, 49159}) {
      ASSERT_LE(offset + size, data.size());
      EXPECT_EQ(Crc32c(data.data() + offset, size),
                Crc32cPortable(data.data() + offset, size))
          << "offset " << offset << " size " << size;
    }
  }
}

TEST(Crc32cTest, ContinuesAcrossCalls) {
  const std::string s = "hello, checkpoint world";
  const uint32_t whole = Crc32c(s.data(), s.size());
  EXPECT_EQ(Crc32c(s.data() + 5, s.size() - 5, Crc32c(s.data(), 5)), whole);
}

TEST(Crc32cTest, OneFlippedBitChangesTheChecksum) {
  std::vector<uint8_t> data(100000, 0x5a);
  const uint32_t before = Crc32c(data.data(), data.size());
  data[54321] ^= 0x10;
  EXPECT_NE(Crc32c(data.data(), data.size()), before);
}

}  // namespace
}  // namespace strata::checkpoint
