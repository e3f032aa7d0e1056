# Bazel-like rules for Strata's CMake build.
#
# Each package directory has a CMakeLists.txt next to its BUILD file that
# calls these functions with the same names, sources and dependencies, in
# Bazel's label syntax, so that the two read alike and
# tools/check_cmake_sync.py can compare them:
#
#   strata_cc_library(NAME group SRCS group.cc HDRS group.h
#                     COPTS ${STRATA_COPTS} DEPS :ring //base:status //third_party:absl)
#
# Target names: the label //<package>:<name> becomes the CMake target
# <package with "/" replaced by "_">_<name> (//comm:group -> comm_group,
# //comm/testing:multi_rank -> comm_testing_multi_rank), with the alias
# strata::<package with "/" replaced by "::">::<name> for libraries
# (strata::comm::group). Binaries and tests keep their Bazel name as the file
# name.
#
# Runfiles: like `bazel test`, tests find binaries and data files under
# $TEST_SRCDIR/strata/<workspace-relative path> and run in that directory.
# Every executable is written to ${STRATA_RUNFILES}/strata/<package>/<name>
# and every source file named in a DATA list is symlinked to the same place,
# so one tree serves every test (and `train` run from it finds
# launch/train/configs/ the way `bazel run` does).
include_guard(GLOBAL)

set(STRATA_RUNFILES "${CMAKE_BINARY_DIR}/runfiles")
set(STRATA_RUNFILES_ROOT "${STRATA_RUNFILES}/strata")
# Generated sources (.pb.h/.pb.cc, build_info.cc), under their
# workspace-relative paths: the include root for "checkpoint/metadata.pb.h".
set(STRATA_GENFILES "${CMAKE_BINARY_DIR}/genfiles")
set(STRATA_INCLUDE_DIRS "${PROJECT_SOURCE_DIR}" "${STRATA_GENFILES}")
# Every generated source (protobuf, the build info), without compiling
# anything: what a compile database's users (tools/sanitize.sh's
# clang-tidy) need before they read sources. Not part of `all`.
add_custom_target(strata_generated)
# What CI's LibTorch 2.x half builds and runs (tools/ci_libtorch2.sh without
# --all): every binary but the benchmarks, and the tests tagged
# `torch_version` (behaviour that depends on the LibTorch version: fp16, the
# planner, what base/torch_compat hides, PyTorch's side of file interop).
# Not part of `all`'s meaning; `all` builds everything.
add_custom_target(strata_torch_version_ci)

# The warning flags every target passes as COPTS, read from
# tools/build_defs/copts.bzl so that both builds use one list.
function(_strata_read_copts out)
  set(bzl "${PROJECT_SOURCE_DIR}/tools/build_defs/copts.bzl")
  file(READ "${bzl}" text)
  string(REGEX REPLACE "#[^\n]*" "" text "${text}")
  string(REGEX MATCH "STRATA_COPTS = \\[[^]]*\\]" block "${text}")
  string(REGEX MATCHALL "\"[^\"]*\"" copts "${block}")
  list(TRANSFORM copts REPLACE "\"" "")
  if(NOT copts)
    message(FATAL_ERROR "cannot read STRATA_COPTS = [...] from ${bzl}")
  endif()
  if(NOT STRATA_WERROR)
    list(REMOVE_ITEM copts -Werror)
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${bzl}")
  set(${out} "${copts}" PARENT_SCOPE)
endfunction()
_strata_read_copts(STRATA_COPTS)

# Bazel's test timeouts by size (seconds).
set(_STRATA_TIMEOUT_small 60)
set(_STRATA_TIMEOUT_medium 300)
set(_STRATA_TIMEOUT_large 900)
set(_STRATA_TIMEOUT_enormous 3600)

# The package of the CMakeLists.txt being processed: its directory relative
# to the repository root ("comm", "comm/testing").
function(_strata_package out)
  file(RELATIVE_PATH pkg "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}")
  set(${out} "${pkg}" PARENT_SCOPE)
endfunction()

