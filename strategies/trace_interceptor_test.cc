#include "strategies/trace_interceptor.h"

#include <ATen/ops/randint.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "base/trace.h"
#include "models/factory.h"

namespace strata::strategies {
namespace {

std::shared_ptr<models::UnitModel> TracedTinyGpt() {
  auto config = models::ConfigByName("gpt-tiny");
  CHECK(config.ok()) << config.status();
  models::BuildOptions options;
  options.seed = 1;
  auto model = models::BuildModel(*config, options);
  CHECK(model.ok()) << model.status();
  (*model)->AddInterceptor(std::make_shared<TraceInterceptor>());
  return *model;
}

void TrainStep(models::UnitModel& model) {
  const at::Tensor tokens = at::randint(0, 64, {2, 8}, at::kLong);
  model.ForwardLoss(tokens, tokens).backward();
}

// name -> event of a recording with one event per name.
std::map<std::string, trace::Event> ByName(const trace::Recording& r) {
  std::map<std::string, trace::Event> out;
  for (const trace::Event& e : r.events) {
    EXPECT_TRUE(out.emplace(e.name, e).second) << "twice: " << e.name;
  }
  return out;
}

TEST(TraceInterceptorTest, OffRecordsNothing) {
  auto model = TracedTinyGpt();
  trace::Start();
  trace::Stop();
  TrainStep(*model);
  EXPECT_TRUE(trace::Collect().events.empty());
}

TEST(TraceInterceptorTest, EveryUnitGetsAForwardAndABackwardSpan) {
  auto model = TracedTinyGpt();
  trace::Start();
  TrainStep(*model);
  trace::Stop();
  const auto spans = ByName(trace::Collect());
  EXPECT_EQ(spans.size(), 2 * model->units().size());
  for (const models::UnitInfo& unit : model->units()) {
    EXPECT_EQ(spans.count("forward " + unit.name), 1u) << unit.name;
    EXPECT_EQ(spans.count("backward " + unit.name), 1u) << unit.name;
  }
}

// Backward runs the units in reverse: unit i's backward span ends where unit
// i-1's begins (GPT calls its units in sequence, so one gradient tensor ends
// one span and starts the other, in one hook: equal timestamps), and each
// starts after the forward of the last unit ended.
TEST(TraceInterceptorTest, BackwardSpansRunInReverseUnitOrder) {
  auto model = TracedTinyGpt();
  trace::Start();
  TrainStep(*model);
  trace::Stop();
  auto spans = ByName(trace::Collect());
  const auto& units = model->units();
  ASSERT_GE(units.size(), 2u);
  const trace::Event& last_forward = spans["forward " + units.back().name];
  for (size_t i = units.size() - 1; i >= 1; --i) {
    const trace::Event& later = spans["backward " + units[i].name];
    const trace::Event& earlier = spans["backward " + units[i - 1].name];
    EXPECT_EQ(later.start_us + later.duration_us, earlier.start_us)
        << units[i].name << " then " << units[i - 1].name;
    EXPECT_GE(later.start_us, last_forward.start_us + last_forward.duration_us);
  }
}

}  // namespace
}  // namespace strata::strategies
