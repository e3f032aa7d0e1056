#!/usr/bin/env bash
# Checks that every C++ source is formatted by clang-format with the
# repository's .clang-format (Google style). Prints the files that are not and
# exits 1 if any; `tools/check_format.sh --fix` formats them in place.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null 2>&1 ||
  { echo "check_format: clang-format is not installed (tools/bootstrap.sh installs it)"; exit 1; }
mapfile -t files < <(git ls-files '*.cc' '*.h' 2>/dev/null || find . -name '*.cc' -o -name '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]} > 0)); then
  printf '%s\n' "${bad[@]}"
  echo "check_format: ${#bad[@]} files not clang-formatted; run tools/check_format.sh --fix"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
