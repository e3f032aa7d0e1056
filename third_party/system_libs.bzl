"""Maps the Debian-installed libraries Strata uses into Bazel repositories.

Everything lives under /usr (installed by tools/bootstrap.sh); nothing is
downloaded. Headers under /usr/include are on the compiler's built-in search
path, so most wrappers only carry link flags; LibTorch's C++ API headers live
in a directory of their own and get a repository so that they can be declared.
"""

load("//third_party:cuda_repository.bzl", "local_cuda_repository")
load("//third_party:pkg_config_repository.bzl", "pkg_config_repository")

def strata_system_libs():
    native.new_local_repository(
        name = "libtorch_api",
        path = "/usr/include/torch/csrc/api/include",
        # Through Label: resolved in this repository also when
        # another workspace calls this macro (@strata, README.md "Use Strata
        # from your project").
        build_file = str(Label("//third_party:libtorch_api.BUILD")),
    )

    # abseil's libraries for the modules Strata includes, with everything
    # they need, as this Debian release splits them (pkg_config_repository.bzl).
    pkg_config_repository(
        name = "system_absl",
        modules = [
            "absl_status",
            "absl_statusor",
            "absl_strings",
            "absl_str_format",
            "absl_time",
            "absl_synchronization",
            "absl_flat_hash_set",
            "absl_cord",
        ],
    )

    # CUDA toolkit and NCCL, optional: an empty stand-in on machines without
    # the toolkit (see cuda_repository.bzl).
    local_cuda_repository(name = "local_cuda")
