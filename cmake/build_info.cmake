# Writes OUT, the stamped //base:build_info_cc: strata::GitCommit() returns
# the commit tools/workspace_status.sh prints for SOURCE_DIR (40 hex digits,
# "-dirty" when tracked files changed), or "unknown" outside a git checkout,
# exactly as the Bazel genrule does with --stamp (the CMake build always
# stamps). Run at every build by the target
# strata_build_info_cc() defines:
#
#   cmake -DSOURCE_DIR=<repository root> -DOUT=<file> -P cmake/build_info.cmake
#
# OUT is rewritten only when its text changes, so that its object file (and
# everything linking it) rebuilds only when the commit does.
execute_process(
  COMMAND "${SOURCE_DIR}/tools/workspace_status.sh"
  WORKING_DIRECTORY "${SOURCE_DIR}"
  OUTPUT_VARIABLE status
  ERROR_QUIET)
set(commit "unknown")
if(status MATCHES "(^|\n)STABLE_GIT_COMMIT ([0-9a-f]+)(-dirty)?\n")
  # CMake's regular expressions have no {40}: check the length apart.
  string(LENGTH "${CMAKE_MATCH_2}" length)
  if(length EQUAL 40)
    set(commit "${CMAKE_MATCH_2}${CMAKE_MATCH_3}")
  endif()
endif()
set(text "#include \"base/build_info.h\"\nnamespace strata {\nconst char* GitCommit() { return \"${commit}\"; }\nbool Stamped() { return true; }\n}  // namespace strata\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
