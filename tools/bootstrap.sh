#!/usr/bin/env bash
# Installs every Debian package Strata needs to build, test and benchmark.
# Idempotent: packages already present are not reinstalled and apt's lists are
# refreshed only when a package is missing.
#
# Supported: Debian 12 "bookworm" (LibTorch 1.13.1, the default) and Debian 13
# "trixie" (LibTorch 2.6.0; tools/libtorch2/run.sh builds such a root here).
#
# Usage: tools/bootstrap.sh                  (as root, or with passwordless sudo)
#        tools/bootstrap.sh --print-packages (the package list, one a line)
set -euo pipefail

log() { echo "[bootstrap] $*" >&2; }
die() { echo "[bootstrap] ERROR: $*" >&2; exit 1; }

PACKAGES=(
  # Build systems and toolchain (CMake: the CMake build and its CI checks;
  # ccache: the CMake half of CI rebuilds only what changed).
  bazel-bootstrap g++ git ca-certificates cmake ccache
  # abseil's link flags come from pkg-config (third_party/pkg_config_repository.bzl).
  pkgconf
  # The format check (tools/check_format.sh) of the test suite.
  clang-format
  # LibTorch with c10d (1.13.1 on Debian 12, 2.6.0 on Debian 13), and the Gloo library it is built on.
  libtorch-dev libgloo-dev
  # fp32 GEMM: without the OpenBLAS backend LibTorch falls back to reference BLAS (~40x slower).
  libopenblas0-pthread
  # Libraries.
  libabsl-dev libgflags-dev libgoogle-glog-dev libprotobuf-dev protobuf-compiler zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # SentencePiece: Llama 2's tokenizer.model (//text:sentencepiece_tokenizer).
  libsentencepiece-dev
  # JSON for Modern C++ (header-only; 3.11.2 on Debian 12): train --deepspeed_config.
  nlohmann-json3-dev
  # Python's torch: interoperability tests (torch.load) and peer benchmarks.
  python3 python3-torch python3-numpy
)

if [[ "${1:-}" == "--print-packages" ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

# --- Machine checks --------------------------------------------------------
[[ -r /etc/os-release ]] || die "cannot read /etc/os-release; Strata supports Debian 12 (bookworm) and 13 (trixie)."
. /etc/os-release
if [[ "${ID:-}" != "debian" || ( "${VERSION_ID:-}" != "12" && "${VERSION_ID:-}" != "13" ) ]]; then
  die "this machine is '${PRETTY_NAME:-unknown}'; Strata's bootstrap supports Debian 12 (bookworm, LibTorch 1.13.1) and Debian 13 (trixie, LibTorch 2.6.0) only, because it takes LibTorch and Bazel 4.2.3 from those releases' archives. On another Linux, build with CMake against any LibTorch >= 1.13 (README, \"CMake\")."
fi
arch=$(dpkg --print-architecture)
[[ "$arch" == "amd64" ]] || die "architecture '$arch' is not supported; Strata is built and tested on amd64 only."

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "not running as root and 'sudo' is not installed; run this script as root."
  SUDO="sudo -n"
  $SUDO true 2>/dev/null || die "not running as root and sudo needs a password; run 'sudo tools/bootstrap.sh' once."
fi

# --- Packages ----------------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  log "all ${#PACKAGES[@]} packages already installed."
else
  log "installing ${#missing[@]} missing packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || die "'apt-get update' failed; check that Debian's archive is reachable."
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "'apt-get install ${missing[*]}' failed; see apt's output above."
  log "installed: ${missing[*]}"
fi

# --- Post-install checks ---------------------------------------------------
[[ -f /usr/include/torch/csrc/api/include/torch/torch.h ]] || die "libtorch-dev is installed but its headers are missing under /usr/include/torch."
[[ -f /usr/include/torch/csrc/distributed/c10d/ProcessGroupGloo.hpp ]] || die "LibTorch is installed without c10d's ProcessGroupGloo header; Strata needs the Debian libtorch-dev build."
command -v bazel >/dev/null 2>&1 || die "bazel is not on PATH after installing bazel-bootstrap."
# Make sure the OpenBLAS pthread variant backs libblas.so.3 (update-alternatives may
# point at the reference BLAS when several are installed).
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
if [[ "$blas" != *openblas* ]]; then
  alt=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas-pthread | head -n1 || true)
  [[ -n "$alt" ]] || die "libblas.so.3 resolves to '$blas' and no OpenBLAS alternative is registered; reinstall libopenblas0-pthread."
  log "pointing libblas.so.3 at $alt"
  $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu "$alt" >/dev/null
fi
log "ready: $(bazel --version 2>/dev/null | head -n1), LibTorch $(dpkg-query -W -f='${Version}' libtorch-dev), BLAS $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
