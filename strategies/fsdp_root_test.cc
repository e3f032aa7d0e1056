#include "strategies/fsdp_root.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;
using ::testing::ElementsAre;

// A GPT-like model (as fsdp_plan_test.cc's): units embed, blocks.0,
// blocks.1, head; the head reads the embed unit's wte.weight (tied).
PlanInput Gpt(std::vector<int> wrapped) {
  PlanInput input;
  input.parameters = {
      {"wte.weight", {10, 2}},     {"wpe.weight", {4, 2}},
      {"blocks.0.ln.weight", {2}}, {"blocks.0.fc.weight", {2, 2}},
      {"blocks.1.ln.weight", {2}}, {"blocks.1.fc.weight", {2, 2}},
      {"ln_f.weight", {2}},
  };
  input.units = {
      {"embed", {"wte.weight", "wpe.weight"}},
      {"blocks.0", {"blocks.0.ln.weight", "blocks.0.fc.weight"}},
      {"blocks.1", {"blocks.1.ln.weight", "blocks.1.fc.weight"}},
      {"head", {"ln_f.weight"}},
  };
  input.wrapped = std::move(wrapped);
  input.shard_size = 2;
  return input;
}

const SharedReaders kTied = {{"wte.weight", {"head"}}};

RootReaders Find(const std::vector<int>& wrapped, const SharedReaders& shared,
                 bool ln_f_in_head = true) {
  PlanInput input = Gpt(wrapped);
  if (!ln_f_in_head) input.units.back().parameters.clear();
  for (const auto& [name, readers] : shared) input.shared.insert(name);
  absl::StatusOr<FsdpPlan> plan = PlanFlatUnits(input);
  EXPECT_THAT(plan, IsOk());
  if (!plan.ok()) return {};
  return FindRootReaders(*plan, input.units, shared);
}

std::vector<bool> Reads(const std::vector<int>& wrapped,
                        const SharedReaders& shared) {
  RootReaders found = Find(wrapped, shared);
  EXPECT_THAT(found.outside_units, ElementsAre()) << "every root parameter "
                                                     "has a reader";
  return found.reads;
}

TEST(FindRootReadersTest, UnwrappedEmbedAndHeadOwnRootParameters) {
  // Blocks wrapped: embed (wte, wpe) and head (ln_f) are the root's.
  EXPECT_THAT(Reads({1, 2}, kTied), ElementsAre(true, false, false, true));
}

TEST(FindRootReadersTest, WrappedHeadReadsTheTiedEmbeddingInTheRoot) {
  // Every unit wrapped: only the tied wte.weight is left to the root; the
  // embed unit owns it and the head is its declared reader.
  EXPECT_THAT(Reads({0, 1, 2, 3}, kTied),
              ElementsAre(true, false, false, true));
}

TEST(FindRootReadersTest, UntiedWrappedModelHasNoRootReaders) {
  // Nothing shared and every unit wrapped: no root at all.
  EXPECT_THAT(Reads({0, 1, 2, 3}, {}), ElementsAre(false, false, false, false));
}

TEST(FindRootReadersTest, OwnerAndReadersOfASharedParameterReadTheRoot) {
  // blocks.1 reads blocks.0's fc.weight: the plan moves it to the root, so
  // its owner blocks.0 and its reader blocks.1 read the root, as does the
  // unwrapped embed; the untied head does not.
  EXPECT_THAT(Reads({1, 2, 3}, {{"blocks.0.fc.weight", {"blocks.1"}}}),
              ElementsAre(true, true, true, false));
}

TEST(FindRootReadersTest, ParametersOutsideEveryUnitAreListed) {
  // ln_f.weight owned by no unit (the head lists none): it is in the root,
  // and no unit reads it.
  const RootReaders found = Find({1, 2}, kTied, /*ln_f_in_head=*/false);
  EXPECT_THAT(found.outside_units, ElementsAre("ln_f.weight"));
  EXPECT_THAT(found.reads, ElementsAre(true, false, false, true));
}

}  // namespace
}  // namespace strata::strategies
