#!/usr/bin/env bash
# The whole GPU check in one command, for the GPU machine (a PyTorch wheel
# with its CUDA LibTorch, the CUDA toolkit, CMake and ninja; no Bazel and no
# abseil, glog, protobuf or GoogleTest: those come from the .deb files of
# tools/gpu/fetch_debs.sh, which travel with the checkout). Every visit to the
# GPU machine starts with it:
#
#   tools/gpu/check.sh OUT_DIR                 # .debs in the repository root
#   tools/gpu/check.sh --debs DIR OUT_DIR
#   tools/gpu/check.sh --dry-run OUT_DIR       # checks the inputs, runs nothing
#
# Steps, each timed, each stopped at its own time limit and at the check's
# budget (STRATA_GPU_CHECK_BUDGET_S, default 540 s), so that the whole check
# ends within about 9 minutes whatever happens; a step the budget did not
# reach is a SKIP line saying so:
#
#   1. debs: DEB_DIR has every package of tools/gpu/debs.txt.
#   2. preflight: python3 imports a CUDA torch that sees a GPU; cmake, ninja,
#      nvcc on PATH.
#   3. configure: the .debs unpacked into BUILD/deps (never into /) and CMake
#      configured with -DSTRATA_CUDA=ON (tools/gpu/build_with_wheel.sh).
#   4. build: only what the GPU check runs (every test tagged gpu in a
#      CMakeLists.txt, and the train binary), with ninja on all cores, going
#      on past a target that fails.
#   5. one line per gpu test (run as tools/gpu/run_gpu_tests.sh runs it),
#      going on past failures.
#   6. the GPU figures of BENCHMARKS.md ("GPU training throughput"): Strata's
#      llama-1b bf16 tokens/s (train) and PyTorch eager's
#      (tools/gpu/torch_llama_baseline.py, sdpa and math attention).
#
# OUT_DIR gets three files (the GPU machine returns at most 8, none deeper
# than 2 folders): summary.txt (`#` header lines: commit, GPU, torch; then
# one line per step, test and figure: STATUS SECONDS NAME [detail], STATUS
# one of PASS FAIL SKIP; last, `TOTAL <seconds>s <passed> passed <failed>
# failed <skipped> skipped`), progress.log (the timestamped progress lines
# printed as it goes) and logs.tar.gz (one log per step). Exit status: 0 if
# nothing failed, 1 if something failed, 2 for bad usage or a missing or
# incomplete DEB_DIR.
#
# Environment: STRATA_GPU_BUILD (build tree, default BUILD = <repo>/build-gpu),
# PYTHON (default python3), JOBS (default: all cores),
# STRATA_GPU_CHECK_BUDGET_S (default 540), STRATA_COMMIT (the commit to name
# where the checkout has no .git). For check.sh's own test
# (tools/gpu/check_test.sh), STRATA_GPU_CHECK_STEP_COMMAND replaces every
# step's command with this bash command.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: tools/gpu/check.sh [--dry-run] [--debs DIR] OUT_DIR"
dry_run=0
debs="$repo/.debs"
out=""
while (($#)); do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --debs) debs=${2:?$usage}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check.sh: unknown option '$1'; $usage" >&2; exit 2 ;;
    *) [[ -z "$out" ]] || { echo "check.sh: one OUT_DIR only; $usage" >&2; exit 2; }
       out=$1; shift ;;
  esac
done
[[ -n "$out" ]] || { echo "check.sh: no OUT_DIR; $usage" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
build=${STRATA_GPU_BUILD:-$repo/build-gpu}
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
budget_s=${STRATA_GPU_CHECK_BUDGET_S:-540}
start_s=$SECONDS
# Time kept back at the end for packing the logs.
reserve_s=10

summary="$out/summary.txt"
progress="$out/progress.log"
logs=$(mktemp -d "${TMPDIR:-/tmp}/strata-gpu-check.XXXXXX")
trap 'rm -rf "$logs"' EXIT
: >"$summary"
: >"$progress"
passed=0
failed=0
skipped=0

say() { echo "[check $(date -u +%T) +$((SECONDS - start_s))s] $*" | tee -a "$progress" >&2; }
# line STATUS SECONDS NAME [DETAIL]: one summary line.
line() {
  local status=$1 seconds=$2 name=$3 detail=${4:-}
  printf '%-4s %5ss %s%s\n' "$status" "$seconds" "$name" "${detail:+ ($detail)}" >>"$summary"
  case "$status" in
    PASS) passed=$((passed + 1)) ;;
    FAIL) failed=$((failed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
  esac
  say "$status $name${detail:+ ($detail)} in ${seconds}s"
}

# step NAME LIMIT_S COMMAND...: runs COMMAND (its output to a log of its own)
# for at most LIMIT_S seconds and within the budget; one summary line. Sets
# step_rc (124: stopped at the limit; 125: not run). With `needs=FILE` (a
# variable for the call), FAIL without running where FILE is not built.
step() {
  local name=$1 limit_s=$2
  shift 2
  local left_s=$((budget_s - (SECONDS - start_s) - reserve_s))
  local log="$logs/${name//[\/ ]/_}.log"
  step_rc=0
  if ((left_s < 5)); then
    line SKIP 0 "$name" "not reached: the ${budget_s}s budget is spent"
    step_rc=125
    return
  fi
  ((limit_s > left_s)) && limit_s=$left_s
  if [[ -n "${needs:-}" && ! -x "$needs" ]] && ((!dry_run)); then
    line FAIL 0 "$name" "${needs##*/} is not built"
    step_rc=125
    return
  fi
  if ((dry_run)); then
    printf '%q ' "$@" >"$log"
    line SKIP 0 "$name" "dry run"
    step_rc=125
    return
  fi
  [[ -n "${STRATA_GPU_CHECK_STEP_COMMAND:-}" ]] && set -- bash -c "$STRATA_GPU_CHECK_STEP_COMMAND"
  say "start $name (limit ${limit_s}s)"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit_s" "$@" >"$log" 2>&1 </dev/null
  step_rc=$?
  local took=$((SECONDS - t0))
  if ((step_rc == 0)); then
    line PASS "$took" "$name"
  elif ((step_rc == 124 || step_rc == 137)); then
    line FAIL "$took" "$name" "stopped at its ${limit_s}s limit; log ${log##*/}"
  else
    line FAIL "$took" "$name" "exit $step_rc; log ${log##*/}"
  fi
}

# finish [RC]: the TOTAL line and the logs; exits RC, else 1 if something
# failed, else 0.
finish() {
  local total=$((SECONDS - start_s))
  printf 'TOTAL %ss %d passed %d failed %d skipped\n' "$total" "$passed" "$failed" \
    "$skipped" >>"$summary"
  say "done in ${total}s: $passed passed, $failed failed, $skipped skipped; $summary"
  tar -czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null
  if [[ -n "${1:-}" ]]; then exit "$1"; fi
  if ((failed)); then exit 1; fi
  exit 0
}

{
  echo "# strata GPU check: commit ${STRATA_COMMIT:-$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)}$(
    [[ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]] && echo ' (modified)')"
  echo "# date $(date -u +%FT%TZ), host $(hostname), $jobs jobs, budget ${budget_s}s$( ((dry_run)) && echo ', dry run')"
  gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n1)
  echo "# gpu ${gpu:-none found by nvidia-smi}"
} >>"$summary"

