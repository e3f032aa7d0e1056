#!/usr/bin/env python3
"""Compiles (objects, no link) every Strata source with a CUDA code path,
from the compile commands of a CMake build configured with -DSTRATA_CUDA=ON:
nothing reaches the GPU machine uncompiled.

A source has a CUDA code path when it includes a CUDA, NCCL or LibTorch CUDA
header (cuda_runtime*.h, nccl.h, ATen/cuda/..., c10/cuda/...) or is compiled
only for CUDA builds (a #if on USE_C10D_NCCL or STRATA_CUDA). Each such
source is one case in RESULTS ("cuda_compile:<path>\\tpassed|failed"); a
failure prints the compiler's first errors. Exits 1 if none was found (the
check would prove nothing) or any failed.

Usage: cuda_compile_check.py COMPILE_COMMANDS_JSON RESULTS_FILE [--jobs N]
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

CUDA_PATH = re.compile(
    r'#\s*include\s*[<"](cuda[a-z_]*\.h|nccl\.h|ATen/cuda/|c10/cuda/)'
    r'|#\s*if.*\b(USE_C10D_NCCL|STRATA_CUDA)\b')


def has_cuda_path(path):
    try:
        with open(path, encoding="utf-8") as f:
            return CUDA_PATH.search(f.read()) is not None
    except OSError:
        return False


def compile_one(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    p = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
    return entry["file"], p.returncode, p.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("compile_commands")
    parser.add_argument("results")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    with open(args.compile_commands) as f:
        entries = json.load(f)
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    chosen = [e for e in entries
              if os.path.abspath(e["file"]).startswith(root + os.sep)
              and "/genfiles/" not in e["file"] and has_cuda_path(e["file"])]
    failed = 0
    with open(args.results, "a") as out, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        if not chosen:
            print("cuda_compile_check: no source with a CUDA code path in "
                  f"{args.compile_commands}; was it configured with -DSTRATA_CUDA=ON?")
            out.write("cuda_compile_check\tfailed\n")
            return 1
        for path, rc, err in pool.map(compile_one, chosen):
            rel = os.path.relpath(path, root)
            if rc == 0:
                out.write(f"cuda_compile:{rel}\tpassed\n")
            else:
                failed += 1
                out.write(f"cuda_compile:{rel}\tfailed\n")
                print(f"cuda_compile_check: {rel} does not compile:")
                print("\n".join(err.splitlines()[:30]))
    print(f"cuda_compile_check: {len(chosen) - failed} of {len(chosen)} sources with CUDA "
          "code paths compile")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
