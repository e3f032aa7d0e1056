#include "base/heartbeat.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

// Reads `n` bytes from `fd`, waiting at most 10 s for each.
std::string ReadBytes(int fd, int n) {
  std::string bytes;
  while (static_cast<int>(bytes.size()) < n) {
    pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, 10000) != 1) break;
    char c;
    if (read(fd, &c, 1) != 1) break;
    bytes.push_back(c);
  }
  return bytes;
}

TEST(HeartbeatTest, BeatsOneByteEveryInterval) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    auto beat = Heartbeat::Start(fds[1], absl::Milliseconds(5));
    ASSERT_TRUE(beat.ok()) << beat.status();
    EXPECT_EQ(ReadBytes(fds[0], 3), "...");
  }
  // Destroying it closed the write end: the reader sees EOF after what was
  // left in the pipe.
  char buffer[4096];
  while (read(fds[0], buffer, sizeof(buffer)) > 0) {
  }
  EXPECT_EQ(read(fds[0], buffer, 1), 0);
  close(fds[0]);
}

TEST(HeartbeatTest, AGoneReaderEndsTheBeatingWithoutKillingTheProcess) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  auto beat = Heartbeat::Start(fds[1], absl::Milliseconds(1));
  ASSERT_TRUE(beat.ok()) << beat.status();
  // Joins the thread, which met EPIPE: this process must still be alive
  // (an unblocked SIGPIPE would have ended the test binary).
  beat->reset();
}

TEST(HeartbeatTest, RejectsAClosedDescriptor) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_THAT(Heartbeat::Start(fds[1], absl::Seconds(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not an open file descriptor")));
}

TEST(HeartbeatTest, RejectsAReadOnlyDescriptor) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_THAT(Heartbeat::Start(fds[0], absl::Seconds(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not open for writing")));
  close(fds[0]);
  close(fds[1]);
}

TEST(HeartbeatTest, RejectsANonPositiveInterval) {
  EXPECT_THAT(Heartbeat::Start(1, absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("interval must be positive")));
}

}  // namespace
}  // namespace strata
