#!/bin/bash
# Bazel's workspace status command (.bazelrc: --workspace_status_command).
# Prints `STABLE_GIT_COMMIT <hash>` — the checked-out commit, with `-dirty`
# when tracked files differ from it — or nothing outside a git checkout
# (//base:build_info then says "unknown"). STABLE_ keys are part of the
# stamped actions' keys: only //base:build_info's generated file rebuilds
# when the commit changes. Run from the workspace root (as Bazel does).
commit="$(git rev-parse HEAD 2>/dev/null)" || exit 0
[[ "${commit}" =~ ^[0-9a-f]{40}$ ]] || exit 0
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit="${commit}-dirty"
fi
echo "STABLE_GIT_COMMIT ${commit}"
