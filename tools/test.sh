#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (tools/bootstrap.sh) and runs Strata's
# whole Bazel test suite on its LibTorch, then prints one line
# "N passed, N failed, N skipped" counting the individual test cases
# (GoogleTest cases from every test target's XML, one per repository check
# of tools/repo_checks.sh, and one skipped case per test that cannot be
# built here), every skip listed with its reason above it
# (tools/count_tests.py).
#
# Usage: tools/test.sh [--totals FILE] [extra bazel test arguments]
#   --totals FILE  also writes "passed failed skipped" to FILE (.ci/run).
set -uo pipefail
cd "$(dirname "$0")/.."

totals=()
if [[ "${1:-}" == "--totals" ]]; then
  totals=(--totals "$2")
  shift 2
fi

tools/bootstrap.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

bep=$(mktemp /tmp/strata-bep.XXXXXX.json)
checks=$(mktemp /tmp/strata-checks.XXXXXX.tsv)
not_run=$(mktemp /tmp/strata-not-run.XXXXXX.tsv)
trap 'rm -f "$bep" "$checks" "$not_run"' EXIT
# Repository checks (sizes, layering, links, format, CPU-only analysis), each
# counted as one test case.
tools/repo_checks.sh "$checks"
# GPU tests that need the CUDA toolkit (cuda_current_stream_test also a CUDA
# LibTorch) to build are `manual` (outside //...): each counts as one skipped
# case.
bazel query --output=label 'attr(tags, "\bmanual\b", attr(tags, "\bgpu\b", kind(".*_test rule", //...)))' \
    2>/dev/null | sed 's/$/\tneeds a CUDA build (the CUDA toolkit and a CUDA LibTorch: tools\/gpu\/build_with_wheel.sh)/' \
    >"$not_run" || printf 'list_manual_gpu_tests\tfailed\n' >>"$checks"
# Benchmarks are excluded by tag (see .bazelrc).
# The binaries and the tests, named: `bazel test //...` would also build
# every cc_library as a top-level target, whose default outputs include a
# shared library, compiling each library a second time as position-independent
# code that nothing here links (168 compiles more). Libraries without sources
# (each package's umbrella library, third_party's) are named too; `manual`
# targets are left out as //... leaves them out.
targets=$(bazel query --output=label '(kind("cc_binary rule|_test rule", //...)
    + (kind("cc_library rule", //...) intersect attr(srcs, "^\[\]$", //...)))
    except attr(tags, "\bmanual\b", //...)' 2>/dev/null) \
  || { printf 'list_test_targets\tfailed\n' >>"$checks"; targets=//...; }
# shellcheck disable=SC2086  # one label per word
bazel test --build_event_json_file="$bep" "$@" -- $targets
bazel_rc=$?
# `bazel test` builds unstamped (.bazelrc); the stamp a `bazel build` carries
# is checked by running the build-info test stamped, counted as one case.
if bazel test --stamp "$@" //base:build_info_test; then
  printf 'stamped_build_info_test\tpassed\n' >>"$checks"
else
  printf 'stamped_build_info_test\tfailed\n' >>"$checks"
fi

python3 tools/count_tests.py bazel "$bep" "$bazel_rc" --checks "$checks" --not-run "$not_run" "${totals[@]}"
