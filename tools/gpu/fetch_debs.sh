#!/usr/bin/env bash
# Downloads (never installs) the Debian 12 packages of Strata's C++
# dependencies other than LibTorch into DIR, for tools/gpu/build_with_wheel.sh
# on a machine that has a PyTorch wheel but not these libraries. Run on a
# Debian 12 machine whose apt reaches Debian's archive (about 8 MB).
set -euo pipefail
dir=${1:?usage: fetch_debs.sh DIR}
mkdir -p "$dir"
cd "$dir"
apt-get download \
  libabsl-dev libabsl20220623 libgflags-dev libgflags2.2 \
  libgoogle-glog-dev libgoogle-glog0v6 libunwind8 libunwind-dev liblzma-dev \
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler \
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian \
  nlohmann-json3-dev zlib1g-dev
# Gloo's headers: PyTorch's wheels have Gloo inside libtorch_cpu.so but ship
# no headers for it, and comm/ compiles against them. Debian 13's (a 2023
# Gloo) are close to the wheels' (build_with_wheel.sh adapts the one
# signature that changed since); Debian 12's are too old for LibTorch 2.x.
curl -sSfO "http://deb.debian.org/debian/pool/main/g/gloo/libgloo-dev_0.0~git20231202.5354032-3+b2_amd64.deb"
