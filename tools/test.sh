#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (tools/bootstrap.sh) and runs Strata's
# whole test suite, then prints one line "N passed, N failed" counting the
# individual test cases (GoogleTest cases from every test target's XML, plus
# one per repository check of tools/repo_checks.sh).
#
# Usage: tools/test.sh [extra bazel test arguments]
set -uo pipefail
cd "$(dirname "$0")/.."

tools/bootstrap.sh || { echo "0 passed, 1 failed"; exit 1; }

bep=$(mktemp /tmp/strata-bep.XXXXXX.json)
checks=$(mktemp /tmp/strata-checks.XXXXXX.tsv)
trap 'rm -f "$bep" "$checks"' EXIT
# Repository checks (sizes, layering, links, format, CPU-only analysis), each
# counted as one test case.
tools/repo_checks.sh "$checks"
# Benchmarks and GPU-only targets are excluded by tag (see .bazelrc).
bazel test //... --build_event_json_file="$bep" "$@"
bazel_rc=$?

python3 tools/count_tests.py "$bep" "$bazel_rc" "$checks"
