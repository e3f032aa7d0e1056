#!/bin/bash
# cmake/torch_check.cmake against fake LibTorch installations: each
# unsupported one must fail at configure time with a message naming the
# version found, where (Torch_DIR), what Strata needs and how to point CMake
# at another LibTorch; the system's LibTorch (Debian's, from
# tools/bootstrap.sh) must pass. Configures a project of a few lines, not the
# whole tree: seconds.
#
# Usage: tools/cmake_torch_version_test.sh   (from anywhere; needs cmake, g++)
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cmake_torch_version_test.XXXXXX")"
trap 'rm -rf "${scratch}"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

mkdir -p "${scratch}/project"
cat > "${scratch}/project/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16...3.31)
project(torch_check_test CXX)
include("${root}/cmake/torch_check.cmake")
strata_find_torch()
EOF

# fake_torch NAME VERSION [with-header] [CXX_FLAGS]: a LibTorch prefix whose
# TorchConfig.cmake sets what find_package(Torch) sets, with no libraries.
fake_torch() {
  local prefix="${scratch}/$1" version=$2 header=${3:-} flags=${4:--D_GLIBCXX_USE_CXX11_ABI=1}
  mkdir -p "${prefix}/share/cmake/Torch" "${prefix}/include"
  cat > "${prefix}/share/cmake/Torch/TorchConfig.cmake" <<'EOF'
get_filename_component(_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(TORCH_INCLUDE_DIRS "${_prefix}/include" "${_prefix}/include/torch/csrc/api/include")
set(TORCH_LIBRARIES "")
EOF
  echo "set(TORCH_CXX_FLAGS \"${flags}\")" >> "${prefix}/share/cmake/Torch/TorchConfig.cmake"
  cat > "${prefix}/share/cmake/Torch/TorchConfigVersion.cmake" <<EOF
set(PACKAGE_VERSION "${version}")
if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF
  if [[ -n "${header}" ]]; then
    mkdir -p "${prefix}/include/torch/csrc/distributed/c10d"
    touch "${prefix}/include/torch/csrc/distributed/c10d/ProcessGroupGloo.hpp"
  fi
}

# expect_failure CASE 'CMAKE ARGS' TEXT...: configuring fails, and its output
# has every TEXT.
expect_failure() {
  local name=$1 args=$2
  shift 2
  local out
  # shellcheck disable=SC2086  # args are several words.
  if out="$(cmake -S "${scratch}/project" -B "${scratch}/build-${name}" ${args} 2>&1)"; then
    fail "${name}: configuring succeeded, expected a refusal"
    return
  fi
  # CMake wraps long messages; compare with the line breaks and indents gone.
  local flat
  flat="$(echo "${out}" | tr -s ' \n' ' ')"
  for text in "$@"; do
    [[ "${flat}" == *"${text}"* ]] || fail "${name}: no '${text}' in:"$'\n'"${out}"
  done
}

needs="Strata needs LibTorch >= 1.13 built with distributed support (c10d, USE_DISTRIBUTED=1) and Gloo (USE_GLOO=1)"
how="-DTorch_DIR=<directory holding TorchConfig.cmake>"
prefix_how="-DCMAKE_PREFIX_PATH=<LibTorch prefix>"
python_how='python3 -c "import torch; print(torch.utils.cmake_prefix_path)"'

fake_torch old 1.12.0 with-header
expect_failure too_old "-DTorch_DIR=${scratch}/old/share/cmake/Torch" \
  "Unsupported LibTorch: LibTorch 1.12.0 at ${scratch}/old/share/cmake/Torch (Torch_DIR)" \
  "It is older than 1.13" "${needs}" "${how}" "${prefix_how}" "${python_how}"
# The same LibTorch found through CMAKE_PREFIX_PATH.
expect_failure too_old_prefix "-DCMAKE_PREFIX_PATH=${scratch}/old" \
  "LibTorch 1.12.0 at ${scratch}/old/share/cmake/Torch" "It is older than 1.13"

fake_torch no_c10d 2.6.0
expect_failure no_c10d "-DTorch_DIR=${scratch}/no_c10d/share/cmake/Torch" \
  "LibTorch 2.6.0 at ${scratch}/no_c10d/share/cmake/Torch" \
  "It has no c10d with Gloo: torch/csrc/distributed/c10d/ProcessGroupGloo.hpp is not under" \
  "${needs}" "${how}"

fake_torch no_gloo_symbols 2.6.0 with-header
expect_failure no_gloo_symbols "-DTorch_DIR=${scratch}/no_gloo_symbols/share/cmake/Torch" \
  "LibTorch 2.6.0 at ${scratch}/no_gloo_symbols/share/cmake/Torch" \
  "do not provide c10d::ProcessGroupGloo" "${needs}"

fake_torch old_abi 2.6.0 with-header -D_GLIBCXX_USE_CXX11_ABI=0
expect_failure old_abi "-DTorch_DIR=${scratch}/old_abi/share/cmake/Torch" \
  "LibTorch 2.6.0" "pre-C++11 ABI" "${needs}"

# No LibTorch at all (find_package told to find none).
expect_failure missing "-DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON" \
  "LibTorch not found" "${how}" "${python_how}"

# The system's LibTorch passes (the check must not refuse a good one).
if out="$(cmake -S "${scratch}/project" -B "${scratch}/build-system" 2>&1)"; then
  [[ "${out}" == *"c10d with Gloo"* ]] || fail "system LibTorch: no 'c10d with Gloo' in:"$'\n'"${out}"
else
  fail "system LibTorch refused:"$'\n'"${out}"
fi

if ((failures > 0)); then
  echo "cmake_torch_version_test: ${failures} failures"
  exit 1
fi
echo PASS