# Splits a label into package and name: "//a/b:c" -> a/b, c; "//a/b" -> a/b,
# b; ":c" and "c" -> the current package, c.
function(_strata_split_label label pkg_out name_out)
  if(label MATCHES "^//([^:]*):(.+)$")
    set(pkg "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
  elseif(label MATCHES "^//([^:]+)$")
    set(pkg "${CMAKE_MATCH_1}")
    get_filename_component(name "${pkg}" NAME)
  elseif(label MATCHES "^:(.+)$")
    _strata_package(pkg)
    set(name "${CMAKE_MATCH_1}")
  else()
    _strata_package(pkg)
    set(name "${label}")
  endif()
  set(${pkg_out} "${pkg}" PARENT_SCOPE)
  set(${name_out} "${name}" PARENT_SCOPE)
endfunction()

# The CMake target of a label (//comm:group -> comm_group).
function(strata_target out label)
  _strata_split_label("${label}" pkg name)
  if(pkg STREQUAL "")
    set(${out} "strata_${name}" PARENT_SCOPE)
  else()
    string(REPLACE "/" "_" prefix "${pkg}")
    set(${out} "${prefix}_${name}" PARENT_SCOPE)
  endif()
endfunction()

# Fails on arguments a rule does not know: a typo must not be ignored.
function(_strata_check_parsed rule)
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${rule}(${ARG_NAME}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_NAME)
    message(FATAL_ERROR "${rule}: NAME is required")
  endif()
endfunction()

# Deps as CMake targets. Each is recorded and checked to exist once every
# package is read (strata_check_targets): CMake would otherwise take a
# misspelt target name for a library to link with -l.
function(_strata_deps out owner)
  set(targets)
  foreach(label IN LISTS ARGN)
    strata_target(t "${label}")
    list(APPEND targets "${t}")
    set_property(GLOBAL APPEND PROPERTY STRATA_REFERENCES "${owner}|${label}|${t}")
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

# Sources as paths: files of the package, or labels of generated files
# (strata_build_info_cc, strata_cc_proto_library).
function(_strata_sources out)
  set(paths)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "^(//|:)")
      _strata_split_label("${src}" pkg name)
      get_property(generated GLOBAL PROPERTY "STRATA_GENERATED_//${pkg}:${name}")
      if(NOT generated)
        message(FATAL_ERROR "${src} is not a generated source defined before its use")
      endif()
      list(APPEND paths ${generated})
    else()
      list(APPEND paths "${CMAKE_CURRENT_SOURCE_DIR}/${src}")
    endif()
  endforeach()
  set(${out} "${paths}" PARENT_SCOPE)
endfunction()

# Makes `dir`, under the runfiles root, a directory, first removing whatever
# an older layout left on its path that is not one: a build tree configured
# before a package was split keeps a binary or link where a package directory
# now goes (runfiles/strata/launch/train was the train binary before launch/
# was split into subpackages).
function(_strata_runfiles_dir dir)
  set(path "${dir}")
  string(FIND "${path}" "${STRATA_RUNFILES_ROOT}/" at)
  while(at EQUAL 0)
    if((EXISTS "${path}" OR IS_SYMLINK "${path}") AND NOT IS_DIRECTORY "${path}")
      file(REMOVE "${path}")
    endif()
    get_filename_component(path "${path}" DIRECTORY)
    string(FIND "${path}" "${STRATA_RUNFILES_ROOT}/" at)
  endwhile()
  file(MAKE_DIRECTORY "${dir}")
endfunction()

# Makes `DATA` available to `target` in the runfiles tree: source files are
# symlinked there (a path in this package, possibly a glob like
# configs/*.flags, or a label //pkg:path/to/file); labels of executables are
# built before `target` (they are in the tree already).
function(_strata_data target)
  foreach(item IN LISTS ARGN)
    if(item MATCHES "^(//|:)")
      _strata_split_label("${item}" pkg name)
      set(src "${PROJECT_SOURCE_DIR}/${pkg}/${name}")
      if(EXISTS "${src}" AND NOT IS_DIRECTORY "${src}")
        set(files "${pkg}/${name}")
      else()
        _strata_deps(dep "${target}" "${item}")
        add_dependencies(${target} ${dep})
        continue()
      endif()
    else()
      _strata_package(pkg)
      file(GLOB files RELATIVE "${PROJECT_SOURCE_DIR}" CONFIGURE_DEPENDS
           "${CMAKE_CURRENT_SOURCE_DIR}/${item}")
      if(NOT files)
        message(FATAL_ERROR "${target}: data ${item} matches no file in ${pkg}/")
      endif()
    endif()
    foreach(file IN LISTS files)
      get_filename_component(dir "${STRATA_RUNFILES_ROOT}/${file}" DIRECTORY)
      _strata_runfiles_dir("${dir}")
      file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${file}"
           "${STRATA_RUNFILES_ROOT}/${file}" SYMBOLIC)
    endforeach()
  endforeach()
