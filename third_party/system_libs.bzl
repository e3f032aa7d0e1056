"""Maps the Debian-installed libraries Strata uses into Bazel repositories.

Everything lives under /usr (installed by tools/bootstrap.sh); nothing is
downloaded. Headers under /usr/include are on the compiler's built-in search
path, so most wrappers only carry link flags; LibTorch's C++ API headers live
in a directory of their own and get a repository so that they can be declared.
"""

def strata_system_libs():
    native.new_local_repository(
        name = "libtorch_api",
        path = "/usr/include/torch/csrc/api/include",
        build_file = "//third_party:libtorch_api.BUILD",
    )

    # CUDA toolkit and NCCL; only targets built with --config=cuda use it, and
    # Bazel reads it only then (machines without /usr/local/cuda are fine).
    native.new_local_repository(
        name = "local_cuda",
        path = "/usr/local/cuda",
        build_file = "//third_party:local_cuda.BUILD",
    )
