#!/bin/bash
# Runs one ctest test the way `bazel test` runs it: in a fixed environment
# rather than the caller's (a RANK, WORLD_SIZE or OMP_NUM_THREADS left in a
# shell must not change what a test sees), with its test variables
# (TEST_SRCDIR, TEST_WORKSPACE, TEST_TMPDIR, ...: see cmake/strata.cmake) and
# an empty TEST_TMPDIR of its own. ctest sets the working directory (the
# runfiles root).
#
# Like `bazel test`, the test's cases land in XML_OUTPUT_FILE (GoogleTest
# writes it through GTEST_OUTPUT; a shell test may write it itself); when
# the test wrote none, one case is recorded, passed or failed by its exit
# status, so that tools/count_tests.py counts every test.
#
# Usage: run_test.sh [NAME=VALUE...] -- <test binary or script> [args...]
set -euo pipefail
vars=()
tmpdir=""
xml=""
while (($# > 0)) && [[ "$1" != "--" ]]; do
  vars+=("$1")
  [[ "$1" == TEST_TMPDIR=* ]] && tmpdir="${1#TEST_TMPDIR=}"
  [[ "$1" == XML_OUTPUT_FILE=* ]] && xml="${1#XML_OUTPUT_FILE=}"
  shift
done
(($# > 1)) || { echo "usage: run_test.sh [NAME=VALUE...] -- <test> [args...]" >&2; exit 2; }
shift
[[ -n "${tmpdir}" ]] || { echo "run_test.sh: no TEST_TMPDIR=... given" >&2; exit 2; }
[[ -n "${xml}" ]] || { echo "run_test.sh: no XML_OUTPUT_FILE=... given" >&2; exit 2; }
rm -rf "${tmpdir}" "${xml}"
mkdir -p "${tmpdir}" "$(dirname "${xml}")"
# What the machine needs to run programs at all, and nothing else.
keep=()
for name in PATH HOME USER LOGNAME LANG LC_ALL LD_LIBRARY_PATH; do
  if [[ -n "${!name+set}" ]]; then keep+=("${name}=${!name}"); fi
done
status=0
env -i "${keep[@]}" "${vars[@]}" "GTEST_OUTPUT=xml:${xml}" "$@" || status=$?
if [[ ! -s "${xml}" ]]; then
  name=$(basename "$1")
  if ((status == 0)); then
    result="<testcase name=\"${name}\" classname=\"${name}\"/>"
  else
    result="<testcase name=\"${name}\" classname=\"${name}\"><failure message=\"exited with status ${status}\"/></testcase>"
  fi
  printf '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="%s" tests="1">%s</testsuite></testsuites>\n' \
    "${name}" "${result}" >"${xml}"
fi
exit "${status}"
