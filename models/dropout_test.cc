#include "models/dropout.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace strata::models {
namespace {

// Known-answer vectors of Philox4x32-10 from Random123's kat_vectors.
TEST(Philox4x32Test, MatchesKnownAnswerVectors) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu,
                                     0x9b00dbd8u}));
  EXPECT_EQ(Philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                       {0xffffffffu, 0xffffffffu}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u,
                                     0x6d5451fdu}));
  EXPECT_EQ(Philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                       {0xa4093822u, 0x299f31d0u}),
            (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u,
                                     0x24126ea1u}));
}

DropoutContext Context(std::vector<int64_t> ids, int64_t step = 3) {
  DropoutContext context;
  context.seed = 1234;
  context.step = step;
  context.sample_ids = std::move(ids);
  return context;
}

TEST(CounterDropoutTest, RowsDependOnlyOnTheirGlobalSampleIndex) {
  // The batch of samples 0..3 on one rank, and the same samples split over
  // two "ranks" in another order: every sample's mask is the same.
  const at::Tensor ones = at::ones({4, 5, 6});
  const at::Tensor whole = CounterDropout(ones, 0.25, 7, Context({0, 1, 2, 3}));
  const at::Tensor rank0 =
      CounterDropout(ones.narrow(0, 0, 2), 0.25, 7, Context({3, 1}));
  const at::Tensor rank1 =
      CounterDropout(ones.narrow(0, 0, 2), 0.25, 7, Context({2, 0}));
  EXPECT_TRUE(at::equal(rank0[0], whole[3]));
  EXPECT_TRUE(at::equal(rank0[1], whole[1]));
  EXPECT_TRUE(at::equal(rank1[0], whole[2]));
  EXPECT_TRUE(at::equal(rank1[1], whole[0]));
}

TEST(CounterDropoutTest, SameInputsGiveBitwiseTheSameOutput) {
  const at::Tensor x = at::randn({3, 40});
  EXPECT_TRUE(at::equal(CounterDropout(x, 0.1, 9, Context({5, 6, 7})),
                        CounterDropout(x, 0.1, 9, Context({5, 6, 7}))));
}

TEST(CounterDropoutTest, StepsSitesAndSeedsGiveDifferentMasks) {
  const at::Tensor ones = at::ones({2, 256});
  const at::Tensor base = CounterDropout(ones, 0.5, 1, Context({0, 1}, 0));
  EXPECT_FALSE(
      at::equal(base, CounterDropout(ones, 0.5, 1, Context({0, 1}, 1))));
  EXPECT_FALSE(
      at::equal(base, CounterDropout(ones, 0.5, 2, Context({0, 1}, 0))));
  DropoutContext other_seed = Context({0, 1}, 0);
  other_seed.seed = 99;
  EXPECT_FALSE(at::equal(base, CounterDropout(ones, 0.5, 1, other_seed)));
}

TEST(CounterDropoutTest, KeepsAboutOneMinusPScaledByItsInverse) {
  // n = 2^20 Bernoulli(0.9) draws: the kept fraction's standard deviation is
  // sqrt(0.9 * 0.1 / n) = 2.9e-4; 6 sigma = 1.8e-3.
  const double p = 0.1;
  const at::Tensor out = CounterDropout(
      at::ones({16, 65536}), p, 3,
      Context({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  const double kept = out.ne(0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 1 - p, 1.8e-3);
  const at::Tensor values = out.masked_select(out.ne(0));
  EXPECT_TRUE(at::allclose(values, at::full_like(values, 1 / (1 - p))));
}

TEST(CounterDropoutTest, ElementUniformsMatchTheTensorPath) {
  const at::Tensor out =
      CounterDropout(at::ones({2, 9}), 0.5, 11, Context({40, 41}, 2));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t e = 0; e < 9; ++e) {
      const bool kept = DropoutUniform(1234, 2, 11, 40 + b, e) >= 0.5f;
      EXPECT_EQ(out[b][e].item<float>() != 0, kept) << b << ", " << e;
    }
  }
}

TEST(CounterDropoutTest, GradientIsTheMaskScaled) {
  const at::Tensor x = at::randn({2, 32}).requires_grad_(true);
  const DropoutContext context = Context({0, 1});
  const at::Tensor y = CounterDropout(x, 0.3, 5, context);
  y.sum().backward();
  const at::Tensor mask = CounterDropout(at::ones({2, 32}), 0.3, 5, context);
  EXPECT_TRUE(at::equal(x.grad(), mask));
}

TEST(CounterDropoutTest, Bf16KeepsTheDtype) {
  const at::Tensor out =
      CounterDropout(at::ones({2, 8}, at::kBFloat16), 0.2, 1, Context({0, 1}));
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
}

TEST(CounterDropoutTest, RowCountMismatchIsAnErrorNamingBoth) {
  try {
    CounterDropout(at::ones({3, 4}), 0.1, 1, Context({0, 1}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("3 rows"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("2 samples"), std::string::npos);
  }
}

TEST(DropoutTest, IdentityWhenNotTrainingOrZeroProbability) {
  const at::Tensor x = at::randn({2, 4});
  const DropoutContext context = Context({0, 1});
  EXPECT_TRUE(at::equal(Dropout(x, {0.5, false, &context, 1}), x));
  EXPECT_TRUE(at::equal(Dropout(x, {0.0, true, &context, 1}), x));
}

TEST(DropoutSiteKeyTest, DistinguishesUnitsAndSites) {
  EXPECT_NE(DropoutSiteKey("blocks.0", "attn"),
            DropoutSiteKey("blocks.1", "attn"));
  EXPECT_NE(DropoutSiteKey("blocks.0", "attn"),
            DropoutSiteKey("blocks.0", "mlp"));
  EXPECT_EQ(DropoutSiteKey("blocks.0", "attn"),
            DropoutSiteKey("blocks.0", "attn"));
}

}  // namespace
}  // namespace strata::models
