#!/usr/bin/env python3
"""Checks that Strata's packages depend on each other only downwards.

The layers (docs/ARCHITECTURE.md), from the top:
  launch, benchmarks  ->  strategies  ->  optim, checkpoint  ->  comm
  ->  models, data  ->  serialization, text  ->  base  ->  third_party
A package may depend on packages of its own layer rule below; the checkpoint
FORMAT libraries (everything in checkpoint/ except the Strategy-level API
`checkpoint:checkpoint` and the `strata_ckpt` tool and their tests) must not
depend on strategies/ at all.

Runs `bazel query` (needs a Bazel workspace); prints each violation as
"<from> depends on <to>" and exits 1 if there is one.
"""
import os
import subprocess
import sys

# Package -> packages it must never reach (directly or transitively).
FORBIDDEN = {
    "base": ["serialization", "text", "models", "data", "comm", "optim",
             "checkpoint", "strategies", "launch", "benchmarks"],
    "text": ["serialization", "models", "data", "comm", "optim", "checkpoint",
             "strategies", "launch", "benchmarks"],
    "serialization": ["models", "data", "comm", "optim", "checkpoint",
                      "strategies", "launch", "benchmarks"],
    "models": ["data", "comm", "optim", "checkpoint", "strategies", "launch",
               "benchmarks"],
    "data": ["models", "comm", "optim", "checkpoint", "strategies", "launch",
             "benchmarks"],
    "comm": ["optim", "checkpoint", "strategies", "launch", "benchmarks"],
    "optim": ["checkpoint", "strategies", "launch", "benchmarks"],
    "checkpoint": ["launch", "benchmarks"],
    "strategies": ["checkpoint", "launch", "benchmarks"],
}
# Targets of checkpoint/ that may use strategies (the Strategy-level API). The
# formats' own tests are here too: they are the resharding acceptance tests
# (save under one real strategy and world size, load under another), so they
# build strategies through test_util; the format libraries they test do not.
# torch_interop_test saves through the Strategy-level API (SaveCheckpoint);
# hf_load_test loads through it (LoadHfWeights).
CHECKPOINT_STRATEGY_LEVEL = ["checkpoint", "strata_ckpt", "checkpoint_test",
                             "strata_ckpt_test", "checkpoint_benchmark",
                             "test_util", "full_test", "local_test",
                             "sharded_test", "torch_interop_test",
                             "hf_load_test"]


def query(expr):
    out = subprocess.run(["bazel", "query", "--noshow_progress", expr],
                         capture_output=True, text=True)
    if out.returncode not in (0, 3):
        print(out.stderr, file=sys.stderr)
        sys.exit(f"check_layering: bazel query failed: {expr}")
    return [l for l in out.stdout.split("\n") if l.startswith("//")]


def exists(pkg):
    return os.path.isfile(os.path.join(pkg, "BUILD"))


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    problems = []
    for pkg, forbidden in FORBIDDEN.items():
        if not exists(pkg):
            continue
        exclude = ""
        if pkg == "checkpoint":
            exclude = "".join(f" - //checkpoint:{t}" for t in CHECKPOINT_STRATEGY_LEVEL)
        for upper in filter(exists, forbidden):
            hits = query(f"kind(rule, //{pkg}/...{exclude}) intersect "
                         f"rdeps(//..., //{upper}/...)")
            hits = [h for h in hits if not h.startswith(f"//{upper}")]
            for h in hits:
                problems.append(f"{h} depends on //{upper}/...")
    # The checkpoint formats and strategies.
    fmt = "//checkpoint/..." + "".join(
        f" - //checkpoint:{t}" for t in CHECKPOINT_STRATEGY_LEVEL)
    for h in query(f"kind(rule, {fmt}) intersect rdeps(//..., //strategies/...)"):
        if not h.startswith("//strategies"):
            problems.append(f"{h} (a checkpoint format library) depends on //strategies/...")
    for p in sorted(set(problems)):
        print(p)
    if problems:
        print(f"check_layering: {len(set(problems))} upward dependencies")
        return 1
    print("check_layering: every dependency points down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
