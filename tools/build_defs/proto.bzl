"""strata_cc_proto_library: a cc_library from a .proto, compiled by Debian's protoc.

Bazel's own proto rules would download protobuf's sources; Strata builds
offline against the system protobuf (protobuf-compiler and libprotobuf-dev
3.21, installed by tools/bootstrap.sh), whose protoc and runtime match.
"""

load("//tools/build_defs:copts.bzl", "STRATA_COPTS")

def strata_cc_proto_library(name, src, deps = [], visibility = None):
    """Generates <name> (a cc_library) from one .proto file.

    Args:
      name: the cc_library's name.
      src: the .proto file, in this package.
      deps: other strata_cc_proto_library targets whose .proto files `src`
        imports (by their workspace-relative paths).
      visibility: of the cc_library.
    """
    if not src.endswith(".proto"):
        fail("strata_cc_proto_library: src must be a .proto file, got " + src)
    base = src[:-len(".proto")]

    # Paths relative to Strata's root also when another workspace builds it
    # as an external repository (@strata: its files under external/strata/).
    root = ""
    if native.repository_name() != "@":
        root = "/external/" + native.repository_name()[1:]
    native.genrule(
        name = name + "_genproto",
        srcs = [src] + [d + "_srcs" for d in deps],
        outs = [base + ".pb.h", base + ".pb.cc"],
        cmd = " ".join([
            "/usr/bin/protoc",
            "--proto_path=." + root,
            "--proto_path=$(GENDIR)" + root,
            "--cpp_out=$(GENDIR)" + root,
            "$(location " + src + ")",
        ]),
    )
    native.filegroup(
        name = name + "_srcs",
        srcs = [src] + [d + "_srcs" for d in deps],
        visibility = visibility,
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        # Generated code: warnings are protoc's, not ours.
        copts = STRATA_COPTS + ["-Wno-unused-parameter", "-w"],
        deps = deps + ["//third_party:protobuf"],
        visibility = visibility,
    )
