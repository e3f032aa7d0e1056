#!/bin/bash
# tools/workspace_status.sh in a scratch git repository: the commit, then
# "-dirty" once a tracked file changes (untracked files do not count), and
# nothing outside a checkout.
set -u
script="$(pwd)/tools/workspace_status.sh"
scratch="${TEST_TMPDIR:-/tmp}/workspace_status_test"
rm -rf "${scratch}" && mkdir -p "${scratch}/repo" "${scratch}/plain"
fail() { echo "FAIL: $*" >&2; exit 1; }

out="$(cd "${scratch}/plain" && GIT_CEILING_DIRECTORIES="${scratch}" "${script}")"
[[ -z "${out}" ]] || fail "outside a checkout: expected no output, got '${out}'"

cd "${scratch}/repo" || fail "no scratch dir"
export GIT_CEILING_DIRECTORIES="${scratch}"
git init -q . && git config user.email t@t && git config user.name t
echo a > f && git add f && git commit -q -m one || fail "git commit"
head="$(git rev-parse HEAD)"
out="$("${script}")"
[[ "${out}" == "STABLE_GIT_COMMIT ${head}" ]] ||
  fail "clean: expected 'STABLE_GIT_COMMIT ${head}', got '${out}'"
echo new > untracked
out="$("${script}")"
[[ "${out}" == "STABLE_GIT_COMMIT ${head}" ]] ||
  fail "untracked file: expected a clean commit, got '${out}'"
echo b > f
out="$("${script}")"
[[ "${out}" == "STABLE_GIT_COMMIT ${head}-dirty" ]] ||
  fail "modified: expected 'STABLE_GIT_COMMIT ${head}-dirty', got '${out}'"
echo PASS
