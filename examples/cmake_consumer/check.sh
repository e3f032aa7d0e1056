#!/usr/bin/env bash
# Checks Strata's CMake package end to end: `cmake --install` of a built
# tree into a fresh temporary prefix, then this directory's project built
# against it with find_package(Strata) (nothing of Strata's source tree on
# its include path) and run: GPT-tiny under FSDP at a world of one, whose
# loss must fall. Also checks what the prefix holds: the package files, the
# binaries, public headers, and no test-only headers or libraries.
#
# Usage: examples/cmake_consumer/check.sh BUILD_DIR
#   BUILD_DIR: a configured and built Strata CMake tree (at least CMake's
#   strata_installable target, which CI's strata_torch_version_ci includes).
# Environment: KEEP_PREFIX=1 keeps the temporary directory (its path is
# printed). Exit status 0 iff every step passed; prints the seconds each
# step took.
set -euo pipefail
log() { echo "[check_install $(date +%T)] $*" >&2; }
die() { echo "[check_install] FAILED: $*" >&2; exit 1; }

(($# == 1)) || die "usage: $0 BUILD_DIR (a built Strata CMake tree)"
build=$(cd "$1" && pwd) || die "no build directory $1"
[[ -f "$build/CMakeCache.txt" ]] || die "$build is not a configured CMake build (no CMakeCache.txt)"
example=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-install.XXXXXX")
if [[ -z "${KEEP_PREFIX:-}" ]]; then
  trap 'rm -rf "$work"' EXIT
else
  log "keeping $work"
fi
prefix="$work/prefix"

start=$SECONDS
log "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 \
  || { tail -n 20 "$work/install.log" >&2; die "cmake --install failed (a library not built? build CMake's strata_installable target)"; }
install_s=$((SECONDS - start))

# What the prefix must and must not hold.
for f in lib/cmake/Strata/StrataConfig.cmake lib/cmake/Strata/StrataConfigVersion.cmake \
         lib/cmake/Strata/StrataTargets.cmake include/strata/strategies/fsdp.h \
         include/strata/checkpoint/metadata.pb.h bin/train bin/launch bin/strata_plan \
         bin/strata_generate bin/strata_ckpt bin/make_token_bin bin/strata_tokenize; do
  [[ -e "$prefix/$f" ]] || die "the install has no $f"
done
private=$(cd "$prefix" && find . -path '*testing*' -o -name '*_test' -o -name '*_test.*' -o -name '*benchmark*' | head -n 5)
[[ -z "$private" ]] || die "the install holds test-only files: $private"

start=$SECONDS
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The prefix's path changes at every run: ccache sees paths under the
# temporary directory as relative ones, so that a rerun hits.
export CCACHE_BASEDIR="$work"
log "building $example against $prefix"
cmake -S "$example" -B "$work/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >"$work/configure.log" 2>&1 \
  || { tail -n 30 "$work/configure.log" >&2; die "configuring the consumer (find_package(Strata)) failed"; }
cmake --build "$work/consumer" -j "${JOBS:-$(nproc)}" >"$work/build.log" 2>&1 \
  || { grep -E "error|Error" "$work/build.log" | head -n 30 >&2; die "building the consumer failed"; }
# The consumer must have compiled against the installed headers, never the
# source tree's.
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
if grep -rq -- "-I$source_dir\b\|-isystem $source_dir\b" "$work/consumer/CMakeFiles/strata_consumer.dir/flags.make"; then
  die "the consumer's include path names Strata's source tree $source_dir"
fi
build_s=$((SECONDS - start))

start=$SECONDS
"$work/consumer/strata_consumer" | tee "$work/run.log" \
  || die "the consumer program failed"
grep -q "^fsdp on gpt: loss" "$work/run.log" || die "the consumer did not print its result line"
run_s=$((SECONDS - start))
log "passed: install ${install_s} s, consumer configure + build ${build_s} s, run ${run_s} s"
