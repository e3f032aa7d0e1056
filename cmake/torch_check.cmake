# Finds LibTorch and refuses, at configure time, one Strata cannot build
# against, naming what was found and what is needed.
#
# Strata needs LibTorch >= 1.13 (Debian 12's; trixie's 2.6 and PyTorch's
# downloads work too) built with c10d and Gloo (USE_DISTRIBUTED, USE_GLOO),
# with the C++11 ABI the system's abseil, glog, gflags and protobuf use.
# Debian ships Gloo as its own libgloo.so; a PyTorch download has it inside
# libtorch_cpu.so. comm/ calls Gloo directly, so where Gloo is separate it is
# linked too.
#
# strata_find_torch() (a macro: find_package's imported targets and
# variables land in the caller's scope) sets, besides find_package(Torch)'s
# TORCH_LIBRARIES and TORCH_INCLUDE_DIRS:
#   STRATA_GLOO_LIBRARIES  libgloo when Gloo is not inside LibTorch, else empty
#
# Kept apart from the rest of the build so that tools/cmake_torch_version_test.sh
# can run it against fake LibTorch installations in seconds.
include_guard(GLOBAL)
include(CheckCXXSourceCompiles)
include(CMakePushCheckState)

set(STRATA_MIN_TORCH_VERSION 1.13)

# A program that links only if LibTorch has c10d's ProcessGroupGloo and
# Gloo's TCP transport is reachable (inside LibTorch, or from a separate
# libgloo). Declared by hand rather than through ProcessGroupGloo.hpp:
# compiling against LibTorch's headers takes ~20 s, linking this takes one.
# The c10d symbol is getContext(unsigned), which comm/ring_context.cc calls
# and whose signature is the same from 1.13 to 2.11 (createDefaultDevice's
# is not: 2.11 added an argument).
set(_STRATA_GLOO_PROBE [=[
#include <memory>
namespace gloo {
class Context;
namespace transport {
class Device;
namespace tcp {
struct attr;
std::shared_ptr<Device> CreateDevice(const attr&);
}  // namespace tcp
}  // namespace transport
}  // namespace gloo
namespace c10d {
class ProcessGroupGloo {
 public:
  std::shared_ptr<gloo::Context> getContext(unsigned int tag);
};
}  // namespace c10d
int main(int argc, char**) {
  // Referenced, never called: the probe only has to link.
  if (argc > 99) {
    return static_cast<c10d::ProcessGroupGloo*>(nullptr)->getContext(0) != nullptr;
  }
  if (argc > 98) {
    return gloo::transport::tcp::CreateDevice(
               *static_cast<const gloo::transport::tcp::attr*>(nullptr)) != nullptr;
  }
  return 0;
}
]=])

# Stops configuring: the reason (the arguments, concatenated), what was found
# and where, what is needed and how to point CMake at another LibTorch.
function(_strata_torch_fail)
  string(CONCAT reason ${ARGV})
  if(Torch_VERSION)
    set(found "LibTorch ${Torch_VERSION}")
  else()
    set(found "LibTorch of unknown version (no TorchConfigVersion.cmake)")
  endif()
  message(FATAL_ERROR
    "Unsupported LibTorch: ${found} at ${Torch_DIR} (Torch_DIR).\n"
    "${reason}\n"
    "Strata needs LibTorch >= ${STRATA_MIN_TORCH_VERSION} built with distributed support "
    "(c10d, USE_DISTRIBUTED=1) and Gloo (USE_GLOO=1), with the C++11 ABI. "
    "Debian's libtorch-dev (1.13 in Debian 12, 2.6 in Debian 13) and PyTorch's cxx11-ABI "
    "LibTorch downloads are.\n"
    "Point CMake at another LibTorch with -DTorch_DIR=<directory holding TorchConfig.cmake>, "
    "or configure a fresh build directory with -DCMAKE_PREFIX_PATH=<LibTorch prefix>: an unpacked "
    "LibTorch download, or the output of\n"
    "  python3 -c \"import torch; print(torch.utils.cmake_prefix_path)\"")
endfunction()

