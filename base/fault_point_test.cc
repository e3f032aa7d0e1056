#include "base/fault_point.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace strata {
namespace {

class Recorder final : public FaultInjector {
 public:
  void Reach(FaultSite site, int64_t step) override {
    reached.emplace_back(site, step);
  }
  std::vector<std::pair<FaultSite, int64_t>> reached;
};

TEST(FaultPointTest, NamesRoundTrip) {
  for (FaultSite site :
       {FaultSite::kForward, FaultSite::kBackward, FaultSite::kCollective,
        FaultSite::kSave, FaultSite::kAsyncSave, FaultSite::kStepEnd}) {
    FaultSite parsed = FaultSite::kForward;
    ASSERT_TRUE(ParseFaultSite(FaultSiteName(site), &parsed))
        << FaultSiteName(site);
    EXPECT_EQ(parsed, site);
  }
  FaultSite unused = FaultSite::kForward;
  EXPECT_FALSE(ParseFaultSite("optimizer", &unused));
}

TEST(FaultPointTest, InstalledInjectorSeesPointsWithTheirSteps) {
  Recorder recorder;
  ReachFaultPoint(FaultSite::kForward);  // None installed: nothing happens.
  SetFaultInjector(&recorder);
  SetFaultStep(7);
  ReachFaultPoint(FaultSite::kCollective);
  ReachFaultPoint(FaultSite::kAsyncSave, 5);
  SetFaultInjector(nullptr);
  ReachFaultPoint(FaultSite::kBackward);
  SetFaultStep(-1);
  const std::vector<std::pair<FaultSite, int64_t>> want = {
      {FaultSite::kCollective, 7}, {FaultSite::kAsyncSave, 5}};
  EXPECT_EQ(recorder.reached, want);
}

}  // namespace
}  // namespace strata
