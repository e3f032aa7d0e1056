#!/usr/bin/env bash
# Runs the GPU tests (Bazel tag `gpu`; on a machine without a GPU
# tools/test.sh runs gpu_train_test, which skips, and counts the `manual` ones
# as skipped) of a CMake build on a machine with a GPU, as ctest runs the
# others: from the runfiles root, with the test variables and an empty
# TEST_TMPDIR each.
#
#   tools/gpu/run_gpu_tests.sh BUILD_DIR [PACKAGE/TEST...]
#
# Default: comm/nccl_communicator_test, comm/cuda_current_stream_test,
# launch/train/gpu_train_test, strategies/unit_buffer_pool_test.
# tools/gpu/check.sh (the whole GPU check) finds the gpu tests in the
# CMakeLists.txt files itself, builds them and runs each through this script.
# Exits non-zero if any fails; prints "N passed, N failed". The comm tests are
# `manual` (outside CMake's `all`): build them by name first:
#
#   tools/gpu/build_with_wheel.sh .debs build-gpu comm_nccl_communicator_test \
#     comm_cuda_current_stream_test launch_train_train launch_train_gpu_train_test \
#     strategies_unit_buffer_pool_test &&
#   tools/gpu/run_gpu_tests.sh build-gpu
set -uo pipefail
build=$(cd "${1:?usage: run_gpu_tests.sh BUILD_DIR [PACKAGE/TEST...]}" && pwd)
shift
tests=("$@")
((${#tests[@]})) || tests=(comm/nccl_communicator_test comm/cuda_current_stream_test launch/train/gpu_train_test
  strategies/unit_buffer_pool_test)
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck disable=SC1091
[[ -f "$build/strata_env.sh" ]] && source "$build/strata_env.sh"
runfiles="$build/runfiles"
passed=0
failed=0
for t in "${tests[@]}"; do
  binary="$runfiles/strata/$t"
  if [[ ! -x "$binary" ]]; then
    echo "FAILED $t: $binary is not built"
    failed=$((failed + 1))
    continue
  fi
  if (cd "$runfiles/strata" && "$repo/cmake/run_test.sh" \
      "TEST_SRCDIR=$runfiles" "RUNFILES_DIR=$runfiles" TEST_WORKSPACE=strata \
      "TEST_TMPDIR=$build/testtmp/gpu/${t//\//_}" "TEST_TARGET=//${t%/*}:${t##*/}" \
      -- "$binary"); then
    echo "PASSED $t"
    passed=$((passed + 1))
  else
    echo "FAILED $t"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
((failed == 0))
