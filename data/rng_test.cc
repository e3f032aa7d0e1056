#include "data/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace strata::data {
namespace {

// The C++ standard fixes the 10000th output of a default-constructed
// std::mt19937_64 ([rand.predef]); everything here builds on that sequence.
constexpr uint64_t kTenThousandthOutput = 9981545732273789042ULL;

TEST(UniformDoubleTest, IsTopFiftyThreeBitsOfRawOutput) {
  std::mt19937_64 gen;
  gen.discard(9999);
  EXPECT_EQ(
      UniformDouble(gen),
      static_cast<double>(kTenThousandthOutput >> 11) / 9007199254740992.0);
}

TEST(UniformDoubleTest, StaysInHalfOpenUnitInterval) {
  std::mt19937_64 gen(7);
  for (int i = 0; i < 100000; ++i) {
    const double u = UniformDouble(gen);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(UniformIntTest, RangeOfOneAlwaysGivesZero) {
  std::mt19937_64 gen(3);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(UniformInt(gen, 1), 0u);
}

TEST(UniformIntTest, RejectsRawOutputsBelowTwoToTheSixtyFourModN) {
  // n = 2^63 + 1: 2^64 mod n = 2^63 - 1, so about half the raw outputs are
  // rejected; each accepted output x gives x mod n.
  const uint64_t n = (uint64_t{1} << 63) + 1;
  const uint64_t threshold = (uint64_t{1} << 63) - 1;
  std::mt19937_64 gen(11);
  std::mt19937_64 raw(11);
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = raw();
    while (x < threshold) x = raw();
    ASSERT_EQ(UniformInt(gen, n), x % n) << "draw " << i;
  }
}

TEST(UniformIntTest, SixFacesAreEquallyLikely) {
  // 60000 draws, 10000 expected per face; the count's standard deviation is
  // sqrt(60000 * 1/6 * 5/6) = 91.3, so 5 sigma is 456.
  std::mt19937_64 gen(5);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) {
    const uint64_t v = UniformInt(gen, 6);
    ASSERT_LT(v, 6u);
    ++counts[v];
  }
  for (int face = 0; face < 6; ++face) {
    EXPECT_NEAR(counts[face], 10000, 456) << "face " << face;
  }
}

TEST(RandomPermutationTest, IsAPermutation) {
  std::mt19937_64 gen(1);
  std::vector<int64_t> perm = RandomPermutation(1000, gen);
  std::sort(perm.begin(), perm.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(perm[i], i);
}

TEST(RandomPermutationTest, EmptyAndSingletonAreTrivial) {
  std::mt19937_64 gen(1);
  EXPECT_TRUE(RandomPermutation(0, gen).empty());
  EXPECT_EQ(RandomPermutation(1, gen), std::vector<int64_t>{0});
}

TEST(RandomPermutationTest, AllOrdersOfThreeAreEquallyLikely) {
  // 60000 permutations of 3 elements, 10000 expected per order; 5 sigma of
  // the count is 456 (as for a die).
  std::mt19937_64 gen(9);
  std::map<std::vector<int64_t>, int> counts;
  for (int i = 0; i < 60000; ++i) ++counts[RandomPermutation(3, gen)];
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [perm, count] : counts) EXPECT_NEAR(count, 10000, 456);
}

TEST(RandomPermutationTest, SameSeedGivesSamePermutation) {
  std::mt19937_64 a(42), b(42), c(43);
  const std::vector<int64_t> pa = RandomPermutation(100, a);
  EXPECT_EQ(pa, RandomPermutation(100, b));
  EXPECT_NE(pa, RandomPermutation(100, c));
}

TEST(MixSeedTest, DistinctInputsGiveDistinctSeeds) {
  EXPECT_EQ(MixSeed(1, 2), MixSeed(1, 2));
  EXPECT_NE(MixSeed(1, 2), MixSeed(2, 1));
  EXPECT_NE(MixSeed(1, 0), MixSeed(1, 1));
  EXPECT_NE(MixSeed(0, 0), MixSeed(1, 0));
}

}  // namespace
}  // namespace strata::data
