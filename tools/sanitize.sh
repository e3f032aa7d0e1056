#!/usr/bin/env bash
# The checks too slow for CI on two cores, run before an issue is resolved;
# any finding fails them:
#
#  1. asan:  AddressSanitizer + UndefinedBehaviorSanitizer over the library
#            packages' tests (ASAN_TARGETS below: every test of base,
#            serialization, text, optim, data, checkpoint, comm, models and
#            strategies, and the progress publisher), optimised (-O1) and
#            with frame pointers; UBSan does not recover. Not under ASan yet:
#            the rest of launch/ (its tests run the binaries; several still
#            parse output with std::regex, which GCC 12 at -O1 warns about
#            inside libstdc++, an error under -Werror), tools/ and the
#            benchmarks.
#  2. tsan:  ThreadSanitizer over the tests of Strata's threaded code
#            (TSAN_TESTS below: the heartbeat, the trace and tracking
#            allocator, the progress publisher, the asynchronous checkpoint
#            writer and parallel shard writers, comm's progress engine and
#            waits with ranks as threads, the agent store and restart
#            rounds), linked against abseil built with TSan from Debian's
#            source (tools/absl_tsan.sh, built once into $dir/absl-tsan).
#            LibTorch, OpenMP and libstdc++ are not instrumented: their
#            interceptor accesses are ignored (ignore_noninstrumented_modules)
#            while their locks still count; tools/tsan.supp has the rest.
#  3. tidy:  clang-tidy (.clang-tidy's checks) over every Strata source in
#            the CMake build's compile database (hours on two cores), or with
#            TIDY_SINCE=REV only the sources changed since git revision REV
#            and those of the headers changed since.
#  4. libtorch2: the whole LibTorch 2.6 suite (CMake build of everything and
#            ctest in the Debian 13 root: tools/ci_libtorch2.sh --all); CI's
#            2.6 half runs only the tests tagged torch_version.
#
# Each runs in its own Bazel output base / build tree, so the normal build's
# outputs are left alone. Prints one line per part and the closing line
# "N passed, N failed, N skipped" (parts: tests and files).
#
# Usage: tools/sanitize.sh [asan|tsan|tidy|libtorch2 ...]   (default: all four)
# Environment: JOBS (default: cores), STRATA_SANITIZE_DIR (default
# ~/.cache/strata/sanitize).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
parts=("$@")
((${#parts[@]})) || parts=(asan tsan tidy libtorch2)
jobs=${JOBS:-$(nproc)}
dir=${STRATA_SANITIZE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/sanitize}
mkdir -p "$dir"
log() { echo "[sanitize $(date +%T)] $*" >&2; }

# What the asan part runs (see the top of this file for what it does not).
ASAN_TARGETS=(
  //base/... //serialization/... //text/... //optim/... //data/...
  //checkpoint/... //comm/... //models/... //strategies/...
  //launch/observe:progress_logger_test
)
TSAN_TESTS=(
  //base:heartbeat_test
  //base:trace_test
  //base:tracking_allocator_test
  //launch/observe:progress_logger_test
  //checkpoint/strategy:checkpoint_test
  //checkpoint/strategy:sharded_format_test
  //comm:progress_test
  //comm:group_test
  //launch:agent_store_test
  //launch:node_rounds_test
)

totals_passed=0
totals_failed=0
totals_skipped=0
add_totals() {  # "P failed F skipped S" line -> running totals
  local p f s
  read -r p f s < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' <<<"$1")
  totals_passed=$((totals_passed + ${p:-0}))
  totals_failed=$((totals_failed + ${f:-1}))
  totals_skipped=$((totals_skipped + ${s:-0}))
}

bazel_part() {  # NAME OUTPUT_BASE COUNT_FILE bazel-test-args...
  local name=$1 base=$2
  shift 2
  local bep="$dir/$name.bep.json" rc=0
  # No convenience symlinks: they would point the checkout's bazel-* at
  # this output base (and //... would then walk into it).
  bazel --output_base="$base" test --build_event_json_file="$bep" \
    --keep_going --build_tests_only --symlink_prefix=/ \
    --test_output=errors "$@" || rc=$?
  bazel --output_base="$base" shutdown >/dev/null 2>&1
  local line
  line=$(python3 tools/count_tests.py bazel "$bep" "$rc" | tail -n 1)
  echo "$name: $line"
  add_totals "$line"
}

for part in "${parts[@]}"; do
  case "$part" in
    asan)
      log "asan: AddressSanitizer + UBSan over the library packages' tests"
      bazel_part asan "$dir/bazel-asan" --config=asan --jobs="$jobs" -- "${ASAN_TARGETS[@]}"
      ;;
    tsan)
      log "tsan: ThreadSanitizer over ${#TSAN_TESTS[@]} tests of threaded code"
      # Links an abseil built with TSan (tools/absl_tsan.sh, once) instead
      # of Debian's, whose absl::Mutex TSan cannot see.
      if ! absl_pc=$(tools/absl_tsan.sh "$dir/absl-tsan" "$jobs"); then
        echo "tsan: 0 passed, 1 failed, 0 skipped"
        add_totals "0 passed, 1 failed, 0 skipped"
        continue
      fi
      bazel_part tsan "$dir/bazel-tsan" --config=tsan --jobs="$jobs" \
        --repo_env=PKG_CONFIG_PATH="$absl_pc" \
        --test_env=TSAN_OPTIONS="second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=$root/tools/tsan.supp" \
        -- "${TSAN_TESTS[@]}"
      ;;
    tidy)
      log "tidy: clang-tidy over the CMake compile database"
      build="$dir/cmake-tidy"
      cmake -S . -B "$build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$dir/tidy-configure.log" 2>&1 \
        || { tail -n 20 "$dir/tidy-configure.log" >&2; echo "tidy: 0 passed, 1 failed, 0 skipped"; add_totals "0 passed, 1 failed, 0 skipped"; continue; }
      # Generated sources (protobuf, build info) must exist to be included.
      make -C "$build" -j "$jobs" strata_generated >"$dir/tidy-generate.log" 2>&1 \
        || { tail -n 20 "$dir/tidy-generate.log" >&2; }
      line=$(python3 tools/run_clang_tidy.py "$build/compile_commands.json" --root "$root" \
        --jobs "$jobs" --log "$dir/tidy.log" ${TIDY_SINCE:+--changed-since "$TIDY_SINCE"} | tail -n 1)
      echo "tidy: $line"
      add_totals "$line"
      ;;
    libtorch2)
      log "libtorch2: the whole LibTorch 2.6 suite (CMake, Debian 13 root)"
      # Inside the root only the checkout is visible (at /strata): the
      # totals file goes there, under out/.
      mkdir -p out/sanitize
      rm -f out/sanitize/libtorch2.totals
      tools/libtorch2/run.sh tools/ci_libtorch2.sh --all --totals out/sanitize/libtorch2.totals
      if [[ -s out/sanitize/libtorch2.totals ]]; then
        read -r p f s <out/sanitize/libtorch2.totals
        line="$p passed, $f failed, $s skipped"
      else
        line="0 passed, 1 failed, 0 skipped"
      fi
      echo "libtorch2: $line"
      add_totals "$line"
      ;;
    *) echo "tools/sanitize.sh: unknown part '$part' (asan, tsan, tidy or libtorch2)" >&2; exit 2 ;;
  esac
done
echo "$totals_passed passed, $totals_failed failed, $totals_skipped skipped"
((totals_failed == 0))
