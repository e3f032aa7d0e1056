#include "launch/signal_capture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;

TEST(SignalTextTest, NamesTheNumberAndTheDescription) {
  EXPECT_EQ(SignalText(SIGKILL), "signal 9 (Killed)");
  EXPECT_EQ(SignalText(SIGTERM), "signal 15 (Terminated)");
}

TEST(ScopedSignalCaptureTest, CapturedSignalsArriveInOrderOnThePipe) {
  ScopedSignalCapture capture;
  ASSERT_THAT(capture.Install(), IsOk());
  EXPECT_TRUE(capture.TakeSignals().empty());
  ASSERT_EQ(raise(SIGTERM), 0);
  ASSERT_EQ(raise(SIGINT), 0);
  pollfd fd = {capture.read_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&fd, 1, 0), 1);
  EXPECT_TRUE(capture.HasPendingSignal());
  EXPECT_EQ(capture.TakeSignals(), (std::vector<int>{SIGTERM, SIGINT}));
  EXPECT_FALSE(capture.HasPendingSignal());
  EXPECT_TRUE(capture.TakeSignals().empty());
}

TEST(ScopedSignalCaptureTest, RestoresThePreviousHandlers) {
  struct sigaction before;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &before), 0);
  {
    ScopedSignalCapture capture;
    ASSERT_THAT(capture.Install(), IsOk());
    struct sigaction during;
    ASSERT_EQ(sigaction(SIGTERM, nullptr, &during), 0);
    EXPECT_NE(during.sa_handler, before.sa_handler);
  }
  struct sigaction after;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(ScopedSignalCaptureTest, AnIgnoredSignalStaysIgnored) {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction before;
  ASSERT_EQ(sigaction(SIGINT, &ignore, &before), 0);
  {
    ScopedSignalCapture capture;
    ASSERT_THAT(capture.Install(), IsOk());
    struct sigaction during;
    ASSERT_EQ(sigaction(SIGINT, nullptr, &during), 0);
    EXPECT_EQ(during.sa_handler, SIG_IGN);
  }
  ASSERT_EQ(sigaction(SIGINT, &before, nullptr), 0);
}

}  // namespace
}  // namespace strata::launch
