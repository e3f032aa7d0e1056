#!/usr/bin/env python3
"""Checks that Strata's packages depend on each other only downwards.

The layers (docs/ARCHITECTURE.md), from the top:
  launch, benchmarks  ->  checkpoint/strategy (+ checkpoint/testing)
  ->  strategies  ->  optim, checkpoint  ->  comm  ->  models, data
  ->  serialization, text  ->  base  ->  third_party
A package may depend on packages of its own layer or below. Each entry below
covers a package and its subpackages, except the subpackages that have an
entry of their own: `checkpoint` is the formats, which must not reach
strategies; `checkpoint/strategy` (the Strategy-level API and strata_ckpt)
and `checkpoint/testing` (trained strategies for the checkpoint tests) sit
above strategies.

Runs `bazel query` (needs a Bazel workspace); prints each violation as
"<from> depends on <to>" and exits 1 if there is one.
"""
import os
import subprocess
import sys

TOP = ["launch", "benchmarks"]
# Package -> packages it must never reach (directly or transitively).
FORBIDDEN = {
    "base": ["serialization", "text", "models", "data", "comm", "optim",
             "checkpoint", "strategies"] + TOP,
    "text": ["serialization", "models", "data", "comm", "optim", "checkpoint",
             "strategies"] + TOP,
    "serialization": ["models", "data", "comm", "optim", "checkpoint",
                      "strategies"] + TOP,
    "models": ["data", "comm", "optim", "checkpoint", "strategies"] + TOP,
    "data": ["models", "comm", "optim", "checkpoint", "strategies"] + TOP,
    "comm": ["optim", "checkpoint", "strategies"] + TOP,
    "optim": ["checkpoint", "strategies"] + TOP,
    "checkpoint": ["strategies"] + TOP,
    "strategies": ["checkpoint"] + TOP,
    "checkpoint/strategy": TOP,
    "checkpoint/testing": TOP,
}


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
        # The subpackages with entries of their own are not this entry's.
        exclude = "".join(f" - //{sub}/..." for sub in FORBIDDEN
                          if sub.startswith(pkg + "/") and exists(sub))
        for upper in filter(exists, forbidden):
            hits = query(f"kind(rule, //{pkg}/...{exclude}) intersect "
                         f"rdeps(//..., //{upper}/...)")
            hits = [h for h in hits if not h.startswith(f"//{upper}")]
            for h in hits:
                problems.append(f"{h} depends on //{upper}/...")
    for p in sorted(set(problems)):
        print(p)
    if problems:
        print(f"check_layering: {len(set(problems))} upward dependencies")
        return 1
    print("check_layering: every dependency points down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
