#!/usr/bin/env bash
# The LibTorch 2.x half of CI, run inside the Debian 13 root
# (tools/libtorch2/run.sh tools/ci_libtorch2.sh): LibTorch 2.6, GCC 14,
# abseil 2024, CMake — the build GPU users use.
#
#  1. The CUDA compile check: every source with a CUDA code path compiled
#     (objects, no link) against LibTorch 2.6's ATen/cuda and c10/cuda headers
#     and /usr/local/cuda's CUDA 13 and NCCL headers (bind-mounted by run.sh),
#     one case each; skipped, and counted so, where the toolkit is missing.
#  2. A CMake build with ccache, then ctest, every test case counted from its
#     XML. By default (what .ci/run runs, within its time budget) the tests
#     tagged `torch_version`, whose behaviour depends on the LibTorch version
#     (fp16, the planner, what base/torch_compat hides, PyTorch 2.6's side of
#     file interop), each built just before ctest runs it; then CMake's
#     `strata_torch_version_ci` target: every library and every binary but
#     the benchmarks. With --all: everything built first, then the whole
#     suite (tools/sanitize.sh libtorch2 runs that).
#  3. The package: the build installed into a temporary prefix, and
#     examples/cmake_consumer built against it (find_package(Strata)) and
#     run (examples/cmake_consumer/check.sh).
#
# Prints every skip and failure, then "N passed, N failed, N skipped"; with
# --totals FILE also writes "passed failed skipped" there. Exit status 0 iff
# nothing failed.
#
# Usage: tools/ci_libtorch2.sh [--all] [--totals FILE] [--deadline EPOCH_S]
#        (inside the root)
#   --deadline EPOCH_S  .ci/run's time budget: nothing starts after that
#     second (date +%s), and a build or test still running then is stopped.
#     What did not run counts as skipped, each with that reason: CI is killed
#     at 90 minutes, and a cold run on a slow machine must still end with its
#     counts (issue 36's order: the Bazel half and the CUDA check first).
#
# Environment: STRATA_CMAKE_BUILD (the build tree; default
# /var/cache/strata/cmake-build inside the root, kept between runs),
# CCACHE_DIR (default /var/cache/strata/ccache), JOBS (default: cores).
set -uo pipefail
cd "$(dirname "$0")/.."

totals=()
all=0
deadline=0
while (($# > 0)); do
  case "$1" in
    --all) all=1; shift ;;
    --totals) totals=(--totals "$2"); shift 2 ;;
    --deadline)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "ci_libtorch2.sh: --deadline takes seconds since the epoch, got '${2:-}'" >&2; exit 2; }
      deadline=$2; shift 2 ;;
    *) echo "ci_libtorch2.sh: unknown argument '$1' (expected --all, --totals FILE or --deadline EPOCH_S)" >&2; exit 2 ;;
  esac
done
log() { echo "[ci_libtorch2 $(date +%T)] $*" >&2; }
# Seconds left before --deadline (a large number without one).
left_s() { if ((deadline)); then echo $((deadline - $(date +%s))); else echo 999999; fi; }
# Runs "$@" under what is left of the budget; 124 if nothing is left or it ran
# out (timeout(1) then stops the command's whole process group).
budgeted() {
  local left
  left=$(left_s)
  ((left > 0)) || return 124
  timeout "$left" "$@"
}
budget_reason=".ci/run's time budget ran out first (a cold run on a slow machine; tools/ci_libtorch2.sh runs it alone)"

build=${STRATA_CMAKE_BUILD:-/var/cache/strata/cmake-build}
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/strata/ccache}
# The checkout is a fresh clone at every CI run: hash contents, not mtimes.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-include_file_mtime,include_file_ctime,time_macros}
export CCACHE_BASEDIR=$PWD
jobs=${JOBS:-$(nproc)}
mkdir -p "$build" "$CCACHE_DIR"
checks="$build/checks.tsv"
not_run="$build/not_run.tsv"
: >"$checks"
: >"$not_run"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# --- 1. CUDA compile check ---------------------------------------------------
cuda_build="$build-cuda"
if [[ -f /usr/local/cuda/include/cuda_runtime_api.h && -f /usr/local/cuda/include/nccl.h ]]; then
  log "CUDA compile check: configuring with -DSTRATA_CUDA=ON"
  if cmake -S . -B "$cuda_build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
      -DSTRATA_CUDA=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${launcher[@]}" \
      -DCUDAToolkit_ROOT=/usr/local/cuda >"$build/cuda-configure.log" 2>&1; then
    python3 tools/cuda_compile_check.py "$cuda_build/compile_commands.json" "$checks" \
      --jobs "$jobs" || true
  else
    tail -n 30 "$build/cuda-configure.log" >&2
    printf 'cuda_compile_check.configure\tfailed\n' >>"$checks"
  fi
else
  log "CUDA compile check skipped: no /usr/local/cuda with cuda_runtime_api.h and nccl.h"
  printf 'cuda_compile_check\tno CUDA toolkit with NCCL at /usr/local/cuda\n' >>"$not_run"
fi

# --- 2. CMake configure ---------------------------------------------------------
log "configuring $build"
cmake -S . -B "$build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  >"$build/configure.log" 2>&1 \
  || { tail -n 40 "$build/configure.log" >&2; printf 'cmake_configure\tfailed\n' >>"$checks"; }
ctest_select=()
((all)) || ctest_select=(-L '^torch_version$')
# The tests this run is to run, one label per line. The network-namespace
# test checks transports, not LibTorch: the Bazel half runs it.
expected="$build/expected_tests.txt"
(cd "$build" && ctest -N "${ctest_select[@]}" -E '^//tools:multinode_netns_test$') 2>/dev/null \
  | sed -n 's/^ *Test *#[0-9]*: //p' >"$expected"
