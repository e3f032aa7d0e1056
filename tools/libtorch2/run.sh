#!/usr/bin/env bash
# Runs a command of this checkout against LibTorch 2.6: inside a Debian 13
# "trixie" root made with debootstrap from Debian's archive, with the same
# packages tools/bootstrap.sh installs on Debian 12 (there: libtorch-dev 2.6.0,
# python3-torch 2.6, abseil 20240722, GCC 14, bazel-bootstrap 4.2.3).
#
# The root is made once (a few minutes, ~2.5 GiB) and cached under
# ${XDG_CACHE_HOME:-~/.cache}/strata/trixie-root; later runs reuse it, and its
# own Bazel output base and disk cache (inside the root) keep rebuilds
# incremental. The checkout is bind-mounted at /strata; Bazel's convenience
# symlinks (bazel-bin, ...) are not written there, so the host's stay valid.
#
# Usage (as root, on Debian 12 amd64 with network access to Debian's archive):
#   tools/libtorch2/run.sh                   # the whole suite: tools/test.sh
#   tools/libtorch2/run.sh bazel run //launch/train:train -- --steps=50
#   tools/libtorch2/run.sh --shell           # an interactive shell in the root
#   tools/libtorch2/run.sh --rebuild-root    # make the root anew, then run
# Environment: STRATA_TRIXIE_ROOT (the root's directory),
#   STRATA_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

log() { echo "[libtorch2] $*" >&2; }
die() { echo "[libtorch2] ERROR: $*" >&2; exit 1; }

# Each run has a mount namespace of its own: its bind mounts are private to
# it and go with it, so two runs on the same root at once (CI's LibTorch 2.6
# half and a shell, say) never unmount each other's /strata. (A run that
# exited would otherwise detach the checkout under the other's feet: its
# working directory gone, its next file access "No such file or directory".)
if [[ -z "${STRATA_LIBTORCH2_OWN_MOUNTS:-}" && $(id -u) -eq 0 ]] \
    && command -v unshare >/dev/null 2>&1; then
  STRATA_LIBTORCH2_OWN_MOUNTS=1 exec unshare --mount --propagation private -- "$0" "$@"
fi

checkout=$(cd "$(dirname "$0")/../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/strata
root=${STRATA_TRIXIE_ROOT:-$cache/trixie-root}
mirror=${STRATA_DEBIAN_MIRROR:-http://deb.debian.org/debian}

shell=0
rebuild=0
while (($#)); do
  case "$1" in
    --shell) shell=1; shift ;;
    --rebuild-root) rebuild=1; shift ;;
    --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
command=("$@")
((${#command[@]})) || command=(tools/test.sh)

[[ $(id -u) -eq 0 ]] || die "run as root: debootstrap, chroot and bind mounts need it."
command -v debootstrap >/dev/null 2>&1 || {
  log "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
    || die "'apt-get install debootstrap' failed; run 'apt-get update' and check that Debian's archive is reachable."
}

# --- The root ----------------------------------------------------------------
# Made in "$root.partial" and renamed when complete, so an interrupted run
# never leaves a root that looks ready.
make_root() {
  local partial="$root.partial"
  rm -rf "$partial"
  mkdir -p "$(dirname "$root")" "$cache"
  local packages
  packages=$("$checkout/tools/bootstrap.sh" --print-packages | paste -sd, -)
  log "making a Debian 13 root in $root (debootstrap from $mirror; a few minutes)"
  local start=$SECONDS
  # debootstrap configures the base packages in an order in which grpc's
  # post-install script fails (it needs packages configured after it), and
  # then gives up; 'apt-get -f install' inside the root finishes the job. Any
  # other debootstrap failure (download, unpack) is fatal.
  if ! debootstrap --variant=minbase --include="$packages" trixie "$partial" "$mirror" \
      >"$cache/trixie-debootstrap.log" 2>&1; then
    grep -q "Failure while configuring base packages" "$cache/trixie-debootstrap.log" \
      || die "debootstrap failed; see $cache/trixie-debootstrap.log (last lines: $(tail -n 3 "$cache/trixie-debootstrap.log" | tr '\n' ' '))"
    log "debootstrap left packages unconfigured (grpc's known ordering problem); finishing with 'apt-get -f install'"
  fi
  mount -t proc proc "$partial/proc" || die "cannot mount /proc in $partial"
  local rc=0
  chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    apt-get -f install -y -qq >>"$cache/trixie-debootstrap.log" 2>&1 || rc=$?
  umount -l "$partial/proc"
  ((rc == 0)) || die "'apt-get -f install' in the new root failed; see $cache/trixie-debootstrap.log"
  local audit
  audit=$(chroot "$partial" dpkg --audit 2>&1)
  [[ -z "$audit" ]] || die "packages in the new root are still not configured: $audit"
  local p
  for p in ${packages//,/ }; do
    chroot "$partial" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || die "package $p is not installed in the new root; see $cache/trixie-debootstrap.log"
  done
  rm -rf "$partial/debootstrap"
  # Bazel inside the root: no convenience symlinks in the shared checkout
  # (they would point into the root and break the host's).
  echo "build --symlink_prefix=/" >"$partial/etc/bazel.bazelrc"
  mkdir -p "$partial/strata"
  mv "$partial" "$root"
  log "root ready in $((SECONDS - start)) s: $(chroot "$root" dpkg-query -W -f='libtorch-dev ${Version}, ' libtorch-dev)$(chroot "$root" g++ --version | head -n1)"
}

if ((rebuild)) && [[ -d "$root" ]]; then
  log "removing $root"
  rm -rf "$root"
fi
[[ -d "$root" ]] || make_root

# --- Mounts ------------------------------------------------------------------
mounts=()
cleanup() {
  local i
  # Bazel's server outlives the command and would keep the mounts busy.
  if [[ -d "$root/strata/tools" ]]; then
    chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root \
      bash -c 'cd /strata && bazel shutdown' >/dev/null 2>&1 || true
  fi
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -l "${mounts[i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
bind() {  # bind SOURCE TARGET-inside-root
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2" || die "cannot bind-mount $1 at $root$2"
  mounts+=("$root$2")
}
mount -t proc proc "$root/proc" || die "cannot mount /proc in $root"
mounts+=("$root/proc")
bind /dev /dev
bind /dev/pts /dev/pts
bind /dev/shm /dev/shm  # Gloo and c10d's stores use shared memory and sockets.
bind /sys /sys
bind "$checkout" /strata
# The CUDA toolkit and NCCL headers, read-only, for the CUDA compile check
# (tools/ci_libtorch2.sh): the root's LibTorch 2.6 ships ATen/cuda and
# c10/cuda headers but Debian 13 has no CUDA 13 toolkit.
if [[ -d /usr/local/cuda/include ]]; then
  bind "$(readlink -f /usr/local/cuda)" /usr/local/cuda
  mount -o remount,bind,ro "$root/usr/local/cuda" 2>/dev/null || true
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

env=(/usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
     LANG=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}")
# A root made before a package joined tools/bootstrap.sh's list gets it here
# (bootstrap is idempotent: it installs only what is missing).
chroot "$root" "${env[@]}" /strata/tools/bootstrap.sh \
  || die "tools/bootstrap.sh failed inside the root $root"
if ((shell)); then
  chroot "$root" "${env[@]}" bash -c 'cd /strata && exec bash -i'
else
  log "running in the trixie root: ${command[*]}"
  chroot "$root" "${env[@]}" bash -c 'cd /strata && exec "$@"' bash "${command[@]}"
fi
