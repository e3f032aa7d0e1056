#!/usr/bin/env bash
# Downloads (never installs) the Debian 12 packages of Strata's C++
# dependencies other than LibTorch (tools/gpu/debs.txt) into DIR, for
# tools/gpu/check.sh and build_with_wheel.sh on a machine that has a PyTorch
# wheel but not these libraries. Run on a Debian 12 machine whose apt reaches
# Debian's archive. DIR holds 23 files, 8.0 MiB (measured 2026-11-28): it
# travels to the GPU machine with the checkout (`.debs` in the repository
# root is ignored by git).
set -euo pipefail
dir=${1:?usage: fetch_debs.sh DIR}
list="$(cd "$(dirname "$0")" && pwd)/debs.txt"
mkdir -p "$dir"
cd "$dir"
mapfile -t packages < <(sed 's/#.*//; /^[[:space:]]*$/d' "$list" | grep -vx libgloo-dev)
apt-get download "${packages[@]}"
# Gloo's headers: PyTorch's wheels have Gloo inside libtorch_cpu.so but ship
# no headers for it, and comm/ compiles against them. Debian 13's (a 2023
# Gloo) are close to the wheels' (build_with_wheel.sh adapts the one
# signature that changed since); Debian 12's are too old for LibTorch 2.x.
curl -sSfO "http://deb.debian.org/debian/pool/main/g/gloo/libgloo-dev_0.0~git20231202.5354032-3+b2_amd64.deb"
echo "fetch_debs.sh: $(ls ./*.deb | wc -l) files, $(du -sh . | cut -f1) in $dir"
