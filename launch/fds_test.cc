#include "launch/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/status/statusor.h"
#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) >= 0; }

TEST(FdsTest, ScopedFdClosesOnDestruction) {
  int raw = -1;
  {
    ScopedFd fd(dup(STDERR_FILENO));
    raw = fd.get();
    ASSERT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(FdsTest, ReleaseGivesUpOwnership) {
  int raw = -1;
  {
    ScopedFd fd(dup(STDERR_FILENO));
    raw = fd.release();
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_TRUE(IsOpen(raw));
  close(raw);
}

TEST(FdsTest, PipeEndsAreAboveStdioAndCloseOnExec) {
  ScopedFd read_end, write_end;
  ASSERT_THAT(MakePipe(&read_end, &write_end), IsOk());
  for (int fd : {read_end.get(), write_end.get()}) {
    EXPECT_GT(fd, STDERR_FILENO);
    EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  }
}

TEST(FdsTest, WriteAllWritesEveryByteThroughANonBlockingPipe) {
  ScopedFd read_end, write_end;
  ASSERT_THAT(MakePipe(&read_end, &write_end), IsOk());
  ASSERT_THAT(SetNonBlocking(write_end.get()), IsOk());
  ASSERT_TRUE(WriteAll(write_end.get(), "hello"));
  char buffer[8] = {};
  EXPECT_EQ(read(read_end.get(), buffer, sizeof(buffer)), 5);
  EXPECT_STREQ(buffer, "hello");
}

TEST(FdsTest, WriteAllToAClosedDescriptorFails) {
  EXPECT_FALSE(WriteAll(-1, "x"));
}

// Forwards what `text` becomes through a LineForwarder with `prefix`.
std::string Forwarded(const std::string& text, const std::string& prefix) {
  ScopedFd in_read, in_write, out_read, out_write;
  EXPECT_THAT(MakePipe(&in_read, &in_write), IsOk());
  EXPECT_THAT(MakePipe(&out_read, &out_write), IsOk());
  EXPECT_THAT(SetNonBlocking(in_read.get()), IsOk());
  EXPECT_TRUE(WriteAll(in_write.get(), text));
  in_write.reset();  // EOF after the text.
  LineForwarder forwarder(std::move(in_read), out_write.get(), prefix);
  while (forwarder.is_open()) forwarder.ReadAvailable();
  out_write.reset();
  std::string out;
  char buffer[256];
  ssize_t n;
  while ((n = read(out_read.get(), buffer, sizeof(buffer))) > 0) {
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

TEST(LineForwarderTest, PrefixesEveryLineAndEndsAPartialOne) {
  EXPECT_EQ(Forwarded("a\nbc\nd", "[rank1]: "),
            "[rank1]: a\n[rank1]: bc\n[rank1]: d\n");
}

TEST(LineForwarderTest, WithoutAPrefixForwardsUnchanged) {
  EXPECT_EQ(Forwarded("a\nb\n", ""), "a\nb\n");
}

TEST(PickFreeTcpPortTest, ReturnsAPortThatCanBeBound) {
  absl::StatusOr<int> port = PickFreeTcpPort();
  ASSERT_THAT(port.status(), IsOk());
  EXPECT_GT(*port, 0);
  EXPECT_LE(*port, 65535);
  ScopedFd socket_fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(socket_fd.valid());
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(*port));
  EXPECT_EQ(bind(socket_fd.get(), reinterpret_cast<sockaddr*>(&address),
                 sizeof(address)),
            0)
      << ErrnoText(errno);
}

}  // namespace
}  // namespace strata::launch