# --- 1. the .deb files --------------------------------------------------------
mapfile -t packages < <(sed 's/#.*//; /^[[:space:]]*$/d' "$repo/tools/gpu/debs.txt")
if [[ ! -d "$debs" ]]; then
  line FAIL 0 debs "no directory $debs"
  echo "check.sh: no .deb directory at '$debs'. Fetch it on a Debian 12 machine with" \
       "'tools/gpu/fetch_debs.sh .debs' in the repository root (it is ignored by git; carry" \
       "it to the GPU machine with the checkout), or name it with --debs DIR." >&2
  finish_rc=2
else
  missing=()
  for p in "${packages[@]}"; do
    compgen -G "$debs/${p}_*.deb" >/dev/null || missing+=("$p")
  done
  if ((${#missing[@]})); then
    line FAIL 0 debs "${#missing[@]} of ${#packages[@]} packages missing in $debs: ${missing[*]}"
    echo "check.sh: '$debs' lacks ${missing[*]} (tools/gpu/debs.txt lists what the build" \
         "needs); fetch them again with 'tools/gpu/fetch_debs.sh $debs' on a Debian 12 machine." >&2
    finish_rc=2
  else
    line PASS 0 debs "${#packages[@]} packages, $(du -sh "$debs" | cut -f1)"
    finish_rc=0
  fi
fi
((finish_rc)) && finish "$finish_rc"

# --- the GPU tests: strata_cc_test blocks with TAGS naming gpu ---------------
mapfile -t gpu_tests < <(cd "$repo" && for f in $(git ls-files '*CMakeLists.txt' 2>/dev/null \
    || find . -name CMakeLists.txt -not -path './build*' | sed 's|^\./||'); do
  awk -v pkg="$(dirname "$f")" '
    /^[ \t]*strata_cc_test\(/ { in_test = 1; name = ""; gpu = 0; kw = ""; next }
    !in_test { next }
    /^[ \t]*\)/ { if (gpu && name != "") print pkg "/" name; in_test = 0; next }
    {
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^[A-Z_]+$/) { kw = $i; continue }
        if (kw == "NAME") name = $i
        if (kw == "TAGS" && $i == "gpu") gpu = 1
      }
    }
  ' "$f"
done | sort)
targets=(launch_train_train)
for t in "${gpu_tests[@]}"; do targets+=("${t//\//_}"); done
say "${#gpu_tests[@]} gpu tests: ${gpu_tests[*]}"

# --- 2. preflight -------------------------------------------------------------
step preflight 60 bash -c '
  set -e
  for tool in cmake ninja nvcc nvidia-smi; do
    command -v "$tool" >/dev/null || { [[ $tool == nvcc && -x /usr/local/cuda/bin/nvcc ]] ||
      { echo "no $tool on PATH"; exit 1; }; }
  done
  nvidia-smi
  "$0" -c "import torch; print(torch.__version__, torch.version.cuda); assert torch.cuda.is_available(), \"torch sees no GPU\"; print(torch.cuda.get_device_name(0))"
' "$python"

# --- 3. configure -------------------------------------------------------------
step configure 120 env STRATA_CONFIGURE_ONLY=1 STRATA_DEPS_PREFIX="$build/deps" PYTHON="$python" \
  JOBS="$jobs" "$repo/tools/gpu/build_with_wheel.sh" "$debs" "$build"
configured=$step_rc

# --- 4. build -----------------------------------------------------------------
if ((configured == 0 || configured == 125)); then
  step build 330 cmake --build "$build" -j "$jobs" --target "${targets[@]}" -- -k 0
else
  line SKIP 0 build "configure failed"
fi

# --- 5. the gpu tests ---------------------------------------------------------
for t in "${gpu_tests[@]}"; do
  needs="$build/runfiles/strata/$t" step "test $t" 150 "$repo/tools/gpu/run_gpu_tests.sh" "$build" "$t"
  # A passing test binary whose cases skipped (a case that needs 2 GPUs on
  # one) says how many.
  cases_skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' \
    "$logs/test_${t//\//_}.log" 2>/dev/null | tail -n1)
  if ((step_rc == 0 && ${cases_skipped:-0} > 0)); then
    sed -i '$ s/$/ ('"$cases_skipped"' cases skipped; see its log)/' "$summary"
  fi
done

# --- 6. the GPU figures -------------------------------------------------------
# figure NAME LIMIT_S EXTRACT COMMAND...: a step whose log's figure EXTRACT
# (a sed -n script printing one number) finds goes on its summary line.
figure() {
  local name=$1 limit_s=$2 extract=$3
  shift 3
  step "figure $name" "$limit_s" "$@"
  local log="$logs/figure_${name}.log"  # As step() names it.
  if ((step_rc == 0)); then
    local value
    value=$(sed -n "$extract" "$log" | tail -n1)
    if [[ -n "$value" ]]; then
      sed -i '$ s/$/ = '"$value"'/' "$summary"
    else
      sed -i '$ s/^PASS/FAIL/; $ s/$/ (no figure in its log)/' "$summary"
      passed=$((passed - 1))
      failed=$((failed + 1))
    fi
  fi
}
train="$build/runfiles/strata/launch/train/train"
needs="$train" figure strata_llama1b_bf16_tokens_per_s 150 \
  's/.*step 8\/8 .*| \([0-9]*\) tok\/s.*/\1/p' \
  bash -c 'source "$0/strata_env.sh" && cd "$(mktemp -d)" && "$1" --model=llama-1b \
    --device=cuda --strategy=single --precision=bf16 --steps=8 --warmup_steps=1 \
    --global_batch=4 --seq_len=1024 --log_interval=1 --eval_interval=0 --threads="$2" \
    --markov_tokens=200000' "$build" "$train" "$jobs"
for attention in sdpa math; do
  figure "pytorch_llama1b_bf16_${attention}_tokens_per_s" 90 \
    's/.*"tokens_per_s": \([0-9]*\).*/\1/p' \
    "$python" "$repo/tools/gpu/torch_llama_baseline.py" --model=llama-1b --micro_batch=4 \
    --seq_len=1024 --steps=8 --precision=bf16 --attention="$attention"
done

finish
