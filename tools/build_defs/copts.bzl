"""Compiler options shared by every Strata target."""

# Warnings are errors on Strata's own code (not on LibTorch's or other system
# headers, which GCC treats as system headers). Kept on with GCC 12 (Debian
# 12) and GCC 14 (Debian 13): -Wall and -Wextra but for the two below. The
# CMake build drops -Werror with -DSTRATA_WERROR=OFF (another compiler's new
# warnings must not stop a user's build).
STRATA_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",  # LibTorch's inline headers trip this constantly.
    "-Wno-sign-compare",
]
