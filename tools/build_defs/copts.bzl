"""Compiler options shared by every Strata target."""

STRATA_COPTS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",  # LibTorch's inline headers trip this constantly.
    "-Wno-sign-compare",
]