endfunction()

# Common to libraries, binaries and tests. Installed, the headers' include
# root is <prefix>/include/strata (see "Installing" below).
function(_strata_compile target kind)
  set(includes)
  foreach(dir IN LISTS STRATA_INCLUDE_DIRS)
    list(APPEND includes "$<BUILD_INTERFACE:${dir}>")
  endforeach()
  list(APPEND includes "$<INSTALL_INTERFACE:${STRATA_INSTALL_INCLUDEDIR}>")
  if(kind STREQUAL "INTERFACE")
    target_include_directories(${target} INTERFACE ${includes})
    target_compile_features(${target} INTERFACE cxx_std_17)
    target_link_libraries(${target} INTERFACE ${ARGN})
    return()
  endif()
  target_include_directories(${target} PUBLIC ${includes})
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_link_libraries(${target} PUBLIC ${ARGN})
endfunction()

# --- Installing ----------------------------------------------------------
# `cmake --install` installs the package Strata: every library that is not
# test-only (TESTONLY, a testing/ package, benchmarks/, tools/) or part of
# the binaries (launch/: strata_install_binaries installs those) — `manual`
# ones too: a CUDA build's comm:group links comm:nccl_communicator,
# with its headers under <prefix>/include/strata/<package>/ (so
# #include "strategies/fsdp.h" works as in the tree), its archive under
# <prefix>/lib/strata/, and an exported target in the Strata:: namespace:
# //<package>:<name> is Strata::<package with "/" as "::">::<name>, and a
# package's own-name target (//strategies:strategies, the package's public
# libraries) is Strata::<package> (Strata::strategies). The same names exist
# as aliases in the build tree. The //third_party wrappers they link are
# exported too (Strata::third_party::absl); lib/cmake/Strata/StrataConfig.cmake
# finds what those wrap (cmake/StrataConfig.cmake.in).
include(GNUInstallDirs)
set(STRATA_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/strata")
set(STRATA_INSTALL_LIBDIR "${CMAKE_INSTALL_LIBDIR}/strata")
set(STRATA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Strata")
# Every installed library and binary: built by strata_torch_version_ci, so
# that CI's build can be installed.
add_custom_target(strata_installable)
add_dependencies(strata_torch_version_ci strata_installable)

# Whether a library of `pkg` is installed.
function(_strata_installed out pkg testonly tags)
  set(installed TRUE)
  if(testonly OR pkg MATCHES "(^|/)testing$"
     OR pkg MATCHES "^(benchmarks|launch|tools)(/|$)")
    set(installed FALSE)
  endif()
  set(${out} ${installed} PARENT_SCOPE)
endfunction()

# The exported name of //<pkg>:<name> (without Strata::).
function(_strata_export_name out pkg name)
  string(REPLACE "/" "::" namespace "${pkg}")
  get_filename_component(last "${pkg}" NAME)
  if(name STREQUAL last)
    set(${out} "${namespace}" PARENT_SCOPE)
  else()
    set(${out} "${namespace}::${name}" PARENT_SCOPE)
  endif()
endfunction()

# Installs and exports library `target` of the current package with its
# headers HDRS (paths relative to `header_root`).
function(_strata_install_library target name header_root)
  _strata_package(pkg)
  _strata_export_name(export "${pkg}" "${name}")
  get_property(taken GLOBAL PROPERTY "STRATA_EXPORT_${export}")
  if(taken)
    message(FATAL_ERROR "//${pkg}:${name} and ${taken} would both be exported as Strata::${export}")
  endif()
  set_property(GLOBAL PROPERTY "STRATA_EXPORT_${export}" "//${pkg}:${name}")
  set_target_properties(${target} PROPERTIES EXPORT_NAME "${export}")
  add_library(Strata::${export} ALIAS ${target})
  install(TARGETS ${target} EXPORT StrataTargets
          ARCHIVE DESTINATION "${STRATA_INSTALL_LIBDIR}")
  foreach(header IN LISTS ARGN)
    get_filename_component(dir "${pkg}/${header}" DIRECTORY)
    install(FILES "${header_root}/${header}"
            DESTINATION "${STRATA_INSTALL_INCLUDEDIR}/${dir}")
  endforeach()
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    add_dependencies(strata_installable ${target})
  endif()
endfunction()

# Bazel's cc_library. A library with sources is a static library; one with
# headers only is an INTERFACE library. COPTS apply to its own sources only
# (as in Bazel); LINKOPTS reach everything that links it.
function(strata_cc_library)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "TESTONLY" "NAME"
                        "SRCS;HDRS;DEPS;COPTS;LINKOPTS;TAGS")
  _strata_check_parsed(strata_cc_library)
  _strata_package(pkg)
  strata_target(target ":${ARG_NAME}")
  _strata_sources(srcs ${ARG_SRCS})
  _strata_deps(deps "${target}" ${ARG_DEPS})
  set(hdrs ${ARG_HDRS})
  list(TRANSFORM hdrs PREPEND "${CMAKE_CURRENT_SOURCE_DIR}/")
  if(srcs)
    add_library(${target} STATIC ${srcs} ${hdrs})
    target_compile_options(${target} PRIVATE ${ARG_COPTS})
    # `manual` libraries are not part of //... in Bazel: not of `all` here.
    if("manual" IN_LIST ARG_TAGS)
      set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    endif()
    _strata_compile(${target} STATIC ${deps})
  else()
    add_library(${target} INTERFACE)
    _strata_compile(${target} INTERFACE ${deps})
  endif()
  target_link_options(${target} INTERFACE ${ARG_LINKOPTS})
  string(REPLACE "/" "::" namespace "${pkg}")
  add_library(strata::${namespace}::${ARG_NAME} ALIAS ${target})
  _strata_installed(installed "${pkg}" "${ARG_TESTONLY}" "${ARG_TAGS}")
  if(installed)
    _strata_install_library(${target} ${ARG_NAME} "${CMAKE_CURRENT_SOURCE_DIR}" ${ARG_HDRS})
  endif()
endfunction()

# An executable in the runfiles tree: ${STRATA_RUNFILES_ROOT}/<pkg>/<name>.
function(_strata_executable target name)
  _strata_package(pkg)
  _strata_sources(srcs ${ARG_SRCS})
  _strata_deps(deps "${target}" ${ARG_DEPS})
  add_executable(${target} ${srcs})
  _strata_runfiles_dir("${STRATA_RUNFILES_ROOT}/${pkg}")
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "${name}"
    RUNTIME_OUTPUT_DIRECTORY "${STRATA_RUNFILES_ROOT}/${pkg}")
  target_compile_options(${target} PRIVATE ${ARG_COPTS})
  target_link_options(${target} PRIVATE ${ARG_LINKOPTS})
  _strata_compile(${target} EXECUTABLE ${deps})
  _strata_data(${target} ${ARG_DATA})
  # `manual` targets are not part of //... in Bazel: not of `all` here.
  if("manual" IN_LIST ARG_TAGS)
    set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endif()
