#include "launch/process_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ProcessStateTest, ParsesTheStateAfterTheName) {
  auto state = ParseProcStatState("4242 (train) T 1 4242 4242 0 -1");
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, 'T');
}

TEST(ProcessStateTest, ANameWithSpacesAndParenthesesDoesNotConfuseIt) {
  auto state = ParseProcStatState("7 (my (odd) prog) S 1 7 7 0 -1");
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, 'S');
}

TEST(ProcessStateTest, RejectsALineWithoutAState) {
  EXPECT_THAT(ParseProcStatState("7 (prog)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("got '7 (prog)'")));
}

TEST(ProcessStateTest, ThisProcessIsRunning) {
  auto state = ProcessState(getpid());
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, 'R');
}

TEST(ProcessStateTest, AStoppedChildIsStopped) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    while (true) pause();
  }
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);  // Until stopped.
  ASSERT_TRUE(WIFSTOPPED(status));
  auto state = ProcessState(child);
  ASSERT_THAT(state, IsOk());
  EXPECT_TRUE(IsStoppedState(*state));
  EXPECT_EQ(DescribeProcessState(*state), "T (stopped)");
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
}

TEST(ProcessStateTest, AMissingProcessIsNotFound) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // Reaped: gone.
  EXPECT_THAT(ProcessState(child).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/stat")));
}

}  // namespace
}  // namespace strata::launch
