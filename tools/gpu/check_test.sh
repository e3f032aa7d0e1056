#!/bin/bash
# tools/gpu/check.sh on a machine without a GPU, in a scratch copy of
# tools/gpu with a CMakeLists.txt of its own: the clear errors for a missing
# or incomplete .deb directory (exit 2), the summary's format and its
# gpu-tagged tests (--dry-run), a step stopped at the budget and the steps
# after it not reached, and figures read from a step's output.
set -u
here="$(pwd)"
scratch="${TEST_TMPDIR:-/tmp}/gpu_check_test"
rm -rf "${scratch}" && mkdir -p "${scratch}/repo/tools" "${scratch}/repo/pkg"
export GIT_CEILING_DIRECTORIES="${scratch}"
fail() { echo "FAIL: $*" >&2; exit 1; }
cp -rL "${here}/tools/gpu" "${scratch}/repo/tools/gpu" || fail "copying tools/gpu"
check="${scratch}/repo/tools/gpu/check.sh"
# Two gpu tests (one with TAGS on lines of their own, inside an if) and one
# test without the tag.
cat >"${scratch}/repo/pkg/CMakeLists.txt" <<'CMAKE'
strata_cc_test(
  NAME plain_test
  SRCS plain_test.cc
  TAGS small_only
)
strata_cc_test(
  NAME gpu_b_test
  TAGS gpu
  DEPS :x
)
if(STRATA_CUDA)
  strata_cc_test(
    NAME gpu_a_test
    TAGS
      gpu
      manual
    DEPS
      :y
  )
endif()
CMAKE
line_re='^(PASS|FAIL|SKIP) +[0-9]+s [a-z].*$'

# Every line but the # header lines and TOTAL has the summary's format, and
# TOTAL counts them.
check_format() {
  local summary=$1 n_pass n_fail n_skip
  grep -v '^#' "${summary}" | grep -v '^TOTAL ' | grep -Evq "${line_re}" &&
    fail "a line of ${summary} is not 'STATUS SECONDSs NAME': $(cat "${summary}")"
  n_pass=$(grep -c '^PASS ' "${summary}")
  n_fail=$(grep -c '^FAIL ' "${summary}")
  n_skip=$(grep -c '^SKIP ' "${summary}")
  grep -Eq "^TOTAL [0-9]+s ${n_pass} passed ${n_fail} failed ${n_skip} skipped$" "${summary}" ||
    fail "TOTAL does not count ${n_pass}/${n_fail}/${n_skip}: $(tail -n1 "${summary}")"
  [[ "$(ls "$(dirname "${summary}")" | tr '\n' ' ')" == "logs.tar.gz progress.log summary.txt " ]] ||
    fail "OUT_DIR holds $(ls "$(dirname "${summary}")")"
}

# 1. No .deb directory: exit 2, naming it and the fix.
"${check}" --dry-run "${scratch}/out1" 2>"${scratch}/err1"
rc=$?
((rc == 2)) || fail "missing .debs: exit ${rc}, expected 2"
grep -q "no .deb directory at '${scratch}/repo/.debs'" "${scratch}/err1" &&
  grep -q "tools/gpu/fetch_debs.sh" "${scratch}/err1" ||
  fail "missing .debs: unclear error: $(cat "${scratch}/err1")"
grep -q "^FAIL     0s debs (no directory ${scratch}/repo/.debs)$" "${scratch}/out1/summary.txt" ||
  fail "missing .debs: no FAIL line: $(cat "${scratch}/out1/summary.txt")"
check_format "${scratch}/out1/summary.txt"

# 2. An incomplete one: exit 2, naming what is missing.
debs="${scratch}/debs"
mkdir -p "${debs}"
for p in $(sed 's/#.*//' "${here}/tools/gpu/debs.txt"); do
  case "$p" in libsentencepiece0|libgloo-dev) ;; *) : >"${debs}/${p}_1.0_amd64.deb" ;; esac
done
"${check}" --dry-run --debs "${debs}" "${scratch}/out2" 2>"${scratch}/err2"
rc=$?
((rc == 2)) || fail "incomplete .debs: exit ${rc}, expected 2"
grep -q "lacks libsentencepiece0 libgloo-dev" "${scratch}/err2" ||
  fail "incomplete .debs: missing packages not named: $(cat "${scratch}/err2")"