endfunction()

# Bazel's cc_binary. Binaries tagged "benchmark" are built like any other.
function(strata_cc_binary)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "TESTONLY" "NAME"
                        "SRCS;DEPS;COPTS;LINKOPTS;DATA;TAGS")
  _strata_check_parsed(strata_cc_binary)
  strata_target(target ":${ARG_NAME}")
  _strata_executable(${target} ${ARG_NAME})
  if(NOT ARG_TESTONLY AND NOT "benchmark" IN_LIST ARG_TAGS
     AND NOT "manual" IN_LIST ARG_TAGS)
    add_dependencies(strata_torch_version_ci ${target})
  endif()
endfunction()

# Registers `command` as the test //<pkg>:<name> the way `bazel test` runs
# it: in the runfiles root, with TEST_SRCDIR, TEST_WORKSPACE, a fresh
# TEST_TMPDIR and `env` in an otherwise fixed environment (cmake/run_test.sh),
# the timeout of its size, and its tags and size as labels (`ctest -L small`). Its cases land in
# testlogs/<pkg>/<name>/test.xml (XML_OUTPUT_FILE), which tools/count_tests.py reads. Tests tagged
# manual or benchmark are not registered (.bazelrc's --test_tag_filters=-benchmark); `gpu` tests
# are, and skip themselves where no GPU is visible.
function(_strata_add_test name size tags env)
  _strata_package(pkg)
  strata_target(target ":${name}")
  if(NOT size)
    set(size medium)  # Bazel's default.
  endif()
  if(NOT DEFINED _STRATA_TIMEOUT_${size})
    message(FATAL_ERROR "${target}: SIZE must be small, medium, large or enormous, got ${size}")
  endif()
  foreach(skip IN ITEMS manual benchmark)
    if(skip IN_LIST tags)
      return()
    endif()
  endforeach()
  if("torch_version" IN_LIST tags)
    add_dependencies(strata_torch_version_ci ${target})
  endif()
  set(tmpdir "${CMAKE_BINARY_DIR}/testtmp/${pkg}/${name}")
  set(labels ${size} ${tags})
  set(environment
    "TEST_SRCDIR=${STRATA_RUNFILES}" "RUNFILES_DIR=${STRATA_RUNFILES}"
    "TEST_WORKSPACE=strata" "TEST_TMPDIR=${tmpdir}"
    "TEST_TARGET=//${pkg}:${name}" "TEST_SIZE=${size}"
    "XML_OUTPUT_FILE=${CMAKE_BINARY_DIR}/testlogs/${pkg}/${name}/test.xml" ${env})
  add_test(NAME "//${pkg}:${name}"
           COMMAND "${PROJECT_SOURCE_DIR}/cmake/run_test.sh" ${environment} -- ${ARGN}
           WORKING_DIRECTORY "${STRATA_RUNFILES_ROOT}")
  set_tests_properties("//${pkg}:${name}" PROPERTIES
    TIMEOUT ${_STRATA_TIMEOUT_${size}}
    LABELS "${labels}")
