#include "data/rng.h"

#include <glog/logging.h>

#include <numeric>
#include <utility>

namespace strata::data {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t UniformInt(std::mt19937_64& gen, uint64_t n) {
  CHECK_GT(n, 0u) << "UniformInt over an empty range";
  // 2^64 mod n, computed in 64 bits: (2^64 - n) mod n.
  const uint64_t threshold = (0 - n) % n;
  while (true) {
    const uint64_t x = gen();
    if (x >= threshold) return x % n;
  }
}

double UniformDouble(std::mt19937_64& gen) {
  return static_cast<double>(gen() >> 11) * 0x1.0p-53;
}

uint64_t MixSeed(uint64_t a, uint64_t b) {
  return SplitMix64(SplitMix64(a) ^ b);
}

std::vector<int64_t> RandomPermutation(int64_t n, std::mt19937_64& gen) {
  CHECK_GE(n, 0) << "RandomPermutation of a negative size";
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j =
        static_cast<int64_t>(UniformInt(gen, static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace strata::data
