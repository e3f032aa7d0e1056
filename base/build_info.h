// What the build was made from, stamped at build time (Bazel workspace
// status, tools/workspace_status.sh): the generated build_info.cc is the
// only file that recompiles when the commit changes. Bazel stamps only with
// --stamp (.bazelrc: `bazel build` and `bazel run` do, `bazel test` does
// not, so that test results carry over between commits); the CMake build
// always stamps.
#ifndef STRATA_BASE_BUILD_INFO_H_
#define STRATA_BASE_BUILD_INFO_H_

namespace strata {

// The git commit the workspace had checked out (40 hex digits, "-dirty"
// appended when tracked files had changes), or "unknown" when built outside
// a git checkout. Static storage; callable any time.
// "unknown" also in an unstamped build.
const char* GitCommit();

// Whether the build was stamped (GitCommit() then reads the checkout's
// commit, or "unknown" outside a checkout). Callable any time.
bool Stamped();

}  // namespace strata

#endif  // STRATA_BASE_BUILD_INFO_H_