[[ -s "$expected" ]] || printf 'ctest_list_tests\tfailed\n' >>"$checks"
((all)) && printf '//tools:multinode_netns_test\truns in the LibTorch 1.13 (Bazel) half only\n' >>"$not_run"
if ((!all)); then
  # The rest of the 2.6 suite is not run here: say how much, and where it runs.
  rest=$(cd "$build" && ctest -N -LE '^torch_version$' | sed -n 's/^Total Tests: //p')
  log "not run here: ${rest:-?} tests outside the torch_version set (tools/sanitize.sh libtorch2 runs the whole LibTorch 2.6 suite; the Bazel half runs them on 1.13)"
fi
not_run_for_budget() {  # WHAT [stopped]: WHAT counts as skipped for the budget
  printf '%s\t%s%s\n' "$1" "${2:+$2: }" "$budget_reason" >>"$not_run"
}
budget_out() {  # WHAT: the budget ran out at WHAT, which is skipped
  log "the time budget ran out at: $1"
  not_run_for_budget "$1"
}
# Builds CMake target(s) "$@" under the budget into build.log: 0, 124 (the
# budget ran out) or the build's failure.
build_targets() {
  budgeted cmake --build "$build" -j "$jobs" "$@" -- -k >>"$build/build.log" 2>&1
}
: >"$build/build.log"
build_rc=0
if ((all)); then
  log "building everything with $jobs jobs"
  build_targets || build_rc=$?
fi

# --- 3. The tests: each built (by default), then run by ctest ---------------------
# By default each test is built just before it runs (its libraries and the
# binaries it runs come with it), so that under the budget the tests run
# first and as many as the time allows; the rest of the binaries and the
# package follow. One ctest call per test, each under what is left of the
# budget, so that the budget stops the run between (or inside) tests and
# every test's result is its own; tools/count_tests.py reads their JUnit
# files from their directory.
log "building and running the tests"
rm -rf "$build/testlogs" "$build/junit"
mkdir -p "$build/junit"
: >"$build/ctest.log"
ctest_rc=0
n=0
while IFS= read -r name; do
  if ((build_rc == 124 || $(left_s) <= 0)); then
    not_run_for_budget "$name"
    continue
  fi
  # //pkg/sub:name is CMake's target pkg_sub_name (cmake/strata.cmake); a
  # test that is a plain add_test of a script has no target to build.
  label=${name#//}
  target=$(printf '%s' "$label" | tr '/:' '__')
  if ((!all)) && [[ -d "$build/${label%%:*}/CMakeFiles/$target.dir" ]]; then
    rc=0
    build_targets --target "$target" || rc=$?
    if ((rc == 124)); then
      not_run_for_budget "$name"
      continue
    elif ((rc != 0)); then
      printf '%s: did not build (CMake target %s)\tfailed\n' "$name" "$target" >>"$checks"
      continue
    fi
  fi
  n=$((n + 1))
  rc=0
  (cd "$build" && budgeted ctest -j1 --output-on-failure --output-junit "$build/junit/$n.xml" \
    -R "^$(printf '%s' "$name" | sed 's/[][\\.*^$+?(){}|]/\\&/g')\$") >>"$build/ctest.log" 2>&1 || rc=$?
  if ((rc == 124)); then
    rm -f "$build/junit/$n.xml"
    not_run_for_budget "$name" stopped
    continue
  fi
  ((rc == 0)) || ctest_rc=$rc
  # A name ctest did not match would otherwise vanish from the counts.
  grep -q "<testcase" "$build/junit/$n.xml" 2>/dev/null \
    || printf '%s: no result from ctest\tfailed\n' "$name" >>"$checks"
done <"$expected"
log "ctest: $n of $(wc -l <"$expected") tests run (log: $build/ctest.log)"

# --- 4. The binaries, then the installed package ---------------------------------
if ((!all)); then
  log "building the binaries and the installed libraries with $jobs jobs"
  build_targets --target strata_torch_version_ci || build_rc=$?
fi
if ((build_rc == 124)); then
  budget_out cmake_build
elif ((build_rc != 0)); then
  grep -E "error|Error" "$build/build.log" | head -n 60 >&2
  printf 'cmake_build\tfailed\n' >>"$checks"
else
  printf 'cmake_build\tpassed\n' >>"$checks"
fi
command -v ccache >/dev/null && ccache --show-stats 2>/dev/null | grep -Ei "hits|misses" | head -n 4 >&2
# `cmake --install` of this build into a temporary prefix, and
# examples/cmake_consumer built against it with find_package(Strata) and run.
if ((build_rc == 0)); then
  log "installing into a temporary prefix and building examples/cmake_consumer against it"
  install_rc=0
  budgeted examples/cmake_consumer/check.sh "$build" >"$build/check_install.log" 2>&1 \
    || install_rc=$?
  if ((install_rc == 0)); then
    printf 'cmake_install_consumer\tpassed\n' >>"$checks"
    tail -n 1 "$build/check_install.log" >&2
  elif ((install_rc == 124)); then
    budget_out cmake_install_consumer
  else
    printf 'cmake_install_consumer\tfailed\n' >>"$checks"
    tail -n 20 "$build/check_install.log" >&2
  fi
elif ((build_rc == 124)); then
  budget_out cmake_install_consumer
else
  printf 'cmake_install_consumer\tthe build failed\n' >>"$not_run"
fi
python3 tools/count_tests.py ctest "$build/junit" "$build/testlogs" "$ctest_rc" \
  --checks "$checks" --not-run "$not_run" "${totals[@]}"
