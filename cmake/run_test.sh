#!/bin/bash
# Runs one ctest test the way `bazel test` runs it: in a fixed environment
# rather than the caller's (a RANK, WORLD_SIZE or OMP_NUM_THREADS left in a
# shell must not change what a test sees), with its test variables
# (TEST_SRCDIR, TEST_WORKSPACE, TEST_TMPDIR, ...: see cmake/strata.cmake) and
# an empty TEST_TMPDIR of its own. ctest sets the working directory (the
# runfiles root).
#
# Usage: run_test.sh [NAME=VALUE...] -- <test binary or script> [args...]
set -euo pipefail
vars=()
tmpdir=""
while (($# > 0)) && [[ "$1" != "--" ]]; do
  vars+=("$1")
  [[ "$1" == TEST_TMPDIR=* ]] && tmpdir="${1#TEST_TMPDIR=}"
  shift
done
(($# > 1)) || { echo "usage: run_test.sh [NAME=VALUE...] -- <test> [args...]" >&2; exit 2; }
shift
[[ -n "${tmpdir}" ]] || { echo "run_test.sh: no TEST_TMPDIR=... given" >&2; exit 2; }
rm -rf "${tmpdir}"
mkdir -p "${tmpdir}"
# What the machine needs to run programs at all, and nothing else.
keep=()
for name in PATH HOME USER LOGNAME LANG LC_ALL LD_LIBRARY_PATH; do
  if [[ -n "${!name+set}" ]]; then keep+=("${name}=${!name}"); fi
done
exec env -i "${keep[@]}" "${vars[@]}" "$@"