# Checks the LibTorch find_package(Torch) found; sets STRATA_GLOO_LIBRARIES
# in the caller's scope.
function(strata_check_torch)
  if(NOT Torch_VERSION OR Torch_VERSION VERSION_LESS STRATA_MIN_TORCH_VERSION)
    _strata_torch_fail("It is older than ${STRATA_MIN_TORCH_VERSION}, or does not say its version.")
  endif()

  set(header torch/csrc/distributed/c10d/ProcessGroupGloo.hpp)
  set(found_header)
  foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
    if(EXISTS "${dir}/${header}")
      set(found_header "${dir}/${header}")
      break()
    endif()
  endforeach()
  if(NOT found_header)
    string(REPLACE ";" " " dirs "${TORCH_INCLUDE_DIRS}")
    _strata_torch_fail("It has no c10d with Gloo: ${header} is not under its include "
                       "directories (${dirs}).")
  endif()

  if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
    _strata_torch_fail("It is built with the pre-C++11 ABI (TORCH_CXX_FLAGS: ${TORCH_CXX_FLAGS}), "
                       "which cannot link with the system's abseil, glog, gflags and protobuf; "
                       "PyTorch's \"cxx11 ABI\" LibTorch downloads use the C++11 ABI.")
  endif()

  # Gloo inside LibTorch (PyTorch's builds), or a separate libgloo (Debian).
  # The results are cached under a key of this LibTorch, so that pointing
  # Torch_DIR elsewhere checks again.
  string(MD5 key "${Torch_DIR};${Torch_VERSION};${TORCH_LIBRARIES}")
  get_filename_component(torch_prefix "${Torch_DIR}/../../.." ABSOLUTE)
  find_library(STRATA_GLOO_LIBRARY gloo HINTS "${torch_prefix}/lib" "${torch_prefix}/../lib")
  cmake_push_check_state(RESET)
  set(CMAKE_REQUIRED_QUIET ON)
  set(CMAKE_REQUIRED_LIBRARIES ${TORCH_LIBRARIES})
  check_cxx_source_compiles("${_STRATA_GLOO_PROBE}" STRATA_TORCH_HAS_GLOO_${key})
  set(gloo_libraries)
  if(NOT STRATA_TORCH_HAS_GLOO_${key} AND STRATA_GLOO_LIBRARY)
    set(CMAKE_REQUIRED_LIBRARIES ${TORCH_LIBRARIES} ${STRATA_GLOO_LIBRARY})
    check_cxx_source_compiles("${_STRATA_GLOO_PROBE}" STRATA_TORCH_WITH_LIBGLOO_${key})
    if(STRATA_TORCH_WITH_LIBGLOO_${key})
      set(gloo_libraries ${STRATA_GLOO_LIBRARY})
    endif()
  endif()
  cmake_pop_check_state()
  if(NOT STRATA_TORCH_HAS_GLOO_${key} AND NOT gloo_libraries)
    if(STRATA_GLOO_LIBRARY)
      set(tried "not even with ${STRATA_GLOO_LIBRARY} added")
    else()
      set(tried "and there is no separate libgloo")
    endif()
    string(REPLACE ";" " " libraries "${TORCH_LIBRARIES}")
    _strata_torch_fail("Its libraries (${libraries}) do not provide "
                       "c10d::ProcessGroupGloo and Gloo's TCP transport (${tried}): "
                       "a LibTorch built without USE_DISTRIBUTED or USE_GLOO.")
  endif()
  if(gloo_libraries)
    set(gloo "Gloo from ${gloo_libraries}")
  else()
    set(gloo "Gloo inside LibTorch")
  endif()
  message(STATUS "LibTorch ${Torch_VERSION} at ${Torch_DIR}: c10d with ${gloo}")
  set(STRATA_GLOO_LIBRARIES "${gloo_libraries}" PARENT_SCOPE)
endfunction()

macro(strata_find_torch)
  # PyTorch's wheels name protobuf::libprotobuf in torch_cpu's link
  # interface: define it first (the build needs protobuf anyway).
  find_package(Protobuf QUIET)
  find_package(Torch QUIET)
  if(NOT Torch_FOUND)
    message(FATAL_ERROR
      "LibTorch not found (no TorchConfig.cmake on CMAKE_PREFIX_PATH: ${CMAKE_PREFIX_PATH}). "
      "Strata needs LibTorch >= ${STRATA_MIN_TORCH_VERSION} built with c10d and Gloo: install "
      "Debian's libtorch-dev (tools/bootstrap.sh does), or pass -DCMAKE_PREFIX_PATH=<LibTorch "
      "prefix> (e.g. the output of python3 -c \"import torch; print(torch.utils.cmake_prefix_path)\") "
      "or -DTorch_DIR=<directory holding TorchConfig.cmake>.")
  endif()
  strata_check_torch()
endmacro()
