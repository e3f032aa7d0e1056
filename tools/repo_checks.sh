#!/usr/bin/env bash
# Repository checks that are not GoogleTest cases: each prints its findings
# and is counted as one test case by tools/count_tests.py. Run from the
# repository root after tools/bootstrap.sh.
#
# Usage: tools/repo_checks.sh RESULTS_FILE
#   RESULTS_FILE gets one line "<check>\tpassed|failed" per check.
set -uo pipefail
cd "$(dirname "$0")/.."
results=${1:?usage: tools/repo_checks.sh RESULTS_FILE}
: > "$results"

run_check() {
  local name=$1
  shift
  local out
  out=$("$@" 2>&1)
  local rc=$?
  if ((rc == 0)); then
    printf '%s\tpassed\n' "$name" >> "$results"
  else
    printf '%s\tfailed\n' "$name" >> "$results"
    echo "check $name FAILED:" >&2
    echo "$out" | tail -n 40 >&2
  fi
}

# Machines without the CUDA toolkit: //... must still resolve and analyse
# when the toolkit is missing (third_party/cuda_repository.bzl).
no_cuda_analysis() {
  bazel build --nobuild --repo_env=STRATA_CUDA_PATH=/nonexistent/strata-no-cuda //... &&
    grep -q "CUDA_FOUND = False" "$(bazel info output_base)/external/local_cuda/defs.bzl"
}

# The CMake build (README, "CMake") configures: CMake syntax, paths and
# dependencies between packages are sound. Only configures: a full CMake
# build and ctest take too long for CI and are run by hand.
cmake_configure() {
  local dir rc
  dir=$(mktemp -d /tmp/strata-cmake-configure.XXXXXX)
  cmake -S . -B "$dir" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release
  rc=$?
  rm -rf "$dir"
  return $rc
}

run_check no_cuda_analysis no_cuda_analysis
run_check sizes python3 tools/check_sizes.py .
run_check sizes_self_test python3 tools/check_sizes.py --self-test
run_check layering python3 tools/check_layering.py
run_check links python3 tools/check_links.py
run_check links_self_test python3 tools/check_links.py --self-test
run_check format tools/check_format.sh
run_check count_tests_self_test python3 tools/count_tests_test.py
run_check cmake_sync python3 tools/check_cmake_sync.py
run_check cmake_sync_self_test python3 tools/check_cmake_sync.py --self-test
run_check cmake_configure cmake_configure
run_check cmake_torch_version tools/cmake_torch_version_test.sh
exit 0
