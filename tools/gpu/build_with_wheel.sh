#!/usr/bin/env bash
# Builds Strata with CMake against the CUDA LibTorch inside a PyTorch pip
# wheel, on a machine that has the wheel, the CUDA toolkit, CMake and ninja
# but none of Strata's other C++ dependencies (the GPU machines Strata is
# measured on). Those come from Debian 12's .deb files, unpacked with
# `dpkg -x` into a prefix of their own (never into /).
#
#   tools/gpu/fetch_debs.sh .debs                     # on a Debian 12 machine
#   tools/gpu/build_with_wheel.sh .debs build-gpu [TARGET...]
#
# The whole GPU check (this script's configure, the build of the gpu tests,
# running them, the GPU figures) is tools/gpu/check.sh OUT_DIR.
#
# Environment: PYTHON (default python3, the one whose torch is used),
# STRATA_DEPS_PREFIX (default /opt/strata-deps), JOBS (default: all cores),
# STRATA_CUDA (default ON), STRATA_CONFIGURE_ONLY=1 (unpack and configure,
# build nothing: tools/gpu/check.sh times the build as a step of its own).
# Prints `source <file>` for the environment the built binaries need
# (LD_LIBRARY_PATH of the unpacked libraries).
set -euo pipefail

debs=${1:?usage: build_with_wheel.sh DEB_DIR BUILD_DIR [TARGET...]}
build=${2:?usage: build_with_wheel.sh DEB_DIR BUILD_DIR [TARGET...]}
shift 2
python=${PYTHON:-python3}
prefix=${STRATA_DEPS_PREFIX:-/opt/strata-deps}
jobs=${JOBS:-$(nproc)}
cuda=${STRATA_CUDA:-ON}

die() { echo "build_with_wheel.sh: $*" >&2; exit 1; }
ls "$debs"/*.deb >/dev/null 2>&1 || die "no .deb files in '$debs' (tools/gpu/fetch_debs.sh fetches them)"
command -v cmake >/dev/null || die "cmake is not on PATH"
command -v ninja >/dev/null || die "ninja is not on PATH"

mkdir -p "$prefix"
for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
lib="$prefix/usr/lib/x86_64-linux-gnu"

read -r torch_cmake torch_lib nvidia_root < <("$python" - <<'EOF'
import os, torch
root = os.path.dirname(torch.__file__)
nv = os.path.join(os.path.dirname(root), "nvidia")
print(os.path.join(root, "share", "cmake"), os.path.join(root, "lib"), nv)
EOF
) || die "'$python' cannot import torch"

# NCCL from the wheel's nvidia-nccl package when the toolkit has none; the
# package ships libnccl.so.2 only, so give find_library a libnccl.so.
nccl_root=""
for d in "$nvidia_root/nccl" "$nvidia_root/cu13" /usr/local/cuda; do
  if ls "$d"/lib/libnccl.so* >/dev/null 2>&1; then nccl_root=$d; break; fi
done
if [[ -n "$nccl_root" && ! -e "$nccl_root/lib/libnccl.so" ]]; then
  mkdir -p "$prefix/nccl/lib"
  ln -sf "$(ls "$nccl_root"/lib/libnccl.so.* | head -n1)" "$prefix/nccl/lib/libnccl.so"
  ln -sfn "$nccl_root/include" "$prefix/nccl/include"
  nccl_root="$prefix/nccl"
fi

# The wheel has Gloo inside libtorch_cpu.so but no headers for it; the
# .debs hold Debian 13's. Gloo's rendezvous::Context::connectFullMesh takes
# the store as a shared_ptr since 2025 (LibTorch 2.11's Gloo), by reference
# before: declare it as the library defines it.
context_h="$prefix/usr/include/gloo/rendezvous/context.h"
[[ -f "$context_h" ]] || die "no Gloo headers in '$debs' (libgloo-dev; tools/gpu/fetch_debs.sh fetches them)"
# Also, where the library defines no gloo::rendezvous::Store::~Store (an
# inline destructor in its Gloo), declare it inline: the headers' out-of-line
# one would be an undefined reference. (nm's output is kept in a file: grep
# -q closing the pipe early would fail the pipeline under pipefail.)
symbols="$build/libtorch_cpu.symbols"
mkdir -p "$build"
nm -DC --defined-only "$torch_lib/libtorch_cpu.so" >"$symbols"
if grep -q 'gloo::rendezvous::Context::connectFullMesh(std::shared_ptr<gloo::rendezvous::Store>' "$symbols"; then
  sed -i 's/^\( *\)Store& store,$/\1std::shared_ptr<Store> store,/' "$context_h"
fi
if ! grep -q 'gloo::rendezvous::Store::~Store()' "$symbols"; then
  sed -i 's/^\( *\)virtual ~Store();$/\1virtual ~Store() = default;/' "$prefix/usr/include/gloo/rendezvous/store.h"
fi

env_file="$build/strata_env.sh"
mkdir -p "$build"
cat >"$env_file" <<EOF
export LD_LIBRARY_PATH="$lib:$torch_lib${nccl_root:+:$nccl_root/lib}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="$prefix/usr/bin:\$PATH"
EOF
# shellcheck disable=SC1090
source "$env_file"

cmake_args=(
  -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_PREFIX_PATH=$prefix/usr;$torch_cmake"
  "-DProtobuf_PROTOC_EXECUTABLE=$prefix/usr/bin/protoc"
  "-DSTRATA_CUDA=$cuda"
)
[[ -d /usr/local/cuda ]] && cmake_args+=("-DCUDAToolkit_ROOT=/usr/local/cuda" "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
[[ -d "$nvidia_root/cudnn" ]] && cmake_args+=("-DCUDNN_ROOT=$nvidia_root/cudnn" "-DCUDNN_INCLUDE_PATH=$nvidia_root/cudnn/include" "-DCUDNN_LIBRARY_PATH=$(ls "$nvidia_root"/cudnn/lib/libcudnn.so* | head -n1)")
[[ -n "$nccl_root" ]] && export NCCL_ROOT="$nccl_root"

echo "== configure (torch: $torch_cmake, nccl: ${nccl_root:-none}, deps: $prefix)"
cmake "${cmake_args[@]}"
if [[ "${STRATA_CONFIGURE_ONLY:-0}" == 1 ]]; then
  echo "== configured; environment for the built binaries: source $env_file"
  exit 0
fi
echo "== build ${*:-all} with $jobs jobs"
status=0
cmake --build "$build" -j "$jobs" ${1:+--target "$@"} -- -k 0 || status=$?
echo "== environment for the built binaries: source $env_file"
exit $status
