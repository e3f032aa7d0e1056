// Deterministic random numbers for data generation and shuffling.
//
// Everything here is derived from the raw 64-bit outputs of std::mt19937_64,
// whose sequence the C++ standard fixes, and never from
// std::uniform_*_distribution, whose output is implementation-defined. So a
// seed gives the same corpus and the same sample order on every machine and
// standard library.
#ifndef STRATA_DATA_RNG_H_
#define STRATA_DATA_RNG_H_

#include <cstdint>
#include <random>
#include <vector>

namespace strata::data {

// A uniform integer in [0, n), unbiased: raw outputs below 2^64 mod n are
// rejected, so the accepted range is a whole number of copies of [0, n).
// CHECK-fails if n == 0.
uint64_t UniformInt(std::mt19937_64& gen, uint64_t n);

// A uniform double in [0, 1) on the grid k * 2^-53: the top 53 bits of one
// raw output. Exact, so identical on every IEEE-754 machine.
double UniformDouble(std::mt19937_64& gen);

// Mixes two 64-bit values into a seed (SplitMix64's finaliser applied twice),
// for deriving independent streams, e.g. one per epoch, from one user seed.
uint64_t MixSeed(uint64_t a, uint64_t b);

// A uniformly random permutation of [0, n) by Fisher-Yates with UniformInt.
// CHECK-fails if n < 0.
std::vector<int64_t> RandomPermutation(int64_t n, std::mt19937_64& gen);

}  // namespace strata::data

#endif  // STRATA_DATA_RNG_H_
