// A process's scheduling state as Linux reports it in /proc/<pid>/stat: the
// launcher's way to tell a rank that is stopped (SIGSTOP, a debugger) — it
// cannot react to SIGTERM, so it gets SIGKILL at once — from one that is
// merely slow to exit.
#ifndef STRATA_LAUNCH_PROCESS_STATE_H_
#define STRATA_LAUNCH_PROCESS_STATE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::launch {

// The state letter of a /proc/<pid>/stat line ("4242 (train) T 1 ..."): the
// first field after the command name's closing parenthesis (the name may hold
// spaces and parentheses). InvalidArgument quoting the line otherwise.
absl::StatusOr<char> ParseProcStatState(absl::string_view stat);

// The state letter of process `pid` ('R', 'S', 'D', 'T', 't', 'Z', ...).
// NotFound if it does not exist (any more).
absl::StatusOr<char> ProcessState(pid_t pid);

// Stopped by a signal ('T') or by a tracer ('t').
bool IsStoppedState(char state);

// "T (stopped)", "S (sleeping)", ...
std::string DescribeProcessState(char state);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_PROCESS_STATE_H_