grep -q "^FAIL     0s debs (2 of [0-9]* packages missing" "${scratch}/out2/summary.txt" ||
  fail "incomplete .debs: no FAIL line: $(cat "${scratch}/out2/summary.txt")"

# 3. Dry run: every step, one line per gpu test (sorted), nothing run.
: >"${debs}/libsentencepiece0_1.0_amd64.deb"
: >"${debs}/libgloo-dev_1.0_amd64.deb"
"${check}" --dry-run --debs "${debs}" "${scratch}/out3" 2>"${scratch}/err3" ||
  fail "dry run: exit $?: $(cat "${scratch}/err3")"
summary="${scratch}/out3/summary.txt"
check_format "${summary}"
expected="PASS debs
SKIP preflight
SKIP configure
SKIP build
SKIP test pkg/gpu_a_test
SKIP test pkg/gpu_b_test
SKIP figure strata_llama1b_bf16_tokens_per_s
SKIP figure pytorch_llama1b_bf16_sdpa_tokens_per_s
SKIP figure pytorch_llama1b_bf16_math_tokens_per_s"
got=$(grep -Ev '^(#|TOTAL)' "${summary}" | sed -E 's/^([A-Z]+) +[0-9]+s ([^(]*[^ (]).*/\1 \2/')
[[ "${got}" == "${expected}" ]] || fail "dry run: steps
${got}
expected
${expected}"
grep -q "test pkg/gpu_b_test (dry run)" "${summary}" || fail "dry run: no '(dry run)' reason"
tar -tzf "${scratch}/out3/logs.tar.gz" | grep -q "build.log" || fail "dry run: no build.log in logs.tar.gz"

# 4. A step that runs past the budget is stopped at it; the rest are not reached.
start=${SECONDS}
STRATA_GPU_CHECK_STEP_COMMAND="sleep 60" STRATA_GPU_CHECK_BUDGET_S=16 \
  "${check}" --debs "${debs}" "${scratch}/out4" 2>"${scratch}/err4"
rc=$?
((rc == 1)) || fail "budget: exit ${rc}, expected 1"
((SECONDS - start < 30)) || fail "budget: took $((SECONDS - start))s with a 16s budget"
summary="${scratch}/out4/summary.txt"
check_format "${summary}"
grep -Eq "^FAIL +[0-9]+s preflight \(stopped at its [0-9]+s limit; log preflight.log\)$" "${summary}" ||
  fail "budget: preflight not stopped at 6s: $(cat "${summary}")"
grep -q "^SKIP     0s configure (not reached: the 16s budget is spent)$" "${summary}" &&
  grep -q "^SKIP     0s test pkg/gpu_b_test (not reached: the 16s budget is spent)$" "${summary}" &&
  grep -q "^SKIP     0s figure pytorch_llama1b_bf16_math_tokens_per_s (not reached" "${summary}" ||
  fail "budget: later steps not SKIP 'not reached': $(cat "${summary}")"

# 5. Steps that pass; tests whose binaries are missing fail as not built; a
# figure is read from its step's output.
STRATA_GPU_CHECK_STEP_COMMAND='echo "{\"tokens_per_s\": 1234.5}"' \
  "${check}" --debs "${debs}" "${scratch}/out5" 2>"${scratch}/err5"
rc=$?
((rc == 1)) || fail "fake steps: exit ${rc}, expected 1 (tests not built)"
summary="${scratch}/out5/summary.txt"
check_format "${summary}"
for want in "^PASS +[0-9]+s build$" "^FAIL     0s test pkg/gpu_a_test \(gpu_a_test is not built\)$" \
    "^FAIL     0s figure strata_llama1b_bf16_tokens_per_s \(train is not built\)$" \
    "^PASS +[0-9]+s figure pytorch_llama1b_bf16_sdpa_tokens_per_s = 1234$"; do
  grep -Eq "${want}" "${summary}" || fail "fake steps: no line /${want}/ in $(cat "${summary}")"
done
echo PASS