endfunction()

# Bazel's cc_test. ARGS and ENV (KEY=VALUE) are the test's `args` and `env`.
function(strata_cc_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;SIZE"
                        "SRCS;DEPS;COPTS;LINKOPTS;DATA;TAGS;ARGS;ENV")
  _strata_check_parsed(strata_cc_test)
  strata_target(target ":${ARG_NAME}")
  _strata_executable(${target} ${ARG_NAME})
  _strata_add_test(${ARG_NAME} "${ARG_SIZE}" "${ARG_TAGS}" "${ARG_ENV}"
                   "$<TARGET_FILE:${target}>" ${ARG_ARGS})
endfunction()

# Bazel's sh_test: the script is symlinked into the runfiles tree and run
# from there.
function(strata_sh_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;SIZE" "SRCS;DATA;TAGS;ARGS;ENV")
  _strata_check_parsed(strata_sh_test)
  list(LENGTH ARG_SRCS n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "strata_sh_test(${ARG_NAME}): SRCS must be one script")
  endif()
  _strata_package(pkg)
  strata_target(target ":${ARG_NAME}")
  # A target to carry the data dependencies, as Bazel's test rule does.
  add_custom_target(${target})
  _strata_data(${target} ${ARG_SRCS} ${ARG_DATA})
  _strata_add_test(${ARG_NAME} "${ARG_SIZE}" "${ARG_TAGS}" "${ARG_ENV}"
                   "${STRATA_RUNFILES_ROOT}/${pkg}/${ARG_SRCS}" ${ARG_ARGS})
endfunction()

# tools/build_defs/proto.bzl's strata_cc_proto_library: protoc --cpp_out on
# one .proto, paths relative to the repository root (so imports and the
# generated #include lines are workspace-relative), compiled without
# warnings (they are protoc's). DEPS are other proto libraries whose .proto
# files SRC imports.
function(strata_cc_proto_library)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;SRC" "DEPS")
  _strata_check_parsed(strata_cc_proto_library)
  if(NOT ARG_SRC MATCHES "\\.proto$")
    message(FATAL_ERROR "strata_cc_proto_library(${ARG_NAME}): SRC must be a .proto file, got ${ARG_SRC}")
  endif()
  _strata_package(pkg)
  strata_target(target ":${ARG_NAME}")
  string(REGEX REPLACE "\\.proto$" "" base "${pkg}/${ARG_SRC}")
  set(pb_h "${STRATA_GENFILES}/${base}.pb.h")
  set(pb_cc "${STRATA_GENFILES}/${base}.pb.cc")
  set(proto_deps)
  foreach(label IN LISTS ARG_DEPS)
    strata_target(dep "${label}")
    list(APPEND proto_deps "$<TARGET_PROPERTY:${dep},STRATA_PROTO_SRC>")
  endforeach()
  add_custom_command(
    OUTPUT "${pb_h}" "${pb_cc}"
    COMMAND "${Protobuf_PROTOC_EXECUTABLE}"
            "--proto_path=${PROJECT_SOURCE_DIR}"
            "--cpp_out=${STRATA_GENFILES}"
            "${pkg}/${ARG_SRC}"
    DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${ARG_SRC}" ${proto_deps}
            "${Protobuf_PROTOC_EXECUTABLE}"
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
    COMMENT "protoc ${pkg}/${ARG_SRC}"
    VERBATIM)
  file(MAKE_DIRECTORY "${STRATA_GENFILES}/${pkg}")
  add_custom_target(${target}_sources DEPENDS "${pb_h}" "${pb_cc}")
  add_dependencies(strata_generated ${target}_sources)
  _strata_deps(deps "${target}" ${ARG_DEPS} //third_party:protobuf)
  add_library(${target} STATIC "${pb_cc}" "${pb_h}")
  target_compile_options(${target} PRIVATE ${STRATA_COPTS} -Wno-unused-parameter -w)
  _strata_compile(${target} STATIC ${deps})
  set_target_properties(${target} PROPERTIES
    STRATA_PROTO_SRC "${CMAKE_CURRENT_SOURCE_DIR}/${ARG_SRC}")
  string(REPLACE "/" "::" namespace "${pkg}")
  add_library(strata::${namespace}::${ARG_NAME} ALIAS ${target})
  _strata_installed(installed "${pkg}" FALSE "")
  if(installed)
    string(REGEX REPLACE "\\.proto$" ".pb.h" header "${ARG_SRC}")
    _strata_install_library(${target} ${ARG_NAME} "${STRATA_GENFILES}/${pkg}" "${header}")
  endif()
endfunction()

# //base:build_info_cc, Bazel's stamped genrule: OUT (in this package's
# genfiles) defines strata::GitCommit() returning the commit
# tools/workspace_status.sh reports, or "unknown". The target runs at every
# build but cmake/build_info.cmake rewrites OUT only when its text changes,
# so build_info.cc recompiles only when the commit (or its -dirty) does.
function(strata_build_info_cc)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;OUT" "")
  _strata_check_parsed(strata_build_info_cc)
  _strata_package(pkg)
  strata_target(target ":${ARG_NAME}")
  set(out "${STRATA_GENFILES}/${pkg}/${ARG_OUT}")
  add_custom_target(${target}
    COMMAND "${CMAKE_COMMAND}" "-DSOURCE_DIR=${PROJECT_SOURCE_DIR}" "-DOUT=${out}"
            -P "${PROJECT_SOURCE_DIR}/cmake/build_info.cmake"
    BYPRODUCTS "${out}"
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
    COMMENT "Stamping the git commit into ${pkg}/${ARG_OUT}"
    VERBATIM)
  add_dependencies(strata_generated ${target})
  set_property(GLOBAL PROPERTY "STRATA_GENERATED_//${pkg}:${ARG_NAME}" "${out}")
  set_property(GLOBAL PROPERTY "STRATA_GENERATED_//${pkg}:${ARG_OUT}" "${out}")
endfunction()

# A //third_party wrapper: an INTERFACE target named like the Bazel one
# (third_party_absl for //third_party:absl) that links LIBS (imported targets
# from find_package, library paths or flags) and adds DEFINES.
# TESTONLY wrappers (GoogleTest, Google Benchmark) are not exported.
function(strata_system_library)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "TESTONLY" "NAME" "LIBS;DEFINES")
  _strata_check_parsed(strata_system_library)
  strata_target(target ":${ARG_NAME}")
  add_library(${target} INTERFACE)
  target_link_libraries(${target} INTERFACE ${ARG_LIBS})
  target_compile_definitions(${target} INTERFACE ${ARG_DEFINES})
  add_library(strata::third_party::${ARG_NAME} ALIAS ${target})
  if(NOT ARG_TESTONLY)
    _strata_install_library(${target} ${ARG_NAME} "")
  endif()
endfunction()

# Installs the binaries LABELS (//launch/train:train, ...) to <prefix>/bin,
# with the run path of the libraries they linked (a LibTorch outside the
# system's library path).
function(strata_install_binaries)
  foreach(label IN LISTS ARGN)
    strata_target(target "${label}")
    if(NOT TARGET ${target})
      message(FATAL_ERROR "strata_install_binaries: no binary ${label}")
    endif()
    set_target_properties(${target} PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
    install(TARGETS ${target} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
    add_dependencies(strata_installable ${target})
  endforeach()
endfunction()

# The package files: lib/cmake/Strata/StrataConfig.cmake (finds the
# dependencies as this build found them, then includes StrataTargets.cmake)
# and StrataConfigVersion.cmake (PROJECT_VERSION; same major version).
function(strata_install_package)
  include(CMakePackageConfigHelpers)
  install(EXPORT StrataTargets NAMESPACE Strata:: FILE StrataTargets.cmake
          DESTINATION "${STRATA_INSTALL_CMAKEDIR}")
  # How the top-level CMakeLists.txt found gflags and glog: their CMake
  # packages, or plain libraries.
  set(STRATA_GFLAGS_CONFIG FALSE)
  if(gflags_FOUND)
    set(STRATA_GFLAGS_CONFIG TRUE)
  endif()
  if(TARGET glog::glog)
    set(STRATA_GLOG_CONFIG TRUE)
  else()
    set(STRATA_GLOG_CONFIG FALSE)
  endif()
  configure_package_config_file(
    "${PROJECT_SOURCE_DIR}/cmake/StrataConfig.cmake.in"
    "${CMAKE_BINARY_DIR}/StrataConfig.cmake"
    INSTALL_DESTINATION "${STRATA_INSTALL_CMAKEDIR}"
    PATH_VARS STRATA_INSTALL_INCLUDEDIR)
  write_basic_package_version_file(
    "${CMAKE_BINARY_DIR}/StrataConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}"
    COMPATIBILITY SameMajorVersion)
  install(FILES "${CMAKE_BINARY_DIR}/StrataConfig.cmake"
                "${CMAKE_BINARY_DIR}/StrataConfigVersion.cmake"
          DESTINATION "${STRATA_INSTALL_CMAKEDIR}")
endfunction()

# Called once every package is read: every label in DEPS or DATA must name a
# target some package defined.
function(strata_check_targets)
  get_property(references GLOBAL PROPERTY STRATA_REFERENCES)
  set(missing)
  foreach(reference IN LISTS references)
    string(REPLACE "|" ";" parts "${reference}")
    list(GET parts 0 owner)
    list(GET parts 1 label)
    list(GET parts 2 target)
    if(NOT TARGET ${target})
      list(APPEND missing "  ${owner}: ${label} (no target ${target})")
    endif()
  endforeach()
  if(missing)
    list(JOIN missing "\n" text)
    message(FATAL_ERROR "Dependencies on targets no CMakeLists.txt defines:\n${text}\n"
            "A package's CMakeLists.txt may be missing from the top-level add_subdirectory list, "
            "or the label is misspelt.")
  endif()
endfunction()
